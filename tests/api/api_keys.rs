use reqwest::Method;
use serde_json::{Value, json};

use crate::helpers::{TestApp, expect_error, expect_status, spawn_app};

async fn create_key(app: &TestApp, body: Value) -> reqwest::Response {
    app.send_json(Method::POST, "/workspace/api-keys", &body)
        .await
}

#[tokio::test]
async fn a_created_key_is_shown_once_and_works() {
    let app = spawn_app().await;

    let response = create_key(
        &app,
        json!({"name": "CRM sync", "permissions": ["write", "read"], "workspace_id": app.owner.workspace_id}),
    )
    .await;

    let body = expect_status(response, 201).await;
    let data = &body["data"];
    assert_eq!(data["name"], "CRM sync");
    assert_eq!(data["permissions"], json!(["read", "write"]));
    assert_eq!(data["workspace_id"], app.owner.workspace_id);
    for field in ["last_used_at", "expires_at", "revoked_at"] {
        assert_eq!(data[field], json!(null), "{field}");
    }
    let key = data["key"]
        .as_str()
        .expect("the secret is returned at creation");
    expect_status(app.get_with("/workspace", key).await, 200).await;

    let listed = expect_status(app.get("/workspace/api-keys").await, 200).await;
    let listed = listed["data"].as_array().expect("array").clone();
    assert_eq!(listed.len(), 2, "the bootstrap key and the new one");
    assert!(
        listed.iter().all(|k| k.get("key").is_none()),
        "secrets are never listed"
    );
    assert!(!listed.iter().any(|k| k.to_string().contains(key)));
}

#[tokio::test]
async fn workspace_id_may_be_a_number_or_a_numeric_string() {
    let app = spawn_app().await;

    for workspace_id in [
        json!(app.owner.workspace_id),
        json!(app.owner.workspace_id.to_string()),
    ] {
        let response = create_key(
            &app,
            json!({"name": "k", "permissions": ["read"], "workspace_id": workspace_id}),
        )
        .await;
        let body = expect_status(response, 201).await;
        assert_eq!(body["data"]["workspace_id"], app.owner.workspace_id);
    }
}

#[tokio::test]
async fn a_workspace_id_that_is_not_a_number_is_a_400_naming_the_field() {
    let app = spawn_app().await;

    for workspace_id in [json!(true), json!("abc"), json!(null), json!(-3)] {
        let response = create_key(
            &app,
            json!({"name": "k", "permissions": ["read"], "workspace_id": workspace_id}),
        )
        .await;
        let body = expect_error(response, 400, "validation_failed").await;
        assert_eq!(
            body["details"][0]["path"],
            json!(["workspace_id"]),
            "{workspace_id}"
        );
    }
}

#[tokio::test]
async fn permissions_must_be_known_and_not_empty() {
    let app = spawn_app().await;
    let workspace_id = app.owner.workspace_id;

    let unknown = create_key(
        &app,
        json!({"name": "k", "permissions": ["read", "owner"], "workspace_id": workspace_id}),
    )
    .await;
    let body = expect_error(unknown, 400, "validation_failed").await;
    assert_eq!(body["details"][0]["path"], json!(["permissions", 1]));

    let empty = create_key(
        &app,
        json!({"name": "k", "permissions": [], "workspace_id": workspace_id}),
    )
    .await;
    let body = expect_error(empty, 400, "validation_failed").await;
    assert_eq!(body["details"][0]["path"], json!(["permissions"]));
}

#[tokio::test]
async fn every_required_field_is_named_when_missing() {
    let app = spawn_app().await;

    let response = create_key(&app, json!({"permissions": ["read"], "workspace_id": 1})).await;

    let body = expect_error(response, 400, "validation_failed").await;
    assert_eq!(body["details"][0]["path"], json!(["name"]));
}

#[tokio::test]
async fn an_expiry_in_the_past_is_a_400() {
    let app = spawn_app().await;

    let response = create_key(
        &app,
        json!({"name": "k", "permissions": ["read"], "workspace_id": app.owner.workspace_id, "expires_at": "2020-01-01T00:00:00Z"}),
    )
    .await;

    let body = expect_error(response, 400, "validation_failed").await;
    assert_eq!(body["details"][0]["path"], json!(["expires_at"]));
}

#[tokio::test]
async fn a_key_can_be_issued_for_another_workspace_the_user_belongs_to() {
    let app = spawn_app().await;
    let sales = app
        .send_json(Method::POST, "/workspace", &json!({"name": "Sales"}))
        .await;
    let sales_id = expect_status(sales, 201).await["data"]["id"]
        .as_i64()
        .expect("id");

    let created = create_key(
        &app,
        json!({"name": "sales admin", "permissions": ["read", "admin"], "workspace_id": sales_id}),
    )
    .await;
    let created = expect_status(created, 201).await;
    let sales_key = created["data"]["key"].as_str().expect("key").to_owned();

    // The new key acts in Sales: its own key list is Sales's.
    let listed = expect_status(app.get_with("/workspace/api-keys", &sales_key).await, 200).await;
    assert_eq!(listed["pagination"]["total"], 1);
    assert_eq!(listed["data"][0]["workspace_id"], sales_id);
    // The owner's key reaches Sales's keys with the query parameter.
    let from_owner = expect_status(
        app.get(&format!("/workspace/api-keys?workspace_id={sales_id}"))
            .await,
        200,
    )
    .await;
    assert_eq!(from_owner["data"][0]["name"], "sales admin");
}

#[tokio::test]
async fn a_key_for_another_business_workspace_is_a_404() {
    let app = spawn_app().await;
    let other = app
        .bootstrap_another("Globex", "Globex HQ", "boss@globex.test")
        .await;

    let response = create_key(
        &app,
        json!({"name": "k", "permissions": ["read"], "workspace_id": other.workspace_id}),
    )
    .await;

    expect_error(response, 404, "not_found").await;
    expect_error(
        app.get(&format!(
            "/workspace/api-keys?workspace_id={}",
            other.workspace_id
        ))
        .await,
        404,
        "not_found",
    )
    .await;
}

#[tokio::test]
async fn a_key_for_a_workspace_the_user_is_not_a_member_of_is_a_403() {
    let app = spawn_app().await;
    let colleague = app
        .bootstrap_another("Acme Inc", "Acme Labs", "labs@acme.test")
        .await;

    let response = create_key(
        &app,
        json!({"name": "k", "permissions": ["read"], "workspace_id": colleague.workspace_id}),
    )
    .await;

    expect_error(response, 403, "forbidden").await;
}

#[tokio::test]
async fn revoking_is_idempotent_and_keeps_the_first_time() {
    let app = spawn_app().await;
    let created = create_key(
        &app,
        json!({"name": "k", "permissions": ["read"], "workspace_id": app.owner.workspace_id}),
    )
    .await;
    let id = expect_status(created, 201).await["data"]["id"]
        .as_str()
        .expect("id")
        .to_owned();

    let first = expect_status(app.delete(&format!("/workspace/api-keys/{id}")).await, 200).await;
    let second = expect_status(app.delete(&format!("/workspace/api-keys/{id}")).await, 200).await;

    assert!(first["data"]["revoked_at"].is_string());
    assert_eq!(first["data"]["revoked_at"], second["data"]["revoked_at"]);
}

#[tokio::test]
async fn revoking_an_unknown_or_foreign_key_is_a_404_and_a_malformed_id_a_400() {
    let app = spawn_app().await;
    let other = app
        .bootstrap_another("Globex", "Globex HQ", "boss@globex.test")
        .await;
    let theirs = expect_status(
        app.get_with("/workspace/api-keys", &other.api_key).await,
        200,
    )
    .await;
    let their_key_id = theirs["data"][0]["id"].as_str().expect("id").to_owned();

    expect_error(
        app.delete(&format!("/workspace/api-keys/{their_key_id}"))
            .await,
        404,
        "not_found",
    )
    .await;
    expect_error(
        app.delete("/workspace/api-keys/01a200f8-0000-7000-8000-000000000000")
            .await,
        404,
        "not_found",
    )
    .await;
    let body = expect_error(
        app.delete("/workspace/api-keys/not-a-uuid").await,
        400,
        "validation_failed",
    )
    .await;
    assert_eq!(body["details"][0]["path"], json!(["key_id"]));

    // Their key still works.
    expect_status(app.get_with("/workspace", &other.api_key).await, 200).await;
}
