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

#[tokio::test]
async fn liveness_and_readiness_are_told_apart() {
    let app = spawn_app().await;
    let live = expect_status(
        app.request(Method::GET, "/health/live", None)
            .send()
            .await
            .expect("live"),
        200,
    )
    .await;
    assert_eq!(live["data"]["status"], "ok");
    let ready = expect_status(
        app.request(Method::GET, "/health/ready", None)
            .send()
            .await
            .expect("ready"),
        200,
    )
    .await;
    assert_eq!(ready["data"]["database"], "ok");
}

/// Runs `statement` on the test's PostgreSQL server as its administrator.
async fn as_admin(statement: &str) {
    use sea_orm::ConnectionTrait;
    let admin_url = std::env::var("PARLEY_TEST_DATABASE_URL").expect("PostgreSQL");
    let admin = sea_orm::Database::connect(&admin_url).await.expect("admin");
    admin
        .execute_unprepared(statement)
        .await
        .expect("statement");
    admin.close().await.expect("close");
}

#[tokio::test]
async fn a_database_parley_cannot_write_is_a_503_and_not_ready_while_it_stays_live() {
    if std::env::var("PARLEY_TEST_DATABASE_URL").is_err() {
        eprintln!("skipped: a read-only database is made on PostgreSQL (PARLEY_TEST_DATABASE_URL)");
        return;
    }
    let app = spawn_app().await;
    let name = app
        .database_url
        .rsplit('/')
        .next()
        .and_then(|tail| tail.split('?').next())
        .expect("a database name")
        .to_owned();
    let status = async |path: &str| {
        app.request(Method::GET, path, None)
            .send()
            .await
            .expect("probe")
            .status()
            .as_u16()
    };
    assert_eq!(status("/health").await, 200);

    // The database takes no more writes (as a standby, or a database an operator froze).
    as_admin(&format!(
        "ALTER DATABASE \"{name}\" SET default_transaction_read_only = on"
    ))
    .await;
    as_admin(&format!(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
         WHERE datname = '{name}' AND pid <> pg_backend_pid()"
    ))
    .await;
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(15);
    while status("/health/ready").await != 503 {
        assert!(tokio::time::Instant::now() < deadline, "still ready");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(status("/health").await, 503);
    assert_eq!(
        status("/health/live").await,
        200,
        "the process still answers"
    );
    // A write is a 503 that says to come back, never the database's words.
    let refused = loop {
        let answer = app
            .send_json(
                Method::PUT,
                "/identity/crm-ro",
                &serde_json::json!({"name": "Ro"}),
            )
            .await;
        if answer.status() == 503 {
            break answer;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{:?}",
            answer.status()
        );
    };
    let body: serde_json::Value = refused.json().await.expect("json");
    assert_eq!(body["error"], "storage_unavailable", "{body}");
    let text = body.to_string();
    assert!(
        !text.contains("Error") && !text.contains("read-only transaction"),
        "{text}"
    );

    as_admin(&format!(
        "ALTER DATABASE \"{name}\" SET default_transaction_read_only = off"
    ))
    .await;
    as_admin(&format!(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
         WHERE datname = '{name}' AND pid <> pg_backend_pid()"
    ))
    .await;
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(15);
    while status("/health/ready").await != 200 {
        assert!(tokio::time::Instant::now() < deadline, "never ready again");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}
