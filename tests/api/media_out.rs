//! Media the business sends: an upload checked before it reaches Meta and streamed to Meta's
//! upload endpoint (the testkit's fake), then an operator's reply that sends it by its id, or a
//! file at a link.

use parley_testkit::graph::text_message;
use reqwest::Method;
use reqwest::multipart::{Form, Part};
use serde_json::{Value, json};

use crate::helpers::{TestApp, expect_error, expect_status, spawn_app};

const NUMBER: &str = "106540352242922";
const SHEENA: &str = "16505551234";

async fn upload(app: &TestApp, channel: &str, form: Form) -> reqwest::Response {
    app.request(
        Method::POST,
        &format!("/channels/{channel}/waba/media"),
        Some(&app.owner.api_key),
    )
    .multipart(form)
    .send()
    .await
    .expect("upload")
}

fn file(bytes: Vec<u8>, name: &str, mime: &str) -> Form {
    Form::new().part(
        "file",
        Part::bytes(bytes)
            .file_name(name.to_owned())
            .mime_str(mime)
            .expect("mime"),
    )
}

/// A live channel Sheena has written to (her 24-hour window is open).
async fn open_window(app: &TestApp) -> String {
    let channel = app.live_channel(NUMBER).await;
    app.webhook(
        Some(&channel),
        &text_message(NUMBER, SHEENA, "Sheena", "wamid.O1", "Hi"),
    )
    .await;
    app.wait_for_sends(1).await;
    channel
}

async fn reply(app: &TestApp, channel: &str, body: &Value) -> reqwest::Response {
    app.send_json(
        Method::POST,
        &format!("/conversation/+{SHEENA}/reply/{channel}"),
        body,
    )
    .await
}

#[tokio::test]
async fn an_uploaded_picture_is_sent_by_an_operator_with_a_caption() {
    let app = spawn_app().await;
    let channel = open_window(&app).await;
    let bytes: Vec<u8> = (0..10_000).map(|i| (i % 251) as u8).collect();
    let uploaded = upload(
        &app,
        &channel,
        file(bytes.clone(), "receipt.png", "image/png"),
    )
    .await;
    let uploaded = expect_status(uploaded, 201).await["data"].clone();
    assert_eq!(uploaded["kind"], "image");
    assert_eq!(uploaded["size"], 10_000);
    let media_id = uploaded["media_id"].as_str().expect("media_id");
    let at_meta = app.graph.uploads();
    assert_eq!(at_meta.len(), 1);
    assert_eq!(at_meta[0].id, media_id);
    assert_eq!(at_meta[0].mime_type, "image/png");
    assert_eq!(at_meta[0].size, 10_000);
    assert_eq!(at_meta[0].file_name, "receipt.png");
    assert_eq!(at_meta[0].phone_number_id, NUMBER);

    let sent = reply(
        &app,
        &channel,
        &json!({"text": "Here is your receipt", "media": {"kind": "image", "media_id": media_id}}),
    )
    .await;
    expect_status(sent, 200).await;
    let sent = app.wait_for_sends(2).await;
    assert_eq!(sent[1].body["type"], "image");
    assert_eq!(
        sent[1].body["image"],
        json!({"id": media_id, "caption": "Here is your receipt"})
    );
    let messages = app
        .wait_for_messages(&format!("+{SHEENA}"), |all| all.len() >= 3)
        .await;
    let last = messages.last().expect("a message");
    assert_eq!(last["role"], "operator");
    assert_eq!(last["content"], "[image] Here is your receipt");
}

#[tokio::test]
async fn a_document_goes_by_a_link_with_its_name() {
    let app = spawn_app().await;
    let channel = open_window(&app).await;
    let sent = reply(
        &app,
        &channel,
        &json!({"media": {"kind": "document", "link": "https://files.example.com/invoice.pdf",
                          "file_name": "invoice.pdf", "caption": "Your invoice"}}),
    )
    .await;
    expect_status(sent, 200).await;
    let sent = app.wait_for_sends(2).await;
    assert_eq!(
        sent[1].body["document"],
        json!({"link": "https://files.example.com/invoice.pdf", "caption": "Your invoice", "filename": "invoice.pdf"})
    );
}

#[tokio::test]
async fn an_upload_meta_would_refuse_is_refused_before_it_reaches_meta() {
    let app = spawn_app().await;
    let channel = app.live_channel(NUMBER).await;
    let gif = upload(&app, &channel, file(vec![1; 100], "a.gif", "image/gif")).await;
    let body = expect_error(gif, 400, "validation_failed").await;
    assert_eq!(body["details"][0]["path"], json!(["file"]));

    let big = upload(
        &app,
        &channel,
        file(vec![7; 5 * 1024 * 1024 + 1], "big.jpg", "image/jpeg"),
    )
    .await;
    let body = expect_error(big, 413, "file_too_large").await;
    assert_eq!(body["details"][0]["path"], json!(["file"]));
    assert!(
        body["message"]
            .as_str()
            .expect("message")
            .contains("5242880"),
        "{body}"
    );

    let none = upload(&app, &channel, Form::new().text("type", "image/png")).await;
    expect_error(none, 400, "validation_failed").await;
    assert!(app.graph.uploads().is_empty(), "nothing reached Meta");

    // What Meta refuses all the same is a typed refusal with Meta's code.
    app.graph.fail_next_uploads([131053]);
    let refused = upload(&app, &channel, file(vec![1; 100], "a.png", "image/png")).await;
    let body = expect_error(refused, 502, "media_refused").await;
    assert_eq!(body["details"][0]["code"], 131053);
    // A key that may not write cannot upload.
    let reader = app.key_with(&["read"]).await;
    let forbidden = app
        .request(
            Method::POST,
            &format!("/channels/{channel}/waba/media"),
            Some(&reader),
        )
        .multipart(file(vec![1; 10], "a.png", "image/png"))
        .send()
        .await
        .expect("upload");
    expect_error(forbidden, 403, "forbidden").await;
}

#[tokio::test]
async fn a_file_to_send_is_checked_field_by_field() {
    let app = spawn_app().await;
    let channel = open_window(&app).await;
    let cases = [
        (json!({"media": {"kind": "image"}}), json!(["media"])),
        (
            json!({"media": {"kind": "image", "media_id": "1", "link": "https://a.example/x.png"}}),
            json!(["media"]),
        ),
        (
            json!({"media": {"kind": "gif", "media_id": "1"}}),
            json!(["media", "kind"]),
        ),
        (
            json!({"media": {"kind": "image", "link": "http://a.example/x.png"}}),
            json!(["media", "link"]),
        ),
        (
            json!({"media": {"kind": "image", "link": "https://10.0.0.7/x.png"}}),
            json!(["media", "link"]),
        ),
        (
            json!({"media": {"kind": "audio", "media_id": "1", "caption": "hi"}}),
            json!(["media", "caption"]),
        ),
        (
            json!({"media": {"kind": "image", "media_id": "1", "file_name": "a.png"}}),
            json!(["media", "file_name"]),
        ),
        (
            json!({"media": {"kind": "document", "media_id": "1", "file_name": "../a.pdf"}}),
            json!(["media", "file_name"]),
        ),
        (json!({"media": "a picture"}), json!(["media"])),
    ];
    for (body, path) in cases {
        let refused = reply(&app, &channel, &body).await;
        let answer = expect_error(refused, 400, "validation_failed").await;
        assert_eq!(answer["details"][0]["path"], path, "{body}: {answer}");
    }
    assert_eq!(app.graph.sent().len(), 1, "nothing more was sent");
}

#[tokio::test]
async fn a_file_outside_the_window_is_refused_and_nothing_is_stored() {
    let app = spawn_app().await;
    let channel = app.live_channel(NUMBER).await;
    app.put_identity(
        &format!("+{SHEENA}"),
        json!({"phone": format!("+{SHEENA}")}),
    )
    .await;
    let refused = reply(
        &app,
        &channel,
        &json!({"media": {"kind": "image", "media_id": "123"}}),
    )
    .await;
    expect_error(refused, 409, "outside_service_window").await;
    assert!(app.graph.sent().is_empty());
}

#[tokio::test]
async fn a_sandbox_takes_a_persons_file_and_sends_the_businesss_offline() {
    let app = spawn_app().await;
    let (_, channel) = app
        .chat_channel("Be helpful.", json!({"settings": {"vision": true}}))
        .await;
    let bytes: Vec<u8> = (0..4_000).map(|i| (i % 13) as u8).collect();
    let form = Form::new()
        .text("from", "+351912000222")
        .text("name", "Rita")
        .text("caption", "is this the right part?")
        .part(
            "file",
            Part::bytes(bytes.clone())
                .file_name("part.jpg")
                .mime_str("image/jpeg")
                .expect("mime"),
        );
    let accepted = app
        .request(
            Method::POST,
            &format!("/channels/{channel}/sandbox/inbound/media"),
            Some(&app.owner.api_key),
        )
        .multipart(form)
        .send()
        .await
        .expect("inject");
    expect_status(accepted, 201).await;
    // The assistant saw the picture itself, offline.
    let messages = app
        .wait_for_messages("+351912000222", |all| all.len() >= 2)
        .await;
    assert_eq!(
        messages[1]["content"],
        "You said: [image] is this the right part? [image: image/jpeg, 4000 bytes]"
    );
    let kept = &messages[0]["attachments"][0];
    assert_eq!(kept["status"], "stored", "{kept}");
    let id = kept["id"].as_str().expect("id");
    let read = app.get(&format!("/media/{id}")).await;
    assert_eq!(read.status(), 200);
    assert_eq!(read.bytes().await.expect("body").as_ref(), bytes.as_slice());

    // The business answers with a file of its own, uploaded to the sandbox.
    let uploaded = upload(
        &app,
        &channel,
        file(vec![9; 2_000], "guide.pdf", "application/pdf"),
    )
    .await;
    let media_id = expect_status(uploaded, 201).await["data"]["media_id"]
        .as_str()
        .expect("media_id")
        .to_owned();
    let sent = app
        .send_json(
            Method::POST,
            &format!("/conversation/+351912000222/reply/{channel}"),
            &json!({"media": {"kind": "document", "media_id": media_id, "file_name": "guide.pdf"},
                    "text": "Here is the guide"}),
        )
        .await;
    expect_status(sent, 200).await;
    let outbox: Value = app
        .get(&format!("/channels/{channel}/sandbox/outbox"))
        .await
        .json()
        .await
        .expect("outbox");
    let texts: Vec<&str> = outbox["data"]
        .as_array()
        .expect("data")
        .iter()
        .filter_map(|m| m["text"].as_str().or(m["content"].as_str()))
        .collect();
    assert!(
        texts.contains(&"[document: guide.pdf] Here is the guide"),
        "{outbox:#}"
    );
    assert!(app.graph.uploads().is_empty(), "nothing went to Meta");
}
