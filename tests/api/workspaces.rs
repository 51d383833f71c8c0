use reqwest::Method;
use serde_json::json;

use crate::helpers::{expect_error, expect_status, spawn_app};

#[tokio::test]
async fn creating_a_workspace_answers_the_record_and_makes_the_caller_its_member() {
    let app = spawn_app().await;

    let response = app
        .send_json(
            Method::POST,
            "/workspace",
            &json!({"name": "  Sales  ", "description": "EU team"}),
        )
        .await;

    let body = expect_status(response, 201).await;
    let data = &body["data"];
    assert_eq!(data["name"], "Sales");
    assert_eq!(data["description"], "EU team");
    assert_eq!(data["business_id"], app.owner.business_id.to_string());
    assert!(data["id"].is_i64());
    assert!(data["created_at"].is_string() && data["updated_at"].is_string());

    let fetched = expect_status(app.get(&format!("/workspace/{}", data["id"])).await, 200).await;
    assert_eq!(fetched["data"], *data);
    let listed = expect_status(app.get("/workspace").await, 200).await;
    let names: Vec<_> = listed["data"]
        .as_array()
        .expect("array")
        .iter()
        .map(|w| w["name"].clone())
        .collect();
    assert_eq!(names, [json!("Acme"), json!("Sales")]);
    assert_eq!(
        listed["pagination"],
        json!({"page": 1, "limit": 20, "total": 2, "total_pages": 1})
    );
}

#[tokio::test]
async fn a_second_workspace_with_the_same_name_in_the_business_is_a_409() {
    let app = spawn_app().await;

    let response = app
        .send_json(Method::POST, "/workspace", &json!({"name": "Acme"}))
        .await;

    expect_error(response, 409, "conflict").await;
}

#[tokio::test]
async fn a_blank_or_overlong_name_is_a_400_naming_the_field() {
    let app = spawn_app().await;

    for name in [json!("   "), json!("n".repeat(101))] {
        let response = app
            .send_json(Method::POST, "/workspace", &json!({"name": name}))
            .await;
        let body = expect_error(response, 400, "validation_failed").await;
        assert_eq!(body["details"][0]["path"], json!(["name"]));
    }
}

#[tokio::test]
async fn patching_a_workspace_changes_only_the_given_fields() {
    let app = spawn_app().await;
    let path = format!("/workspace/{}", app.owner.workspace_id);
    let described = app
        .send_json(Method::PATCH, &path, &json!({"description": "Main"}))
        .await;
    let described = expect_status(described, 200).await;
    assert_eq!(described["data"]["name"], "Acme");
    assert_eq!(described["data"]["description"], "Main");

    let renamed = app
        .send_json(Method::PATCH, &path, &json!({"name": "Acme EU"}))
        .await;
    let renamed = expect_status(renamed, 200).await;
    assert_eq!(renamed["data"]["name"], "Acme EU");
    assert_eq!(renamed["data"]["description"], "Main");

    let cleared = app
        .send_json(Method::PATCH, &path, &json!({"description": null}))
        .await;
    let cleared = expect_status(cleared, 200).await;
    assert_eq!(cleared["data"]["description"], json!(null));
    assert_eq!(
        expect_status(app.get(&path).await, 200).await["data"]["name"],
        "Acme EU"
    );
}

#[tokio::test]
async fn renaming_onto_another_workspaces_name_is_a_409() {
    let app = spawn_app().await;
    expect_status(
        app.send_json(Method::POST, "/workspace", &json!({"name": "Sales"}))
            .await,
        201,
    )
    .await;

    let path = format!("/workspace/{}", app.owner.workspace_id);
    let response = app
        .send_json(Method::PATCH, &path, &json!({"name": "Sales"}))
        .await;

    expect_error(response, 409, "conflict").await;
}

#[tokio::test]
async fn workspace_ids_in_paths_must_be_integers() {
    let app = spawn_app().await;

    let response = app.get("/workspace/abc").await;

    let body = expect_error(response, 400, "validation_failed").await;
    assert_eq!(body["details"][0]["path"], json!(["workspace_id"]));
}

#[tokio::test]
async fn an_unknown_workspace_is_a_404() {
    let app = spawn_app().await;

    expect_error(app.get("/workspace/999999").await, 404, "not_found").await;
    let response = app
        .send_json(Method::PATCH, "/workspace/999999", &json!({"name": "x"}))
        .await;
    expect_error(response, 404, "not_found").await;
}

#[tokio::test]
async fn another_business_workspace_is_invisible() {
    let app = spawn_app().await;
    let other = app
        .bootstrap_another("Globex", "Globex HQ", "boss@globex.test")
        .await;
    let path = format!("/workspace/{}", other.workspace_id);

    expect_error(app.get(&path).await, 404, "not_found").await;
    let response = app
        .send_json(Method::PATCH, &path, &json!({"name": "Hijacked"}))
        .await;
    expect_error(response, 404, "not_found").await;
    let listed = expect_status(app.get("/workspace").await, 200).await;
    assert_eq!(listed["pagination"]["total"], 1);

    // And the other way round.
    let theirs = expect_status(app.get_with("/workspace", &other.api_key).await, 200).await;
    assert_eq!(theirs["data"][0]["name"], "Globex HQ");
    assert_eq!(theirs["pagination"]["total"], 1);
}

#[tokio::test]
async fn a_workspace_of_the_same_business_the_user_is_not_a_member_of_is_a_403() {
    let app = spawn_app().await;
    let colleague = app
        .bootstrap_another("Acme Inc", "Acme Labs", "labs@acme.test")
        .await;
    assert_eq!(colleague.business_id, app.owner.business_id);

    let response = app
        .get(&format!("/workspace/{}", colleague.workspace_id))
        .await;

    expect_error(response, 403, "forbidden").await;
}

#[tokio::test]
async fn workspaces_are_listed_page_by_page() {
    let app = spawn_app().await;
    for name in ["B", "C", "D"] {
        expect_status(
            app.send_json(Method::POST, "/workspace", &json!({"name": name}))
                .await,
            201,
        )
        .await;
    }

    let second = expect_status(app.get("/workspace?page=2&limit=3").await, 200).await;

    assert_eq!(second["data"].as_array().expect("array").len(), 1);
    assert_eq!(second["data"][0]["name"], "D");
    assert_eq!(
        second["pagination"],
        json!({"page": 2, "limit": 3, "total": 4, "total_pages": 2})
    );
}
