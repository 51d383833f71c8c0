//! What an operator sees and what a workspace admin sees of the live actor tree.

use std::process::Command;

use reqwest::Method;
use serde_json::{Value, json};

use crate::helpers::{TestApp, expect_error, expect_status, spawn_app_with};

const OPERATOR: &str = "operator-secret-token";

fn live(tree: &Value, path: &str) -> u64 {
    tree["data"]["supervisors"]
        .as_array()
        .expect("supervisors")
        .iter()
        .find(|s| s["path"] == path)
        .and_then(|s| s["live"].as_u64())
        .unwrap_or_else(|| panic!("no {path}: {tree}"))
}

/// A sandbox channel with an assistant in the workspace of `key`, and a chat from each of
/// `people` on it.
async fn busy_workspace(app: &TestApp, key: &str, people: &[&str]) {
    let worker = app
        .send_json_with(Method::POST, "/workers", key, &json!({"name": "W"}))
        .await;
    let worker = expect_status(worker, 201).await["data"]["worker_id"]
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
    expect_status(assistant, 201).await;
    let channel = app
        .send_json_with(
            Method::POST,
            "/channels/waba",
            key,
            &json!({"name": "Line", "integration": "sandbox"}),
        )
        .await;
    let channel = expect_status(channel, 201).await["data"]["id"]
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
    expect_status(synced, 200).await;
    for person in people {
        let chat = app
            .send_json_with(
                Method::POST,
                &format!("/conversation/{person}/chat/{channel}"),
                key,
                &json!({"message": "hi"}),
            )
            .await;
        // The identity is created by PUT first.
        if chat.status() == 404 {
            app.send_json_with(Method::PUT, &format!("/identity/{person}"), key, &json!({}))
                .await;
            let again = app
                .send_json_with(
                    Method::POST,
                    &format!("/conversation/{person}/chat/{channel}"),
                    key,
                    &json!({"message": "hi"}),
                )
                .await;
            expect_status(again, 200).await;
        }
    }
}

#[tokio::test]
async fn a_workspace_admin_sees_its_own_actors_and_the_operator_sees_all() {
    let app = spawn_app_with(|s| s.server.operator_token = Some(OPERATOR.into())).await;
    let other = app
        .bootstrap_another("Globex", "Globex HQ", "boss@globex.test")
        .await;
    busy_workspace(&app, &app.owner.api_key, &["ana", "bo"]).await;
    busy_workspace(&app, &other.api_key, &["hank"]).await;

    let ours = expect_status(app.get("/admin/actors").await, 200).await;
    assert_eq!(ours["data"]["scope"], "workspace");
    assert_eq!(live(&ours, "root/conversations"), 2);
    assert_eq!(live(&ours, "root/channels"), 1);
    let theirs = expect_status(app.get_with("/admin/actors", &other.api_key).await, 200).await;
    assert_eq!(live(&theirs, "root/conversations"), 1);

    let all = expect_status(app.get_with("/admin/actors", OPERATOR).await, 200).await;
    assert_eq!(all["data"]["scope"], "installation");
    assert_eq!(live(&all, "root/conversations"), 3);
    assert_eq!(live(&all, "root/channels"), 2);

    let reader = app.key_with(&["read", "write"]).await;
    expect_error(
        app.get_with("/admin/actors", &reader).await,
        403,
        "forbidden",
    )
    .await;
    expect_error(
        app.get_with("/admin/actors", "not-the-operator").await,
        401,
        "unauthenticated",
    )
    .await;
}

#[tokio::test]
async fn parley_admin_actors_prints_the_installations_tree() {
    let app = spawn_app_with(|s| s.server.operator_token = Some(OPERATOR.into())).await;
    busy_workspace(&app, &app.owner.api_key, &["ana"]).await;

    // The test's runtime serves the app: wait for the command off it.
    let address = app.address.clone();
    let output = tokio::task::spawn_blocking(move || {
        Command::new(env!("CARGO_BIN_EXE_parley"))
            .args(["admin", "actors", "--url", &address])
            .env("PARLEY_OPERATOR_TOKEN", OPERATOR)
            .env("PARLEY_LOG", "warn")
            .output()
            .expect("run parley admin actors")
    })
    .await
    .expect("joined");

    let printed = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{printed} {}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(printed.contains("root/conversations"), "{printed}");
    assert!(
        printed
            .lines()
            .any(|l| l.contains("root/conversations") && l.contains("1 live, 0 resting")),
        "{printed}"
    );
}
