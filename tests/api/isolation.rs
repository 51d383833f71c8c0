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
