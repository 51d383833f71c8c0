use std::time::Duration;

use reqwest::Method;
use serde_json::json;

use crate::helpers::{expect_error, expect_status, spawn_app};

#[tokio::test]
async fn a_request_without_a_key_is_refused_as_not_authenticated() {
    let app = spawn_app().await;

    let response = app
        .request(Method::GET, "/workspace", None)
        .send()
        .await
        .expect("request");

    let body = expect_error(response, 401, "unauthenticated").await;
    assert_eq!(body["message"], "User not authenticated");
}

#[tokio::test]
async fn an_unknown_key_is_refused_as_not_authenticated() {
    let app = spawn_app().await;

    let response = app.get_with("/workspace", "prl_not-a-real-key").await;

    let body = expect_error(response, 401, "unauthenticated").await;
    assert_eq!(body["message"], "User not authenticated");
}

#[tokio::test]
async fn a_key_under_another_scheme_is_refused() {
    let app = spawn_app().await;

    let response = app
        .request(Method::GET, "/workspace", None)
        .header("authorization", format!("Basic {}", app.owner.api_key))
        .send()
        .await
        .expect("request");

    expect_error(response, 401, "unauthenticated").await;
}

#[tokio::test]
async fn the_bearer_scheme_is_case_insensitive() {
    let app = spawn_app().await;

    let response = app
        .request(Method::GET, "/workspace", None)
        .header("authorization", format!("bearer {}", app.owner.api_key))
        .send()
        .await
        .expect("request");

    expect_status(response, 200).await;
}

#[tokio::test]
async fn authentication_is_checked_before_the_body() {
    let app = spawn_app().await;

    let response = app
        .request(Method::POST, "/workspace", None)
        .header("content-type", "application/json")
        .body("not json")
        .send()
        .await
        .expect("request");

    expect_error(response, 401, "unauthenticated").await;
}

#[tokio::test]
async fn a_read_key_can_read_but_not_write() {
    let app = spawn_app().await;
    let read = app.key_with(&["read"]).await;

    expect_status(app.get_with("/workspace", &read).await, 200).await;
    let path = format!("/workspace/{}", app.owner.workspace_id);
    expect_status(app.get_with(&path, &read).await, 200).await;

    let response = app
        .send_json_with(Method::POST, "/workspace", &read, &json!({"name": "Nope"}))
        .await;
    let body = expect_error(response, 403, "forbidden").await;
    assert!(
        body["message"]
            .as_str()
            .unwrap_or_default()
            .contains("admin")
    );
}

#[tokio::test]
async fn a_write_key_cannot_read_or_manage_workspaces_and_keys() {
    let app = spawn_app().await;
    let write = app.key_with(&["write"]).await;

    expect_error(app.get_with("/workspace", &write).await, 403, "forbidden").await;
    let create_key =
        json!({"name": "k", "permissions": ["read"], "workspace_id": app.owner.workspace_id});
    let response = app
        .send_json_with(Method::POST, "/workspace/api-keys", &write, &create_key)
        .await;
    expect_error(response, 403, "forbidden").await;
    let path = format!("/workspace/{}", app.owner.workspace_id);
    let response = app
        .send_json_with(Method::PATCH, &path, &write, &json!({"name": "Renamed"}))
        .await;
    expect_error(response, 403, "forbidden").await;
}

#[tokio::test]
async fn only_admin_keys_list_and_revoke_keys() {
    let app = spawn_app().await;
    let read_write = app.key_with(&["read", "write"]).await;
    let admin = app.key_with(&["admin"]).await;

    expect_error(
        app.get_with("/workspace/api-keys", &read_write).await,
        403,
        "forbidden",
    )
    .await;
    expect_status(app.get_with("/workspace/api-keys", &admin).await, 200).await;

    let any_id = "01a200f8-0000-7000-8000-000000000000";
    let response = app
        .request(
            Method::DELETE,
            &format!("/workspace/api-keys/{any_id}"),
            Some(&read_write),
        )
        .send()
        .await
        .expect("request");
    expect_error(response, 403, "forbidden").await;
}

#[tokio::test]
async fn an_admin_only_key_reads_and_writes() {
    let app = spawn_app().await;
    let admin = app.key_with(&["admin"]).await;

    expect_status(app.get_with("/workspace", &admin).await, 200).await;
    expect_status(app.get_with("/workers", &admin).await, 200).await;
    let created = app
        .send_json_with(
            Method::POST,
            "/workers",
            &admin,
            &json!({"name": "Support"}),
        )
        .await;
    expect_status(created, 201).await;
}

#[tokio::test]
async fn a_revoked_key_stops_working_at_once() {
    let app = spawn_app().await;
    let created = app
        .send_json(
            Method::POST,
            "/workspace/api-keys",
            &json!({"name": "to revoke", "permissions": ["read"], "workspace_id": app.owner.workspace_id}),
        )
        .await;
    let created = expect_status(created, 201).await;
    let key = created["data"]["key"].as_str().expect("key").to_owned();
    let id = created["data"]["id"].as_str().expect("id").to_owned();
    expect_status(app.get_with("/workspace", &key).await, 200).await;

    let revoked = app.delete(&format!("/workspace/api-keys/{id}")).await;
    let revoked = expect_status(revoked, 200).await;
    assert!(revoked["data"]["revoked_at"].is_string());

    let body = expect_error(
        app.get_with("/workspace", &key).await,
        401,
        "unauthenticated",
    )
    .await;
    assert_eq!(body["message"], "User not authenticated");
}

#[tokio::test]
async fn an_expired_key_stops_working() {
    let app = spawn_app().await;
    let expires_at = (chrono::Utc::now() + chrono::Duration::seconds(1))
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    let created = app
        .send_json(
            Method::POST,
            "/workspace/api-keys",
            &json!({"name": "short-lived", "permissions": ["read"], "workspace_id": app.owner.workspace_id, "expires_at": expires_at}),
        )
        .await;
    let created = expect_status(created, 201).await;
    assert_eq!(
        chrono::DateTime::parse_from_rfc3339(
            created["data"]["expires_at"].as_str().expect("expiry")
        )
        .expect("rfc3339"),
        chrono::DateTime::parse_from_rfc3339(&expires_at).expect("rfc3339"),
    );
    let key = created["data"]["key"].as_str().expect("key").to_owned();

    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let status = app.get_with("/workspace", &key).await.status().as_u16();
        if status == 401 {
            break;
        }
        assert_eq!(status, 200, "a live key reads");
        assert!(
            tokio::time::Instant::now() < deadline,
            "the key never expired"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn using_a_key_records_when_it_was_last_used() {
    let app = spawn_app().await;
    let key = app.key_with(&["read"]).await;
    expect_status(app.get_with("/workspace", &key).await, 200).await;

    // Recorded beside the request, not before its answer: polled with a deadline.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let listed = expect_status(app.get("/workspace/api-keys").await, 200).await;
        let entry = listed["data"]
            .as_array()
            .expect("array")
            .iter()
            .find(|k| k["name"] == "read key")
            .expect("the read key is listed")
            .clone();
        if entry["last_used_at"].is_string() {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "last_used_at never recorded: {entry}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
