//! Media end to end: a picture, voice note or document a person sends is stored with its
//! message, fetched from Meta (the testkit's fake Graph API) into the media store, checked
//! against Meta's digest and the kind's limit, and read back with `GET /media/{id}`.

use parley_testkit::graph::messages_payload;
use reqwest::Method;
use serde_json::{Value, json};

use crate::helpers::{TestApp, expect_error, expect_status, spawn_app, spawn_app_with};

const NUMBER: &str = "106540352242922";
const SHEENA: &str = "16505551234";
const SHEENA_PATH: &str = "+16505551234";

/// `size` bytes that are not all alike.
fn picture(size: usize) -> Vec<u8> {
    (0..size).map(|i| (i * 31 % 251) as u8).collect()
}

fn image_message(wamid: &str, media_id: &str, sha256: &str, caption: &str) -> Value {
    let image = json!({"from": SHEENA, "id": wamid, "timestamp": "1749416383", "type": "image",
                       "image": {"id": media_id, "mime_type": "image/jpeg", "sha256": sha256, "caption": caption}});
    messages_payload(NUMBER, SHEENA, "Sheena", image)
}

/// Polls the person's messages until one carries an attachment that is no longer pending;
/// answers that attachment.
async fn settled_attachment(app: &TestApp) -> Value {
    let messages = app
        .wait_for_messages(SHEENA_PATH, |all| {
            all.iter().any(|m| {
                m["attachments"]
                    .as_array()
                    .is_some_and(|a| a.iter().any(|f| f["status"] != "pending"))
            })
        })
        .await;
    messages
        .iter()
        .flat_map(|m| m["attachments"].as_array().cloned().unwrap_or_default())
        .find(|f| f["status"] != "pending")
        .expect("a settled attachment")
}

/// Every file under the media store's directory, by path.
fn stored_files(app: &TestApp) -> Vec<std::path::PathBuf> {
    fn walk(dir: &std::path::Path, into: &mut Vec<std::path::PathBuf>) {
        for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                walk(&path, into);
            } else {
                into.push(path);
            }
        }
    }
    let mut files = Vec::new();
    walk(&app.data_dir().join("media"), &mut files);
    files
}

/// Waits until the media store holds `count` files: a retention pass marks its rows first and
/// deletes the files after.
async fn wait_stored_files(app: &TestApp, count: usize) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while stored_files(app).len() != count {
        assert!(
            std::time::Instant::now() < deadline,
            "{:?} instead of {count} files",
            stored_files(app)
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn a_picture_is_kept_and_read_back_with_its_type_length_etag_and_ranges() {
    let app = spawn_app().await;
    let channel = app.live_channel(NUMBER).await;
    let bytes = picture(300_000);
    let sha256 = app
        .graph
        .add_media("media-img-1", bytes.clone(), "image/jpeg");
    let payload = image_message("wamid.M1", "media-img-1", &sha256, "my receipt");
    assert_eq!(app.webhook(Some(&channel), &payload).await, 200);

    // The assistant is told what was sent while the file is fetched.
    let sent = app.wait_for_sends(1).await;
    assert_eq!(sent[0].text(), Some("You said: [image] my receipt"));
    let file = settled_attachment(&app).await;
    assert_eq!(file["status"], "stored", "{file}");
    assert_eq!(file["kind"], "image");
    assert_eq!(file["mime_type"], "image/jpeg");
    assert_eq!(file["size"], 300_000);
    assert_eq!(file["caption"], "my receipt");
    assert!(file["failure"].is_null());
    let id = file["id"].as_str().expect("id");
    // The bytes kept count in the workspace's usage, on the channel they came on.
    let usage = expect_status(app.get("/usage?group_by=channel").await, 200).await;
    assert_eq!(usage["data"]["totals"]["media_bytes"], 300_000, "{usage}");
    assert_eq!(usage["data"]["buckets"][0]["channel_id"], channel.as_str());

    let whole = app.get(&format!("/media/{id}")).await;
    assert_eq!(whole.status(), 200);
    assert_eq!(whole.headers()["content-type"], "image/jpeg");
    assert_eq!(whole.headers()["content-length"], "300000");
    assert_eq!(whole.headers()["etag"], format!("\"{sha256}\"").as_str());
    assert_eq!(whole.headers()["accept-ranges"], "bytes");
    assert_eq!(
        whole.bytes().await.expect("body").as_ref(),
        bytes.as_slice()
    );

    let part = app
        .request(
            Method::GET,
            &format!("/media/{id}"),
            Some(&app.owner.api_key),
        )
        .header("range", "bytes=10-19")
        .send()
        .await
        .expect("range");
    assert_eq!(part.status(), 206);
    assert_eq!(part.headers()["content-range"], "bytes 10-19/300000");
    assert_eq!(part.bytes().await.expect("body").as_ref(), &bytes[10..20]);

    let beyond = app
        .request(
            Method::GET,
            &format!("/media/{id}"),
            Some(&app.owner.api_key),
        )
        .header("range", "bytes=400000-")
        .send()
        .await
        .expect("range");
    assert_eq!(beyond.headers()["content-range"], "bytes */300000");
    expect_error(beyond, 416, "range_not_satisfiable").await;

    let again = app
        .request(
            Method::GET,
            &format!("/media/{id}"),
            Some(&app.owner.api_key),
        )
        .header("if-none-match", format!("\"{sha256}\""))
        .send()
        .await
        .expect("conditional");
    assert_eq!(again.status(), 304);

    // Kept under its content address, nothing left in staging.
    let files = stored_files(&app);
    let address = app
        .data_dir()
        .join("media")
        .join(app.owner.workspace_id.to_string())
        .join(&sha256);
    assert_eq!(files, vec![address.clone()], "{files:?}");
    assert_eq!(std::fs::read(&address).expect("file"), bytes);

    // A read-only key reads it; another workspace does not see it.
    let reader = app.key_with(&["read"]).await;
    assert_eq!(
        app.get_with(&format!("/media/{id}"), &reader)
            .await
            .status(),
        200
    );
    let other = app
        .bootstrap_another("Other Inc", "Other", "owner@other.test")
        .await;
    let foreign = app.get_with(&format!("/media/{id}"), &other.api_key).await;
    expect_error(foreign, 404, "not_found").await;
    let unknown = app.get(&format!("/media/{}", uuid::Uuid::now_v7())).await;
    expect_error(unknown, 404, "not_found").await;
    let malformed = app.get("/media/not-an-id").await;
    expect_error(malformed, 400, "validation_failed").await;
}

#[tokio::test]
async fn a_redelivered_media_message_is_downloaded_once() {
    let app = spawn_app().await;
    let channel = app.live_channel(NUMBER).await;
    let sha256 = app
        .graph
        .add_media("media-img-2", picture(10_000), "image/jpeg");
    let payload = image_message("wamid.M2", "media-img-2", &sha256, "twice");
    assert_eq!(app.webhook(Some(&channel), &payload).await, 200);
    assert_eq!(settled_attachment(&app).await["status"], "stored");
    // Meta delivers it again; then another message, answered after it.
    assert_eq!(app.webhook(Some(&channel), &payload).await, 200);
    let text = json!({"from": SHEENA, "id": "wamid.M3", "type": "text", "text": {"body": "and?"}});
    app.webhook(
        Some(&channel),
        &messages_payload(NUMBER, SHEENA, "Sheena", text),
    )
    .await;
    app.wait_for_sends(2).await;
    let messages = app.wait_for_messages(SHEENA_PATH, |_| true).await;
    let files: Vec<&Value> = messages
        .iter()
        .flat_map(|m| m["attachments"].as_array().into_iter().flatten())
        .collect();
    assert_eq!(files.len(), 1, "{messages:#?}");
    assert_eq!(app.graph.downloads(), 1);
}

#[tokio::test]
async fn a_file_that_is_not_the_one_meta_described_is_failed_and_never_stored() {
    let app = spawn_app().await;
    let channel = app.live_channel(NUMBER).await;
    let sha256 = app
        .graph
        .add_media("media-img-3", picture(20_000), "image/jpeg");
    let wrong = "0".repeat(64);
    app.graph.misdescribe_media("media-img-3", &wrong);
    let payload = image_message("wamid.M4", "media-img-3", &wrong, "receipt");
    app.webhook(Some(&channel), &payload).await;
    let file = settled_attachment(&app).await;
    assert_eq!(file["status"], "failed");
    assert_eq!(file["failure"], "sha256_mismatch");
    assert!(file["size"].is_null());
    let id = file["id"].as_str().expect("id");
    let refused = app.get(&format!("/media/{id}")).await;
    let body = expect_error(refused, 409, "media_failed").await;
    assert!(
        body["message"]
            .as_str()
            .expect("message")
            .contains("sha256_mismatch")
    );
    assert!(stored_files(&app).is_empty(), "{:?}", stored_files(&app));
    assert_ne!(sha256, wrong);
}

#[tokio::test]
async fn a_media_id_meta_no_longer_knows_is_failed_expired() {
    let app = spawn_app().await;
    let channel = app.live_channel(NUMBER).await;
    let payload = image_message("wamid.M5", "media-gone", &"a".repeat(64), "old");
    app.webhook(Some(&channel), &payload).await;
    let file = settled_attachment(&app).await;
    assert_eq!(file["status"], "failed");
    assert_eq!(file["failure"], "expired");
    assert_eq!(app.graph.downloads(), 0);
}

#[tokio::test]
async fn a_download_that_fails_is_tried_again_until_the_file_is_kept() {
    let app = spawn_app_with(|settings| {
        settings.media.retry_base_ms = 20;
        settings.media.sweep_ms = 20;
    })
    .await;
    let channel = app.live_channel(NUMBER).await;
    let sha256 = app
        .graph
        .add_media("media-img-4", picture(5_000), "image/png");
    app.graph.fail_next_downloads(2);
    let payload = image_message("wamid.M6", "media-img-4", &sha256, "retry");
    app.webhook(Some(&channel), &payload).await;
    let file = settled_attachment(&app).await;
    assert_eq!(file["status"], "stored", "{file}");
    assert_eq!(app.graph.downloads(), 3);
}

#[tokio::test]
async fn a_file_over_its_kinds_limit_is_failed_too_large() {
    let app = spawn_app_with(|settings| settings.media.image_max_bytes = 4_096).await;
    let channel = app.live_channel(NUMBER).await;
    let sha256 = app
        .graph
        .add_media("media-img-5", picture(5_000), "image/jpeg");
    app.webhook(
        Some(&channel),
        &image_message("wamid.M7", "media-img-5", &sha256, "big"),
    )
    .await;
    let file = settled_attachment(&app).await;
    assert_eq!(file["status"], "failed");
    assert_eq!(file["failure"], "too_large");
    assert!(stored_files(&app).is_empty());
}

#[tokio::test]
async fn a_voice_note_and_a_document_are_named_to_the_assistant_and_kept() {
    let app = spawn_app().await;
    let channel = app.live_channel(NUMBER).await;
    let voice_sha = app
        .graph
        .add_media("media-voice", picture(8_000), "audio/ogg; codecs=opus");
    let voice = json!({"from": SHEENA, "id": "wamid.V1", "type": "audio",
                       "audio": {"id": "media-voice", "mime_type": "audio/ogg; codecs=opus", "sha256": voice_sha, "voice": true}});
    app.webhook(
        Some(&channel),
        &messages_payload(NUMBER, SHEENA, "Sheena", voice),
    )
    .await;
    let sent = app.wait_for_sends(1).await;
    assert_eq!(sent[0].text(), Some("You said: [voice note]"));

    let pdf_sha = app
        .graph
        .add_media("media-pdf", picture(12_000), "application/pdf");
    let document = json!({"from": SHEENA, "id": "wamid.D1", "type": "document",
                          "document": {"id": "media-pdf", "mime_type": "application/pdf", "sha256": pdf_sha,
                                       "filename": "../../etc/passwd", "caption": "my invoice"}});
    app.webhook(
        Some(&channel),
        &messages_payload(NUMBER, SHEENA, "Sheena", document),
    )
    .await;
    let sent = app.wait_for_sends(2).await;
    assert_eq!(
        sent[1].text(),
        Some("You said: [document: ../../etc/passwd (application/pdf)] my invoice")
    );
    let messages = app
        .wait_for_messages(SHEENA_PATH, |all| {
            all.iter()
                .flat_map(|m| m["attachments"].as_array().cloned().unwrap_or_default())
                .filter(|f| f["status"] == "stored")
                .count()
                == 2
        })
        .await;
    let files: Vec<Value> = messages
        .iter()
        .flat_map(|m| m["attachments"].as_array().cloned().unwrap_or_default())
        .collect();
    assert_eq!(files[0]["kind"], "audio");
    assert_eq!(files[1]["kind"], "document");
    assert_eq!(files[1]["file_name"], "../../etc/passwd");
    // The name a person's phone gave names no file: both live under their digests.
    let mut stored = stored_files(&app);
    stored.sort();
    let media = app
        .data_dir()
        .join("media")
        .join(app.owner.workspace_id.to_string());
    let mut expected = vec![media.join(&voice_sha), media.join(&pdf_sha)];
    expected.sort();
    assert_eq!(stored, expected);
    let id = files[1]["id"].as_str().expect("id");
    let read = app.get(&format!("/media/{id}")).await;
    assert_eq!(read.headers()["content-type"], "application/pdf");
    expect_status_bytes(read, 12_000).await;
}

async fn expect_status_bytes(response: reqwest::Response, length: usize) {
    assert_eq!(response.status(), 200);
    assert_eq!(response.bytes().await.expect("body").len(), length);
}

#[tokio::test]
async fn a_pending_file_answers_409_until_it_is_kept() {
    let app = spawn_app().await;
    let channel = app.live_channel(NUMBER).await;
    let sha256 = app
        .graph
        .add_media("media-img-6", picture(4 * 64 * 1024), "image/jpeg");
    // A slow link: the file takes a while to arrive.
    app.graph
        .pace_downloads(std::time::Duration::from_millis(300));
    app.webhook(
        Some(&channel),
        &image_message("wamid.M8", "media-img-6", &sha256, "slow"),
    )
    .await;
    let messages = app
        .wait_for_messages(SHEENA_PATH, |all| {
            all.iter()
                .any(|m| m["attachments"].as_array().is_some_and(|a| !a.is_empty()))
        })
        .await;
    let file = messages
        .iter()
        .flat_map(|m| m["attachments"].as_array().cloned().unwrap_or_default())
        .next()
        .expect("attachment");
    // The download takes at least a second; the message is seen well before.
    assert_eq!(file["status"], "pending", "{file}");
    let id = file["id"].as_str().expect("id");
    let early = app.get(&format!("/media/{id}")).await;
    expect_error(early, 409, "media_pending").await;
    assert_eq!(settled_attachment(&app).await["status"], "stored");
}

#[tokio::test]
async fn message_history_carries_no_attachments_for_text() {
    let app = spawn_app().await;
    let (_, channel) = app.chat_channel("Echo.", json!({})).await;
    app.put_identity("crm-7", json!({"name": "Ana"})).await;
    expect_status(app.chat("crm-7", &channel, "hello").await, 200).await;
    let messages = app.wait_for_messages("crm-7", |all| all.len() >= 2).await;
    assert!(
        messages.iter().all(|m| m["attachments"] == json!([])),
        "{messages:#?}"
    );
}

#[tokio::test]
async fn deleting_a_person_deletes_their_files_but_not_the_copy_another_person_sent() {
    let app = spawn_app().await;
    let channel = app.live_channel(NUMBER).await;
    let sha256 = app
        .graph
        .add_media("media-shared", picture(9_000), "image/jpeg");
    let other = "16505559876";
    for (from, wamid) in [(SHEENA, "wamid.P1"), (other, "wamid.P2")] {
        let image = json!({"from": from, "id": wamid, "type": "image",
                           "image": {"id": "media-shared", "mime_type": "image/jpeg", "sha256": sha256}});
        app.webhook(
            Some(&channel),
            &messages_payload(NUMBER, from, "Person", image),
        )
        .await;
    }
    for person in [SHEENA_PATH, "+16505559876"] {
        app.wait_for_messages(person, |all| {
            all.iter()
                .flat_map(|m| m["attachments"].as_array().cloned().unwrap_or_default())
                .any(|f| f["status"] == "stored")
        })
        .await;
    }
    // One file for both: its address is its digest.
    assert_eq!(stored_files(&app).len(), 1);

    expect_status(app.delete(&format!("/identity/{SHEENA_PATH}")).await, 200).await;
    assert_eq!(
        stored_files(&app).len(),
        1,
        "the other person's copy is kept"
    );
    expect_status(app.delete("/identity/+16505559876").await, 200).await;
    assert!(stored_files(&app).is_empty(), "{:?}", stored_files(&app));
}

#[tokio::test]
async fn files_past_the_retention_are_deleted_and_say_so() {
    let app = spawn_app_with(|settings| {
        settings.media.retention_days = 30;
        settings.media.retention_sweep_secs = 1;
    })
    .await;
    let channel = app.live_channel(NUMBER).await;
    let sha256 = app
        .graph
        .add_media("media-old", picture(3_000), "image/jpeg");
    app.webhook(
        Some(&channel),
        &image_message("wamid.R1", "media-old", &sha256, "old"),
    )
    .await;
    let file = settled_attachment(&app).await;
    assert_eq!(file["status"], "stored");
    assert_eq!(stored_files(&app).len(), 1);
    // Nothing is deleted before its time; then the message is 31 days old.
    let db = app.db().await;
    let back = parley_persistence::clock::now() - chrono::Duration::days(31);
    use parley_persistence::entities::attachment;
    use sea_orm::{ColumnTrait, EntityTrait, QueryFilter};
    attachment::Entity::update_many()
        .col_expr(attachment::Column::CreatedAt, back.into())
        .filter(
            attachment::Column::Id
                .eq(uuid::Uuid::parse_str(file["id"].as_str().expect("id")).expect("uuid")),
        )
        .exec(&db)
        .await
        .expect("aged");
    let messages = app
        .wait_for_messages(SHEENA_PATH, |all| {
            all.iter()
                .flat_map(|m| m["attachments"].as_array().cloned().unwrap_or_default())
                .any(|f| f["failure"] == "retention")
        })
        .await;
    assert!(!messages.is_empty());
    wait_stored_files(&app, 0).await;
    let id = file["id"].as_str().expect("id");
    expect_error(app.get(&format!("/media/{id}")).await, 409, "media_failed").await;
}

/// Makes the attachment `id` look `days` old.
async fn age(app: &TestApp, id: &str, days: i64) {
    use parley_persistence::entities::attachment;
    use sea_orm::{ColumnTrait, EntityTrait, QueryFilter};
    let back = parley_persistence::clock::now() - chrono::Duration::days(days);
    attachment::Entity::update_many()
        .col_expr(attachment::Column::CreatedAt, back.into())
        .filter(attachment::Column::Id.eq(uuid::Uuid::parse_str(id).expect("uuid")))
        .exec(&app.db().await)
        .await
        .expect("aged");
}

#[tokio::test]
async fn a_workspace_keeps_its_files_for_a_time_of_its_own() {
    let app = spawn_app_with(|settings| {
        settings.media.retention_days = 30;
        settings.media.retention_sweep_secs = 1;
    })
    .await;
    let workspace = format!("/workspace/{}", app.owner.workspace_id);
    for days in [json!(-1), json!(1.5), json!("60"), json!(36_501)] {
        let refused = app
            .send_json(
                Method::PATCH,
                &workspace,
                &json!({"media_retention_days": days}),
            )
            .await;
        let body = expect_error(refused, 400, "validation_failed").await;
        assert_eq!(
            body["details"][0]["path"],
            json!(["media_retention_days"]),
            "{body}"
        );
    }
    let set = app
        .send_json(
            Method::PATCH,
            &workspace,
            &json!({"media_retention_days": 60}),
        )
        .await;
    assert_eq!(
        expect_status(set, 200).await["data"]["media_retention_days"],
        60
    );

    let channel = app.live_channel(NUMBER).await;
    for (n, caption) in ["kept", "old"].into_iter().enumerate() {
        let id = format!("media-ws-{n}");
        let sha256 = app.graph.add_media(&id, picture(3_000 + n), "image/jpeg");
        let wamid = format!("wamid.W{n}");
        app.webhook(
            Some(&channel),
            &image_message(&wamid, &id, &sha256, caption),
        )
        .await;
    }
    let files = |messages: &[Value]| -> Vec<Value> {
        messages
            .iter()
            .flat_map(|m| m["attachments"].as_array().cloned().unwrap_or_default())
            .collect()
    };
    let messages = app
        .wait_for_messages(SHEENA_PATH, |all| {
            files(all)
                .iter()
                .filter(|f| f["status"] == "stored")
                .count()
                == 2
        })
        .await;
    let by_caption = |caption: &str| {
        files(&messages)
            .into_iter()
            .find(|f| f["caption"] == caption)
            .and_then(|f| f["id"].as_str().map(str::to_owned))
            .expect("a file")
    };
    let (kept, old) = (by_caption("kept"), by_caption("old"));
    // Past the installation's 30 days but within the workspace's 60; and past both.
    age(&app, &kept, 45).await;
    age(&app, &old, 61).await;
    let messages = app
        .wait_for_messages(SHEENA_PATH, |all| {
            files(all).iter().any(|f| f["failure"] == "retention")
        })
        .await;
    let settled = files(&messages);
    let status = |id: &str| {
        settled
            .iter()
            .find(|f| f["id"] == id)
            .map(|f| f["status"].clone())
    };
    assert_eq!(status(&old), Some(json!("failed")), "{settled:?}");
    assert_eq!(status(&kept), Some(json!("stored")), "{settled:?}");
    wait_stored_files(&app, 1).await;
    let read = app.get(&format!("/media/{kept}")).await;
    assert_eq!(read.status().as_u16(), 200);
}

/// A live channel whose worker's assistant has `settings`.
async fn channel_with(app: &TestApp, settings: Value) -> String {
    let channel = app
        .created(
            "/channels/waba",
            json!({"name": "Main line", "accessToken": crate::helpers::TOKEN,
                   "phoneNumberId": NUMBER, "businessId": "waba-1"}),
        )
        .await["id"]
        .as_str()
        .expect("id")
        .to_owned();
    let worker = app.worker("Support").await;
    app.created(
        &format!("/workers/{worker}/assistants"),
        json!({"name": "Ana", "instructions": "Be helpful.", "settings": settings}),
    )
    .await;
    let synced = app
        .send_json(
            Method::POST,
            &format!("/channels/{channel}/worker/{worker}"),
            &json!({}),
        )
        .await;
    expect_status(synced, 200).await;
    channel
}

#[tokio::test]
async fn with_vision_the_model_sees_the_picture_itself() {
    let app = spawn_app().await;
    let channel = channel_with(&app, json!({"vision": true})).await;
    let bytes = picture(2_000);
    let sha256 = app.graph.add_media("media-see", bytes.clone(), "image/png");
    let image = json!({"from": SHEENA, "id": "wamid.V9", "type": "image",
                       "image": {"id": "media-see", "mime_type": "image/png", "sha256": sha256, "caption": "what is this?"}});
    app.webhook(
        Some(&channel),
        &messages_payload(NUMBER, SHEENA, "Sheena", image),
    )
    .await;
    let sent = app.wait_for_sends(1).await;
    // The fake model describes the image it was given, after the caption.
    assert_eq!(
        sent[0].text(),
        Some("You said: [image] what is this? [image: image/png, 2000 bytes]")
    );
    let request = app.model.last_request().expect("a model request");
    let last = request["messages"]
        .as_array()
        .expect("messages")
        .last()
        .cloned()
        .expect("last");
    let url = last["content"][1]["image_url"]["url"]
        .as_str()
        .expect("an image part");
    use base64::Engine;
    let sent_bytes = base64::engine::general_purpose::STANDARD
        .decode(
            url.strip_prefix("data:image/png;base64,")
                .expect("a data URL"),
        )
        .expect("base64");
    assert_eq!(sent_bytes, bytes);
}

#[tokio::test]
async fn with_transcription_the_model_reads_what_a_voice_note_says_and_the_history_keeps_it() {
    let app = spawn_app().await;
    let channel = channel_with(&app, json!({"transcribe": true})).await;
    app.model
        .set_transcript("I would like a table for two tonight");
    let sha256 = app
        .graph
        .add_media("media-hear", picture(6_000), "audio/ogg; codecs=opus");
    let voice = json!({"from": SHEENA, "id": "wamid.V10", "type": "audio",
                       "audio": {"id": "media-hear", "mime_type": "audio/ogg; codecs=opus", "sha256": sha256, "voice": true}});
    app.webhook(
        Some(&channel),
        &messages_payload(NUMBER, SHEENA, "Sheena", voice),
    )
    .await;
    let sent = app.wait_for_sends(1).await;
    assert_eq!(
        sent[0].text(),
        Some("You said: [voice note] I would like a table for two tonight")
    );
    let heard = app.model.transcriptions();
    assert_eq!(heard.len(), 1);
    assert_eq!(heard[0].model, "whisper-1");
    assert_eq!(heard[0].bytes, 6_000);
    assert_eq!(heard[0].file_name, "audio.ogg");
    // The history shows the words, and the attachment keeps them.
    let messages = app
        .wait_for_messages(SHEENA_PATH, |all| all.len() >= 2)
        .await;
    assert_eq!(
        messages[0]["content"],
        "[voice note] I would like a table for two tonight"
    );
    assert_eq!(
        messages[0]["attachments"][0]["transcript"],
        "I would like a table for two tonight"
    );
    // The next turn's history reads the words too.
    let text =
        json!({"from": SHEENA, "id": "wamid.V11", "type": "text", "text": {"body": "at 8?"}});
    app.webhook(
        Some(&channel),
        &messages_payload(NUMBER, SHEENA, "Sheena", text),
    )
    .await;
    app.wait_for_sends(2).await;
    let request = app.model.last_request().expect("request");
    let history: Vec<&str> = request["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .filter_map(|m| m["content"].as_str())
        .collect();
    assert!(
        history.contains(&"[voice note] I would like a table for two tonight"),
        "{history:?}"
    );
}

#[tokio::test]
async fn without_vision_or_transcription_the_model_reads_a_description_and_nothing_is_transcribed()
{
    let app = spawn_app().await;
    let channel = app.live_channel(NUMBER).await;
    let sha256 = app
        .graph
        .add_media("media-plain", picture(1_000), "audio/ogg");
    let voice = json!({"from": SHEENA, "id": "wamid.V12", "type": "audio",
                       "audio": {"id": "media-plain", "mime_type": "audio/ogg", "sha256": sha256, "voice": true}});
    app.webhook(
        Some(&channel),
        &messages_payload(NUMBER, SHEENA, "Sheena", voice),
    )
    .await;
    let sent = app.wait_for_sends(1).await;
    assert_eq!(sent[0].text(), Some("You said: [voice note]"));
    assert_eq!(settled_attachment(&app).await["status"], "stored");
    assert!(app.model.transcriptions().is_empty());
}

#[tokio::test]
async fn the_console_shows_a_picture_plays_a_voice_note_and_links_a_document() {
    let app = spawn_app().await;
    let channel = app.live_channel(NUMBER).await;
    let sent = [
        ("media-c-img", "image", "image/jpeg", json!({})),
        (
            "media-c-voice",
            "audio",
            "audio/ogg",
            json!({"voice": true}),
        ),
        (
            "media-c-doc",
            "document",
            "application/pdf",
            json!({"filename": "invoice.pdf"}),
        ),
    ];
    for (n, (id, kind, mime, extra)) in sent.iter().enumerate() {
        let sha256 = app.graph.add_media(id, picture(1_000 + n), mime);
        let mut file = json!({"id": id, "mime_type": mime, "sha256": sha256});
        if let (Some(file), Some(extra)) = (file.as_object_mut(), extra.as_object()) {
            file.extend(extra.clone());
        }
        let message =
            json!({"from": SHEENA, "id": format!("wamid.C{n}"), "type": kind, (*kind): file});
        app.webhook(
            Some(&channel),
            &messages_payload(NUMBER, SHEENA, "Sheena", message),
        )
        .await;
    }
    let messages = app
        .wait_for_messages(SHEENA_PATH, |all| {
            all.iter()
                .flat_map(|m| m["attachments"].as_array().cloned().unwrap_or_default())
                .filter(|f| f["status"] == "stored")
                .count()
                == 3
        })
        .await;
    let files: Vec<Value> = messages
        .iter()
        .flat_map(|m| m["attachments"].as_array().cloned().unwrap_or_default())
        .collect();
    let id_of = |kind: &str| {
        files
            .iter()
            .find(|f| f["kind"] == kind)
            .and_then(|f| f["id"].as_str())
            .expect("file")
            .to_owned()
    };
    let (image, voice, document) = (id_of("image"), id_of("audio"), id_of("document"));
    let conversation = messages[0]["conversation_id"]
        .as_str()
        .expect("conversation");

    let mut tab = crate::console::Tab::new(&app);
    tab.sign_in(&app.owner.api_key).await;
    let page = tab
        .get(&format!("/console/conversations/{conversation}"))
        .await;
    for shown in [
        format!(r#"<img src="/console/media/{image}""#),
        format!(r#"<audio controls preload="none" src="/console/media/{voice}">"#),
        format!(r#"href="/console/media/{document}" download="invoice.pdf">invoice.pdf</a>"#),
    ] {
        assert!(page.body.contains(&shown), "{shown} in {}", page.body);
    }
    let picture_read = tab.get(&format!("/console/media/{image}")).await;
    assert_eq!(picture_read.status, 200);
    let pdf = tab.get(&format!("/console/media/{document}")).await;
    assert_eq!(pdf.status, 200);

    // Without a session, or from another workspace, nothing is served.
    let mut stranger = crate::console::Tab::new(&app);
    let refused = stranger.get(&format!("/console/media/{image}")).await;
    assert_ne!(refused.status, 200);
    let other = app
        .bootstrap_another("Other Inc", "Other", "owner@other.test")
        .await;
    stranger.sign_in(&other.api_key).await;
    let foreign = stranger.get(&format!("/console/media/{image}")).await;
    assert_eq!(foreign.status, 404);
}

#[tokio::test]
async fn what_a_stopped_process_was_staging_is_deleted_when_media_starts_again() {
    let dir = tempfile::tempdir().expect("dir");
    let staging = dir.path().join("staging");
    std::fs::create_dir_all(&staging).expect("staging");
    let two_hours_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(7200);
    // A download cut short (its part), a staged file never kept, and a write in progress now.
    let (part, whole, live) = (
        staging.join("019ad1d2-0000-7000-8000-000000000001#1"),
        staging.join("019ad1d2-0000-7000-8000-000000000002"),
        staging.join("019ad1d2-0000-7000-8000-000000000003#1"),
    );
    for (path, old) in [(&part, true), (&whole, true), (&live, false)] {
        let file = std::fs::File::create(path).expect("file");
        std::io::Write::write_all(&mut &file, b"half a picture").expect("write");
        if old {
            file.set_modified(two_hours_ago).expect("mtime");
        }
    }
    let media_dir = dir.path().to_path_buf();
    let _app = spawn_app_with(move |settings| settings.media.dir = Some(media_dir)).await;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while part.exists() || whole.exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "stale staged files were left"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert!(live.exists(), "a write in progress is left alone");
}

#[tokio::test]
async fn the_message_received_event_carries_the_file_as_it_is_then() {
    use crate::event_webhooks::{Receiver, endpoint};
    let app = spawn_app().await;
    let receiver = Receiver::start().await;
    let channel = app.live_channel(NUMBER).await;
    endpoint(&app, &receiver.url, json!(["message.received"])).await;
    let sha256 = app
        .graph
        .add_media("media-ev", picture(2_000), "image/jpeg");
    let payload = image_message("wamid.EV1", "media-ev", &sha256, "my receipt");
    assert_eq!(app.webhook(Some(&channel), &payload).await, 200);
    receiver.wait_for(1).await;
    let received = receiver.of("message.received");
    let event = received[0].json();
    let file = &event["data"]["attachments"][0];
    assert_eq!(file["kind"], "image", "{event}");
    assert_eq!(file["status"], "pending", "{event}");
    assert_eq!(file["caption"], "my receipt", "{event}");
    assert_eq!(file["mime_type"], "image/jpeg", "{event}");
    // The event names the attachment `GET /media/{id}` reads once it is kept.
    let kept = settled_attachment(&app).await;
    assert_eq!(kept["id"], file["id"]);
    assert_eq!(kept["status"], "stored");
}
