//! Another workspace's ids answer 404 on every resource, for reads and writes alike.

use reqwest::Method;
use serde_json::json;

use crate::helpers::{expect_error, spawn_app};

#[tokio::test]
async fn another_workspaces_resources_are_not_found() {
    let app = spawn_app().await;
    let worker = app.worker("Support").await;
    let assistant = app.assistant(&worker, "Ana").await;
    let channel = app.sandbox_channel("Main line").await;
    let stage = app.stage("Lead").await;
    let identity = app
        .put_identity("crm-1", json!({"phone": "+351912345678"}))
        .await["id"]
        .as_str()
        .expect("id")
        .to_owned();
    let conversation =
        crate::conversations::seed_conversation(&app, &identity, &channel, &["hi"]).await;
    let other = app
        .bootstrap_another("Globex", "Globex HQ", "boss@globex.test")
        .await;
    let key = other.api_key.as_str();

    let reads = [
        format!("/workers/{worker}"),
        format!("/assistant/{assistant}"),
        format!("/channels/{channel}"),
        format!("/stages/{stage}"),
        format!("/identity/{identity}"),
        "/identity/crm-1".to_owned(),
        "/identity/+351912345678".to_owned(),
        format!("/identity/{identity}/stages"),
        format!("/memory/from/{identity}"),
        format!("/conversations/{conversation}"),
        format!("/conversations/{conversation}/messages"),
    ];
    for path in &reads {
        expect_error(app.get_with(path, key).await, 404, "not_found").await;
    }

    let writes = [
        (Method::DELETE, format!("/workers/{worker}"), json!(null)),
        (
            Method::PATCH,
            format!("/assistant/{assistant}"),
            json!({"name": "x"}),
        ),
        (
            Method::DELETE,
            format!("/assistant/{assistant}"),
            json!(null),
        ),
        (
            Method::POST,
            format!("/workers/{worker}/assistants"),
            json!({"name": "x", "instructions": "y"}),
        ),
        (
            Method::PUT,
            format!("/channels/{channel}"),
            json!({"name": "Hijack"}),
        ),
        (Method::DELETE, format!("/channels/{channel}"), json!(null)),
        (
            Method::PUT,
            format!("/stages/{stage}"),
            json!({"name": "Hijack"}),
        ),
        (Method::DELETE, format!("/stages/{stage}"), json!(null)),
        (Method::DELETE, format!("/identity/{identity}"), json!(null)),
        (
            Method::POST,
            format!("/identity/{identity}/stage"),
            json!({"stage_id": stage}),
        ),
        (
            Method::PUT,
            format!("/memory/from/{identity}"),
            json!({"key": "a", "value": 1}),
        ),
    ];
    for (method, path, body) in writes {
        let response = app.send_json_with(method.clone(), &path, key, &body).await;
        expect_error(response, 404, "not_found").await;
    }

    // Their listings are empty, and ours are intact.
    for path in [
        "/workers",
        "/channels",
        "/stages",
        "/identity",
        "/conversations",
    ] {
        let body = crate::helpers::expect_status(app.get_with(path, key).await, 200).await;
        assert_eq!(body["pagination"]["total"], 0, "{path}");
        let ours = crate::helpers::expect_status(app.get(path).await, 200).await;
        assert_eq!(ours["pagination"]["total"], 1, "{path}");
    }
}

#[tokio::test]
async fn conversations_sends_and_the_sandbox_refuse_another_workspaces_ids() {
    let app = spawn_app().await;
    let (_, channel) = app.chat_channel("Echo.", json!({})).await;
    let identity = app
        .put_identity("crm-1", json!({"phone": "+351912345678"}))
        .await["id"]
        .as_str()
        .expect("id")
        .to_owned();
    let other = app
        .bootstrap_another("Globex", "Globex HQ", "boss@globex.test")
        .await;
    let key = other.api_key.as_str();
    let their_channel = {
        let worker = app
            .send_json_with(Method::POST, "/workers", key, &json!({"name": "W"}))
            .await;
        let worker = crate::helpers::expect_status(worker, 201).await["data"]["worker_id"]
            .as_str()
            .expect("id")
            .to_owned();
        let assistant = app
            .send_json_with(
                Method::POST,
                &format!("/workers/{worker}/assistants"),
                key,
                &json!({"name": "A", "instructions": "Echo."}),
            )
            .await;
        crate::helpers::expect_status(assistant, 201).await;
        let created = app
            .send_json_with(
                Method::POST,
                "/channels/waba",
                key,
                &json!({"name": "Their line", "integration": "sandbox"}),
            )
            .await;
        let channel = crate::helpers::expect_status(created, 201).await["data"]["id"]
            .as_str()
            .expect("id")
            .to_owned();
        let synced = app
            .send_json_with(
                Method::POST,
                &format!("/channels/{channel}/worker/{worker}"),
                key,
                &json!({}),
            )
            .await;
        crate::helpers::expect_status(synced, 200).await;
        channel
    };
    app.send_json_with(
        Method::PUT,
        "/identity/their-1",
        key,
        &json!({"name": "Hank"}),
    )
    .await;

    // Their key on our identity, and on our channel with their identity.
    let attempts = [
        (
            Method::POST,
            format!("/conversation/{identity}/chat/{their_channel}"),
            json!({"message": "hi"}),
        ),
        (
            Method::POST,
            format!("/conversation/their-1/chat/{channel}"),
            json!({"message": "hi"}),
        ),
        (
            Method::POST,
            format!("/channels/{channel}/waba/send"),
            crate::helpers::order_update_send("5511987654321"),
        ),
        (
            Method::POST,
            format!("/channels/{channel}/sandbox/inbound"),
            json!({"from": "+351912345678", "text": "hi"}),
        ),
        (
            Method::DELETE,
            "/memory/from/crm-1/profile.name".to_owned(),
            json!(null),
        ),
    ];
    for (method, path, body) in attempts {
        let response = app.send_json_with(method, &path, key, &body).await;
        expect_error(response, 404, "not_found").await;
    }
    for path in [
        format!("/conversation/{identity}/streaming?channel_id={their_channel}&message=hi"),
        format!("/conversation/their-1/streaming?channel_id={channel}&message=hi"),
        format!("/channels/{channel}/sandbox/outbox"),
        format!("/channels/{channel}/waba/templates"),
    ] {
        expect_error(app.get_with(&path, key).await, 404, "not_found").await;
    }
    assert!(
        app.model.requests().is_empty(),
        "no turn ran for another workspace"
    );
}
