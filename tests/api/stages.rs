use reqwest::Method;
use serde_json::json;

use crate::helpers::{expect_error, expect_status, spawn_app};

#[tokio::test]
async fn a_stage_is_created_read_updated_listed_and_deleted() {
    let app = spawn_app().await;

    let created = app
        .created(
            "/stages",
            json!({"name": "Lead", "description": "New contact", "metadata": {"order": 1}}),
        )
        .await;
    let id = created["id"].as_str().expect("id").to_owned();
    assert_eq!(created["name"], "Lead");
    assert_eq!(created["metadata"], json!({"order": 1}));

    let updated = app
        .send_json(
            Method::PUT,
            &format!("/stages/{id}"),
            &json!({"name": "Qualified lead"}),
        )
        .await;
    let updated = expect_status(updated, 200).await;
    assert_eq!(updated["data"]["name"], "Qualified lead");
    assert_eq!(
        updated["data"]["description"], "New contact",
        "only given fields change"
    );

    let listed = expect_status(app.get("/stages").await, 200).await;
    assert_eq!(listed["data"][0]["name"], "Qualified lead");
    assert_eq!(listed["pagination"]["total"], 1);
    let fetched = expect_status(app.get(&format!("/stages/{id}")).await, 200).await;
    assert_eq!(fetched["data"]["id"], id.as_str());

    expect_status(app.delete(&format!("/stages/{id}")).await, 200).await;
    expect_error(app.get(&format!("/stages/{id}")).await, 404, "not_found").await;
}

#[tokio::test]
async fn a_duplicate_stage_name_is_a_409_on_create_and_on_rename() {
    let app = spawn_app().await;
    app.stage("Lead").await;
    let other = app.stage("Customer").await;

    expect_error(
        app.send_json(Method::POST, "/stages", &json!({"name": "Lead"}))
            .await,
        409,
        "conflict",
    )
    .await;
    let rename = app
        .send_json(
            Method::PUT,
            &format!("/stages/{other}"),
            &json!({"name": "Lead"}),
        )
        .await;
    expect_error(rename, 409, "conflict").await;
}

#[tokio::test]
async fn a_stage_name_must_be_3_to_100_characters() {
    let app = spawn_app().await;

    for name in [json!("ab"), json!("s".repeat(101)), json!("  ")] {
        let response = app
            .send_json(Method::POST, "/stages", &json!({"name": name}))
            .await;
        let body = expect_error(response, 400, "validation_failed").await;
        assert_eq!(body["details"][0]["path"], json!(["name"]), "{name}");
    }
    let id = app.stage("Lead").await;
    let response = app
        .send_json(
            Method::PUT,
            &format!("/stages/{id}"),
            &json!({"name": "ab"}),
        )
        .await;
    expect_error(response, 400, "validation_failed").await;
}

#[tokio::test]
async fn stage_metadata_must_be_an_object() {
    let app = spawn_app().await;

    let response = app
        .send_json(
            Method::POST,
            "/stages",
            &json!({"name": "Lead", "metadata": [1, 2]}),
        )
        .await;

    let body = expect_error(response, 400, "validation_failed").await;
    assert_eq!(body["details"][0]["path"], json!(["metadata"]));
}

#[tokio::test]
async fn deleting_a_stage_leaves_its_identities_stageless_and_keeps_their_history() {
    let app = spawn_app().await;
    let stage = app.stage("Lead").await;
    app.put_identity("crm-1", json!({"name": "Ana"})).await;
    let set = app
        .send_json(
            Method::POST,
            "/identity/crm-1/stage",
            &json!({"stage_id": stage}),
        )
        .await;
    expect_status(set, 200).await;

    expect_status(app.delete(&format!("/stages/{stage}")).await, 200).await;

    let identity = expect_status(app.get("/identity/crm-1").await, 200).await;
    assert_eq!(identity["data"]["stage"], json!(null));
    let history = expect_status(app.get("/identity/crm-1/stages").await, 200).await;
    assert_eq!(history["data"][0]["stage"], "Lead");
    assert_eq!(history["data"][0]["stage_id"], json!(null));
}
