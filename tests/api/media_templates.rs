//! Templates with a media header: a send, a campaign's flow and a task give the header's file
//! (an upload's media id or a link the egress policy allows); one without it is a 400 naming
//! the field before anything reaches Meta.

use reqwest::Method;
use serde_json::{Value, json};

use crate::flows::{campaign, people};
use crate::helpers::{TestApp, expect_error, expect_status, spawn_app};

const NUMBER: &str = "106540352242922";

/// An approved template whose header shows an image.
fn receipt_ready() -> Value {
    json!({"name": "receipt_ready", "language": "en_US", "status": "APPROVED", "category": "UTILITY",
           "id": "7101", "components": [
               {"type": "HEADER", "format": "IMAGE", "example": {"header_handle": ["4::aW1h"]}},
               {"type": "BODY", "text": "Your receipt for {{1}}", "example": {"body_text": [["Ana"]]}}]})
}

fn send(components: Value) -> Value {
    json!({"identity": {"name": "Ana", "phone": "+5511987654321"}, "templateId": "receipt_ready",
           "templateType": "text", "templateLanguage": "en_US", "templateComponents": components})
}

async fn live(app: &TestApp) -> String {
    app.graph.add_template("waba-1", receipt_ready());
    app.live_channel(NUMBER).await
}

#[tokio::test]
async fn a_send_gives_the_headers_picture_or_is_refused_before_meta() {
    let app = spawn_app().await;
    let channel = live(&app).await;
    let body = json!([{"type": "text", "text": "order #7"}]);
    let refusals = [
        json!({"body": body}),
        json!({"body": body, "header": [{"type": "video", "video": {"id": "42"}}]}),
        json!({"body": body, "header": [{"type": "image", "image": {"link": "https://10.0.0.7/r.png"}}]}),
    ];
    for components in refusals {
        let refused = app.send_template(&channel, &send(components.clone())).await;
        let answer = expect_error(refused, 400, "validation_failed").await;
        assert_eq!(
            answer["details"][0]["path"],
            json!(["templateComponents", "header"]),
            "{components}: {answer}"
        );
    }
    assert!(app.graph.sent().is_empty(), "nothing reached Meta");

    let header = json!([{"type": "image", "image": {"id": "4242"}}]);
    let sent = app
        .send_template(&channel, &send(json!({"header": header, "body": body})))
        .await;
    let sent = expect_status(sent, 200).await;
    assert_eq!(sent["data"]["content"], "[image] Your receipt for order #7");
    let at_meta = app.wait_for_sends(1).await;
    let components = &at_meta[0].body["template"]["components"];
    let header = components
        .as_array()
        .expect("components")
        .iter()
        .find(|c| c["type"] == "header")
        .expect("a header component");
    assert_eq!(
        header["parameters"],
        json!([{"type": "image", "image": {"id": "4242"}}])
    );
}

#[tokio::test]
async fn a_campaign_sends_its_headers_file_to_every_recipient() {
    let app = spawn_app().await;
    let channel = live(&app).await;
    let base = json!({"channelUid": channel, "name": "Receipts", "status": "ACTIVE",
                      "templateName": "receipt_ready", "templateParamsStrategy": "USE_DEFAULT"});
    let without = app.send_json(Method::POST, "/campaigns", &base).await;
    let answer = expect_error(without, 400, "validation_failed").await;
    assert_eq!(
        answer["details"][0]["path"],
        json!(["templateParameters", "header"]),
        "{answer}"
    );
    assert!(
        answer["details"][0]["message"]
            .as_str()
            .is_some_and(|m| m.contains("IMAGE")),
        "{answer}"
    );
    for (file, field) in [
        (json!({"link": "http://files.example.com/r.png"}), "header"),
        (json!({"link": "https://10.0.0.7/r.png"}), "link"),
        (
            json!({"media_id": "1", "link": "https://files.example.com/r.png"}),
            "header",
        ),
    ] {
        let mut body = base.clone();
        body["templateParameters"] = json!({"header": file});
        let refused = app.send_json(Method::POST, "/campaigns", &body).await;
        let answer = expect_error(refused, 400, "validation_failed").await;
        let path = answer["details"][0]["path"].clone();
        assert_eq!(path[0], "templateParameters", "{answer}");
        assert_eq!(
            path.as_array().and_then(|p| p.last()),
            Some(&json!(field)),
            "{answer}"
        );
    }

    let uid = campaign(
        &app,
        &channel,
        "Receipts",
        json!({"templateName": "receipt_ready",
               "templateParameters": {"header": {"link": "https://files.example.com/r.png"}}}),
    )
    .await;
    let people = people(&app, 2).await;
    app.created(
        "/flows",
        json!({"channelUid": channel, "campaignUid": uid, "contactUids": people,
               "configuration": {"pauseBetweenContactsMs": 0}}),
    )
    .await;
    let sent = app.wait_for_sends(2).await;
    for message in &sent {
        let components = message.body["template"]["components"]
            .as_array()
            .expect("components");
        let header = components
            .iter()
            .find(|c| c["type"] == "header")
            .expect("a header component");
        assert_eq!(
            header["parameters"],
            json!([{"type": "image", "image": {"link": "https://files.example.com/r.png"}}])
        );
        let body = components
            .iter()
            .find(|c| c["type"] == "body")
            .expect("body");
        assert_eq!(
            body["parameters"][0]["text"], "Ana",
            "the example fills the body"
        );
    }
}
