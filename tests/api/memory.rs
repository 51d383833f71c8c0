use reqwest::Method;
use serde_json::json;

use crate::helpers::{expect_error, expect_status, spawn_app};

#[tokio::test]
async fn memory_entries_are_written_read_sorted_by_key_and_deleted() {
    let app = spawn_app().await;
    app.put_identity("crm-1", json!({"name": "Ana"})).await;

    let created = app
        .send_json(
            Method::PUT,
            "/memory/from/crm-1",
            &json!({"key": "profile.name", "value": "Ana", "metadata": {"confidence": 0.9}}),
        )
        .await;
    let created = expect_status(created, 201).await;
    assert_eq!(
        created["data"]["metadata"],
        json!({"confidence": 0.9, "source": "api"})
    );
    let object = app
        .send_json(
            Method::PUT,
            "/memory/from/crm-1",
            &json!({"key": "preferences.drinks", "value": {"coffee": "black"}}),
        )
        .await;
    expect_status(object, 201).await;
    let updated = app
        .send_json(
            Method::PUT,
            "/memory/from/crm-1",
            &json!({"key": "profile.name", "value": "Ana Maria"}),
        )
        .await;
    let updated = expect_status(updated, 200).await;
    assert_eq!(updated["data"]["value"], "Ana Maria");

    let memory = expect_status(app.get("/memory/from/crm-1").await, 200).await;
    assert_eq!(memory["message"], "Memory retrieved successfully");
    let data = memory["data"].as_array().expect("array");
    assert_eq!(data.len(), 2);
    assert_eq!(data[0]["key"], "preferences.drinks");
    assert_eq!(data[0]["value"], json!({"coffee": "black"}));
    assert_eq!(data[1]["key"], "profile.name");
    for field in ["key", "value", "metadata", "created_at", "updated_at"] {
        assert!(data[1].get(field).is_some(), "{field}");
    }
    assert_ne!(data[1]["created_at"], json!(null));

    expect_status(app.delete("/memory/from/crm-1/profile.name").await, 200).await;
    expect_error(
        app.delete("/memory/from/crm-1/profile.name").await,
        404,
        "not_found",
    )
    .await;
    let memory = expect_status(app.get("/memory/from/crm-1").await, 200).await;
    assert_eq!(memory["data"].as_array().expect("array").len(), 1);
}

#[tokio::test]
async fn a_memory_key_must_be_dotted_lower_case() {
    let app = spawn_app().await;
    app.put_identity("crm-1", json!({"name": "Ana"})).await;

    for key in ["Profile.Name", "profile..name", "my key", ""] {
        let response = app
            .send_json(
                Method::PUT,
                "/memory/from/crm-1",
                &json!({"key": key, "value": 1}),
            )
            .await;
        let body = expect_error(response, 400, "validation_failed").await;
        assert_eq!(body["details"][0]["path"], json!(["key"]), "{key}");
    }
    expect_error(
        app.delete("/memory/from/crm-1/Bad.Key").await,
        400,
        "validation_failed",
    )
    .await;
}

#[tokio::test]
async fn a_memory_value_is_required_and_bounded_to_64_kib() {
    let app = spawn_app().await;
    app.put_identity("crm-1", json!({"name": "Ana"})).await;

    let missing = app
        .send_json(
            Method::PUT,
            "/memory/from/crm-1",
            &json!({"key": "profile.name"}),
        )
        .await;
    let body = expect_error(missing, 400, "validation_failed").await;
    assert_eq!(body["details"][0]["path"], json!(["value"]));

    let big = app
        .send_json(
            Method::PUT,
            "/memory/from/crm-1",
            &json!({"key": "profile.bio", "value": "x".repeat(70 * 1024)}),
        )
        .await;
    let body = expect_error(big, 400, "validation_failed").await;
    assert_eq!(body["details"][0]["path"], json!(["value"]));

    let bad_confidence = app
        .send_json(
            Method::PUT,
            "/memory/from/crm-1",
            &json!({"key": "profile.name", "value": "Ana", "metadata": {"confidence": 7}}),
        )
        .await;
    let body = expect_error(bad_confidence, 400, "validation_failed").await;
    assert_eq!(
        body["details"][0]["path"],
        json!(["metadata", "confidence"])
    );
}

#[tokio::test]
async fn memory_of_an_unknown_identity_is_a_404() {
    let app = spawn_app().await;

    expect_error(app.get("/memory/from/ghost").await, 404, "not_found").await;
    let put = app
        .send_json(
            Method::PUT,
            "/memory/from/ghost",
            &json!({"key": "a", "value": 1}),
        )
        .await;
    expect_error(put, 404, "not_found").await;
}

#[tokio::test]
async fn memory_is_addressed_like_the_identity() {
    let app = spawn_app().await;
    app.put_identity("crm-1", json!({"phone": "+351912345678"}))
        .await;
    let put = app
        .send_json(
            Method::PUT,
            "/memory/from/+351912345678",
            &json!({"key": "profile.name", "value": "Ana"}),
        )
        .await;
    expect_status(put, 201).await;

    let memory = expect_status(app.get("/memory/from/crm-1").await, 200).await;

    assert_eq!(memory["data"][0]["value"], "Ana");
}
