use reqwest::Method;

use crate::helpers::{expect_status, spawn_app};

#[tokio::test]
async fn health_answers_without_a_key() {
    let app = spawn_app().await;

    let response = app
        .request(Method::GET, "/health", None)
        .send()
        .await
        .expect("request");

    let body = expect_status(response, 200).await;
    assert_eq!(body["data"]["status"], "ok");
    assert!(body["message"].is_string());
}

#[tokio::test]
async fn ready_reports_a_reachable_database() {
    let app = spawn_app().await;

    let response = app
        .request(Method::GET, "/ready", None)
        .send()
        .await
        .expect("request");

    let body = expect_status(response, 200).await;
    assert_eq!(body["data"]["database"], "ok");
}

#[tokio::test]
async fn every_response_carries_a_request_id_even_errors() {
    let app = spawn_app().await;

    for (path, key) in [
        ("/health", None),
        ("/workspace", None),
        ("/no-such-route", None),
    ] {
        let response = app
            .request(Method::GET, path, key)
            .send()
            .await
            .expect("request");
        let id = response
            .headers()
            .get("x-request-id")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        assert_eq!(id.len(), 36, "{path} answered without a request id");
    }
}

#[tokio::test]
async fn a_request_id_sent_by_the_client_is_echoed() {
    let app = spawn_app().await;

    let response = app
        .request(Method::GET, "/health", None)
        .header("x-request-id", "trace-me-42")
        .send()
        .await
        .expect("request");

    assert_eq!(response.headers()["x-request-id"], "trace-me-42");
}
