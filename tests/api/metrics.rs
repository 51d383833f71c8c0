//! `GET /metrics`: who may read it, and the families a chat turn, a stream, a webhook and a
//! send leave behind.

use std::time::Duration;

use parley_testkit::Reply;
use parley_testkit::graph::text_message;
use reqwest::Method;
use serde_json::json;

use crate::helpers::{TestApp, expect_error, spawn_app_with};

const NUMBER: &str = "106540352242922";
const PERSON: &str = "+351912345678";

async fn scrape(app: &TestApp, key: Option<&str>) -> reqwest::Response {
    app.request(Method::GET, "/metrics", key)
        .send()
        .await
        .expect("request")
}

/// The operator's token in these tests.
const OPERATOR: &str = "op-token-1";

async fn scraped(app: &TestApp) -> String {
    let response = scrape(app, Some(OPERATOR)).await;
    assert_eq!(response.status(), 200);
    let kind = response.headers()["content-type"]
        .to_str()
        .unwrap_or_default();
    assert!(kind.starts_with("text/plain"), "{kind}");
    response.text().await.expect("exposition")
}

/// The lines of family `name` (samples only, not `# HELP`/`# TYPE`).
fn samples<'a>(body: &'a str, name: &str) -> Vec<&'a str> {
    body.lines()
        .filter(|l| l.starts_with(name) && !l.starts_with('#'))
        .collect()
}

async fn with_operator() -> TestApp {
    spawn_app_with(|s| s.server.operator_token = Some(OPERATOR.into())).await
}

#[tokio::test]
async fn metrics_need_the_operator_token_and_refuse_every_workspace_key() {
    let app = with_operator().await;
    let reader = app.key_with(&["read", "write"]).await;

    expect_error(scrape(&app, None).await, 401, "unauthenticated").await;
    expect_error(
        scrape(&app, Some("prl_nonsense")).await,
        401,
        "unauthenticated",
    )
    .await;
    expect_error(scrape(&app, Some(&reader)).await, 403, "forbidden").await;
    // A workspace admin sees one tenant; the metrics show them all.
    expect_error(
        scrape(&app, Some(&app.owner.api_key)).await,
        403,
        "forbidden",
    )
    .await;
    assert_eq!(scrape(&app, Some(OPERATOR)).await.status(), 200);
}

#[tokio::test]
async fn metrics_can_be_opened_to_a_private_scrape_network() {
    let app = spawn_app_with(|s| s.server.metrics_public = true).await;

    let response = scrape(&app, None).await;

    assert_eq!(response.status(), 200);
    assert!(response.text().await.expect("body").contains("parley_"));
}

#[tokio::test]
async fn metrics_expose_http_turn_model_webhook_send_actor_and_pool_families() {
    let app = with_operator().await;
    // A chat turn, and a streamed one for the time to first token.
    let (_, sandbox) = app.chat_channel("Echo.", json!({})).await;
    app.put_identity(PERSON, json!({"name": "Maria"})).await;
    assert_eq!(app.chat(PERSON, &sandbox, "hello").await.status(), 200);
    app.model.push([Reply::Text("Hello there".to_owned())]);
    app.model
        .set_latency(Duration::from_millis(5), Duration::from_millis(5));
    let streamed = app
        .request(
            Method::GET,
            &format!("/conversation/{PERSON}/streaming?channel_id={sandbox}&message=hi"),
            Some(&app.owner.api_key),
        )
        .send()
        .await
        .expect("stream");
    assert_eq!(streamed.status(), 200);
    let _ = streamed.text().await.expect("events");
    // A webhook answered through the Graph API, and a refused one.
    let live = app.live_channel(NUMBER).await;
    let payload = text_message(NUMBER, "351912345679", "Rui", "wamid.M1", "hi");
    assert_eq!(app.webhook(Some(&live), &payload).await, 200);
    app.wait_for_sends(1).await;
    let unsigned = app
        .request(Method::POST, &format!("/webhooks/waba/{live}"), None)
        .json(&payload)
        .send()
        .await
        .expect("unsigned");
    assert_eq!(unsigned.status(), 401);

    let body = scraped(&app).await;

    let chat_route = "route=\"/conversation/{identity_id}/chat/{channel_id}\"";
    assert!(
        samples(&body, "parley_http_requests_total")
            .iter()
            .any(|l| l.contains(chat_route) && l.contains("status=\"200\"")),
        "{body}"
    );
    assert!(
        samples(&body, "parley_http_request_duration_seconds_bucket")
            .iter()
            .any(|l| l.contains(chat_route)),
        "{body}"
    );
    for (family, label) in [
        ("parley_turns_total", "origin=\"api\""),
        ("parley_turns_total", "origin=\"whatsapp\""),
        ("parley_model_requests_total", "mode=\"stream\""),
        ("parley_model_request_seconds_bucket", "mode=\"complete\""),
        ("parley_model_first_token_seconds_bucket", "le="),
        ("parley_webhook_events_total", "outcome=\"stored\""),
        ("parley_webhook_events_total", "outcome=\"refused\""),
        ("parley_whatsapp_sends_total", "outcome=\"sent\""),
        ("parley_whatsapp_limiter_wait_seconds_bucket", "le="),
        ("parley_live_actors", "kind=\"conversations\""),
        ("parley_db_pool_connections", "state=\"idle\""),
        ("parley_db_write_batch_size_bucket", "le=\"64\""),
    ] {
        assert!(
            samples(&body, family).iter().any(|l| l.contains(label)),
            "{family} with {label} missing from:\n{body}"
        );
    }
    // Labels never carry people, ids or secrets.
    for private in [
        PERSON,
        "351912345679",
        sandbox.as_str(),
        live.as_str(),
        "wamid.M1",
    ] {
        assert!(!body.contains(private), "{private} leaked into metrics");
    }
    assert!(!body.contains(&app.owner.api_key));
}

#[tokio::test]
async fn media_fetches_and_the_bytes_kept_are_counted() {
    use parley_testkit::graph::messages_payload;
    let app = with_operator().await;
    let channel = app.live_channel(NUMBER).await;
    let picture: Vec<u8> = (0..40_000_u32).map(|i| (i % 251) as u8).collect();
    let sha256 = app
        .graph
        .add_media("media-metrics-1", picture, "image/jpeg");
    // A file that is not the one Meta described: failed, never kept.
    app.graph
        .add_media("media-metrics-2", vec![1_u8; 500], "image/jpeg");
    let bad = "0".repeat(64);
    app.graph.misdescribe_media("media-metrics-2", &bad);
    for (n, (id, digest)) in [("media-metrics-1", sha256), ("media-metrics-2", bad)]
        .into_iter()
        .enumerate()
    {
        let image = json!({"from": &PERSON[1..], "id": format!("wamid.MM{n}"), "timestamp": "1749416383",
                           "type": "image", "image": {"id": id, "mime_type": "image/jpeg", "sha256": digest}});
        let payload = messages_payload(NUMBER, &PERSON[1..], "Ana", image);
        assert_eq!(app.webhook(Some(&channel), &payload).await, 200);
    }
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let body = scraped(&app).await;
        let stored = samples(&body, "parley_media_fetches_total")
            .iter()
            .any(|l| l.contains("outcome=\"stored\""));
        let failed = samples(&body, "parley_media_fetches_total")
            .iter()
            .any(|l| l.contains("outcome=\"failed\""));
        let bytes: f64 = samples(&body, "parley_media_stored_bytes_total")
            .first()
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse().ok())
            .unwrap_or(0.0);
        if stored && failed && bytes >= 40_000.0 {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "media families never showed both outcomes and the bytes: {body}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
