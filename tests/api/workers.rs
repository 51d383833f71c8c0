use reqwest::Method;
use serde_json::json;

use crate::helpers::{expect_error, expect_status, spawn_app};

#[tokio::test]
async fn creating_a_worker_answers_worker_id_and_the_record() {
    let app = spawn_app().await;

    let data = app
        .created(
            "/workers",
            json!({"name": "Support", "description": "Front line", "timezone": "Europe/Lisbon"}),
        )
        .await;

    assert_eq!(data["worker_id"], data["id"]);
    assert_eq!(data["name"], "Support");
    assert_eq!(data["description"], "Front line");
    assert_eq!(data["timezone"], "Europe/Lisbon");
    let fetched = expect_status(
        app.get(&format!(
            "/workers/{}",
            data["worker_id"].as_str().expect("id")
        ))
        .await,
        200,
    )
    .await;
    assert_eq!(fetched["data"]["name"], "Support");
    assert!(fetched["data"].get("worker_id").is_none());
}

#[tokio::test]
async fn a_timezone_that_is_not_iana_is_a_400() {
    let app = spawn_app().await;

    let response = app
        .send_json(
            Method::POST,
            "/workers",
            &json!({"name": "Support", "timezone": "Mars/Olympus"}),
        )
        .await;

    let body = expect_error(response, 400, "validation_failed").await;
    assert_eq!(body["details"][0]["path"], json!(["timezone"]));
}

#[tokio::test]
async fn a_worker_without_a_name_is_a_400() {
    let app = spawn_app().await;

    let response = app
        .send_json(Method::POST, "/workers", &json!({"description": "x"}))
        .await;

    let body = expect_error(response, 400, "validation_failed").await;
    assert_eq!(body["details"][0]["path"], json!(["name"]));
}

#[tokio::test]
async fn workers_are_listed_page_by_page() {
    let app = spawn_app().await;
    for name in ["A", "B", "C"] {
        app.worker(name).await;
    }

    let page = expect_status(app.get("/workers?page=2&limit=2").await, 200).await;

    assert_eq!(page["data"][0]["name"], "C");
    assert_eq!(
        page["pagination"],
        json!({"page": 2, "limit": 2, "total": 3, "total_pages": 2})
    );
}

#[tokio::test]
async fn deleting_a_worker_removes_its_assistants_and_unsyncs_its_channels() {
    let app = spawn_app().await;
    let worker = app.worker("Support").await;
    let assistant = app.assistant(&worker, "Ana").await;
    let channel = app.sandbox_channel("Main line").await;
    expect_status(
        app.send_json(
            Method::POST,
            &format!("/channels/{channel}/worker/{worker}"),
            &json!({}),
        )
        .await,
        200,
    )
    .await;

    let deleted = expect_status(app.delete(&format!("/workers/{worker}")).await, 200).await;

    assert_eq!(deleted["data"]["id"], worker.as_str());
    expect_error(
        app.get(&format!("/workers/{worker}")).await,
        404,
        "not_found",
    )
    .await;
    expect_error(
        app.get(&format!("/assistant/{assistant}")).await,
        404,
        "not_found",
    )
    .await;
    let channel = expect_status(app.get(&format!("/channels/{channel}")).await, 200).await;
    assert_eq!(channel["data"]["workerId"], json!(null));
    expect_error(
        app.delete(&format!("/workers/{worker}")).await,
        404,
        "not_found",
    )
    .await;
}

#[tokio::test]
async fn a_malformed_worker_id_is_a_400_and_an_unknown_one_a_404() {
    let app = spawn_app().await;

    let body = expect_error(app.get("/workers/nope").await, 400, "validation_failed").await;
    assert_eq!(body["details"][0]["path"], json!(["worker_id"]));
    expect_error(
        app.get("/workers/01a200f8-0000-7000-8000-000000000000")
            .await,
        404,
        "not_found",
    )
    .await;
}
