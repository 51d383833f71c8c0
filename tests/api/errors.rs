use reqwest::Method;
use serde_json::json;

use crate::helpers::{expect_error, spawn_app};

#[tokio::test]
async fn an_unknown_route_is_a_404_with_the_error_body() {
    let app = spawn_app().await;

    let response = app.get("/definitely/not/here").await;

    expect_error(response, 404, "not_found").await;
}

#[tokio::test]
async fn a_known_path_with_the_wrong_method_is_a_405_with_the_error_body() {
    let app = spawn_app().await;

    let response = app
        .request(Method::PUT, "/workspace", Some(&app.owner.api_key))
        .send()
        .await
        .expect("request");

    expect_error(response, 405, "method_not_allowed").await;
}

#[tokio::test]
async fn malformed_json_is_a_400() {
    let app = spawn_app().await;

    let response = app
        .request(Method::POST, "/workspace", Some(&app.owner.api_key))
        .header("content-type", "application/json")
        .body("{\"name\": ")
        .send()
        .await
        .expect("request");

    expect_error(response, 400, "malformed_json").await;
}

#[tokio::test]
async fn a_body_without_a_json_content_type_is_a_400() {
    let app = spawn_app().await;

    let response = app
        .request(Method::POST, "/workspace", Some(&app.owner.api_key))
        .body(r#"{"name": "Sales"}"#)
        .send()
        .await
        .expect("request");

    expect_error(response, 400, "invalid_content_type").await;
}

#[tokio::test]
async fn a_field_of_the_wrong_type_is_a_400_naming_the_field() {
    let app = spawn_app().await;

    let response = app
        .send_json(
            Method::POST,
            "/workspace",
            &json!({"name": "Sales", "description": 5}),
        )
        .await;

    let body = expect_error(response, 400, "validation_failed").await;
    assert_eq!(body["details"][0]["path"], json!(["description"]));
}

#[tokio::test]
async fn a_missing_required_field_is_a_400_naming_the_field() {
    let app = spawn_app().await;

    let response = app
        .send_json(Method::POST, "/workspace", &json!({"description": "x"}))
        .await;

    let body = expect_error(response, 400, "validation_failed").await;
    assert_eq!(body["details"][0]["path"], json!(["name"]));
    assert_eq!(body["details"][0]["message"], "is required");
}

#[tokio::test]
async fn unknown_fields_are_ignored() {
    let app = spawn_app().await;

    let response = app
        .send_json(
            Method::POST,
            "/workspace",
            &json!({"name": "Sales", "colour": "blue"}),
        )
        .await;

    assert_eq!(response.status().as_u16(), 201);
}

#[tokio::test]
async fn a_body_over_one_mebibyte_is_a_413() {
    let app = spawn_app().await;
    let description = "x".repeat(1024 * 1024 + 1);

    let response = app
        .send_json(
            Method::POST,
            "/workspace",
            &json!({"name": "Big", "description": description}),
        )
        .await;

    expect_error(response, 413, "payload_too_large").await;
}

#[tokio::test]
async fn pagination_outside_its_bounds_is_a_400_naming_the_parameter() {
    let app = spawn_app().await;

    for (query, field) in [
        ("limit=101", "limit"),
        ("limit=0", "limit"),
        ("page=0", "page"),
    ] {
        let response = app.get(&format!("/workspace?{query}")).await;
        let body = expect_error(response, 400, "validation_failed").await;
        assert_eq!(body["details"][0]["path"], json!([field]), "{query}");
    }
}

#[tokio::test]
async fn a_non_numeric_page_is_a_400() {
    let app = spawn_app().await;

    let response = app.get("/workspace?page=first").await;

    expect_error(response, 400, "invalid_query").await;
}

#[tokio::test]
async fn a_query_parameter_of_the_wrong_type_is_named_in_details() {
    let app = spawn_app().await;

    let response = app.get("/workers?limit=ten").await;

    let body = expect_error(response, 400, "invalid_query").await;
    assert_eq!(body["details"][0]["path"], json!(["limit"]));
}

#[tokio::test]
async fn an_oversized_webhook_is_a_413_with_the_error_body() {
    let app = spawn_app().await;
    let big = "x".repeat(1024 * 1024 + 10);

    let response = reqwest::Client::new()
        .post(format!("{}/webhooks/waba", app.address))
        .header("content-type", "application/json")
        .header("x-hub-signature-256", "sha256=00")
        .body(big)
        .send()
        .await
        .expect("request");

    expect_error(response, 413, "payload_too_large").await;
}

#[tokio::test]
async fn refusals_are_sentences_never_the_parsers_words() {
    let app = spawn_app().await;

    let wrong_kind = app
        .send_json(reqwest::Method::POST, "/workspace", &serde_json::json!([]))
        .await;
    let body = expect_error(wrong_kind, 400, "validation_failed").await;
    let text = body.to_string();
    assert!(text.contains("must be a JSON object"), "{text}");
    assert!(
        !text.contains("struct") && !text.contains("invalid length"),
        "{text}"
    );

    for path in [
        "/flows?campaignUid=zzz".to_owned(),
        format!(
            "/campaigns?workspaceId={}&channelUid=zzz",
            app.owner.workspace_id
        ),
    ] {
        let response = app.get(&path).await;
        let body = expect_error(response, 400, "validation_failed").await;
        let text = body.to_string();
        assert!(text.contains("must be a UUID"), "{path}: {text}");
        assert!(!text.contains("invalid character"), "{path}: {text}");
    }
}
