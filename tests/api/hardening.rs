//! What a hostile or careless client cannot do: hold connections forever, sign webhooks with an
//! empty secret, crash the server with NUL characters or huge page numbers.

use std::time::Duration;

use reqwest::Method;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::helpers::{TestApp, expect_error, expect_status, spawn_app_with};

/// Waits until the server closes `stream` (a read answers end of file or an error).
async fn closed_by_server(stream: &mut TcpStream, within: Duration) -> bool {
    let mut buffer = [0u8; 1024];
    let deadline = tokio::time::Instant::now() + within;
    loop {
        match tokio::time::timeout_at(deadline, stream.read(&mut buffer)).await {
            Err(_) => return false,
            Ok(Ok(0) | Err(_)) => return true,
            Ok(Ok(_)) => {}
        }
    }
}

fn host(app: &TestApp) -> String {
    app.address.trim_start_matches("http://").to_owned()
}

#[tokio::test]
async fn connections_that_never_finish_their_headers_are_closed_and_others_still_get_in() {
    let app = spawn_app_with(|s| {
        s.server.header_read_timeout_secs = 1;
        s.server.max_connections = 8;
    })
    .await;
    let mut held = Vec::new();
    for _ in 0..16 {
        let mut stream = TcpStream::connect(host(&app)).await.expect("connect");
        stream
            .write_all(b"GET /health HTTP/1.1\r\nHost: parley\r\nX-Slow: ")
            .await
            .expect("write");
        held.push(stream);
    }

    // Everyone else still gets in once the slow ones are shown the door.
    let health = tokio::time::timeout(Duration::from_secs(10), app.get("/health"))
        .await
        .expect("health answered while connections were held");
    expect_status(health, 200).await;
    for stream in &mut held[..8] {
        assert!(
            closed_by_server(stream, Duration::from_secs(5)).await,
            "a half-sent request was left open"
        );
    }
}

#[tokio::test]
async fn an_idle_keep_alive_connection_is_closed() {
    let app = spawn_app_with(|s| s.server.idle_timeout_secs = 1).await;
    let mut stream = TcpStream::connect(host(&app)).await.expect("connect");
    stream
        .write_all(b"GET /health HTTP/1.1\r\nHost: parley\r\n\r\n")
        .await
        .expect("write");
    let mut buffer = [0u8; 4096];
    let read = stream.read(&mut buffer).await.expect("response");
    assert!(String::from_utf8_lossy(&buffer[..read]).starts_with("HTTP/1.1 200"));

    assert!(
        closed_by_server(&mut stream, Duration::from_secs(5)).await,
        "the idle connection stayed open"
    );
}

#[tokio::test]
async fn an_empty_app_secret_refuses_every_webhook() {
    let app = spawn_app_with(|s| s.whatsapp.app_secret = Some("".into())).await;
    let channel = app.live_channel("106540352242922").await;
    let payload = parley_testkit::graph::text_message(
        "106540352242922",
        "16505551234",
        "Sheena",
        "wamid.EMPTY1",
        "forged",
    );

    let signed_with_nothing = app
        .graph
        .post_webhook(
            &format!("{}/webhooks/waba/{channel}", app.address),
            "",
            &payload,
        )
        .await;

    assert_eq!(signed_with_nothing, 401);
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(app.model.requests().is_empty(), "nothing was answered");
}

#[tokio::test]
async fn nul_characters_are_refused_naming_the_field() {
    use reqwest::Method;
    use serde_json::json;
    let app = crate::helpers::spawn_app().await;
    app.put_identity("crm-1", json!({"name": "Ana"})).await;
    let bodies = [
        (
            Method::POST,
            "/workers",
            json!({"name": "Sup\u{0}port"}),
            json!(["name"]),
        ),
        (
            Method::PUT,
            "/identity/crm-1",
            json!({"metadata": {"tags": ["ok", "b\u{0}d"]}}),
            json!(["metadata", "tags", 1]),
        ),
        (
            Method::PUT,
            "/memory/from/crm-1",
            json!({"key": "profile.name", "value": {"first": "A\u{0}na"}}),
            json!(["value", "first"]),
        ),
        (
            Method::POST,
            "/stages",
            json!({"name": "Lead", "metadata": {"k\u{0}": 1}}),
            json!(["metadata", "k\u{0}"]),
        ),
    ];
    for (method, path, body, field) in bodies {
        let response = app.send_json(method, path, &body).await;
        let refused = expect_error(response, 400, "validation_failed").await;
        assert_eq!(refused["details"][0]["path"], field, "{path}");
    }
    let in_path = app.get("/identity/crm%00-1").await;
    let refused = crate::helpers::expect_error(in_path, 400, "validation_failed").await;
    assert_eq!(refused["details"][0]["path"], json!(["identity_id"]));
    let in_query = app.get("/conversations?identity_id=crm%00").await;
    let refused = crate::helpers::expect_error(in_query, 400, "invalid_query").await;
    assert_eq!(refused["details"][0]["path"], json!(["identity_id"]));
}

#[tokio::test]
async fn a_nul_in_one_webhook_message_does_not_spoil_the_others() {
    use serde_json::json;
    let app = crate::helpers::spawn_app().await;
    let channel = app.live_channel("106540352242922").await;
    let payload = json!({"object": "whatsapp_business_account", "entry": [{"id": "waba", "changes": [{"field": "messages", "value": {
    "messaging_product": "whatsapp",
    "metadata": {"display_phone_number": "15550000000", "phone_number_id": "106540352242922"},
    "contacts": [{"profile": {"name": "She\u{0}ena"}, "wa_id": "16505551234"}],
    "messages": [
        {"from": "16505551234", "id": "wamid.NUL1", "timestamp": "1749416383", "type": "text", "text": {"body": "bad\u{0}byte"}},
        {"from": "16505551234", "id": "wamid.NUL2", "timestamp": "1749416384", "type": "text", "text": {"body": "fine"}}
    ]}}]}]});

    assert_eq!(app.webhook(Some(&channel), &payload).await, 200);

    let sent = app.wait_for_sends(2).await;
    let texts: Vec<&str> = sent.iter().filter_map(|m| m.text()).collect();
    assert_eq!(texts, ["You said: bad\u{FFFD}byte", "You said: fine"]);
}

#[tokio::test]
async fn a_page_number_too_large_for_the_database_is_a_400_on_every_list() {
    let app = crate::helpers::spawn_app().await;
    app.put_identity("crm-1", serde_json::json!({"name": "Ana"}))
        .await;
    for list in [
        "/workers",
        "/identity",
        "/channels",
        "/stages",
        "/conversations",
        "/workspace",
        "/workspace/api-keys",
        "/identity/crm-1/stages",
    ] {
        let response = app
            .get(&format!("{list}?page=18446744073709551615&limit=100"))
            .await;
        let refused = expect_error(response, 400, "validation_failed").await;
        assert_eq!(
            refused["details"][0]["path"],
            serde_json::json!(["page"]),
            "{list}"
        );
    }
    let last = app.get("/workers?page=1000000000000000&limit=100").await;
    expect_status(last, 200).await;
    let past_the_last = app.get("/workers?page=1000000000000001&limit=1").await;
    expect_error(past_the_last, 400, "validation_failed").await;
}

#[tokio::test]
async fn a_request_id_that_is_not_a_plain_token_is_replaced() {
    let app = crate::helpers::spawn_app().await;
    let long = "a".repeat(129);
    for given in ["has spaces", long.as_str(), "inject\u{1b}[31m"] {
        let response = reqwest::Client::new()
            .get(format!("{}/health", app.address))
            .header("x-request-id", given)
            .send()
            .await;
        let Ok(response) = response else {
            continue; // The client refused to send it at all.
        };
        let echoed = response
            .headers()
            .get("x-request-id")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        assert_ne!(echoed, given);
        assert!(uuid::Uuid::parse_str(&echoed).is_ok(), "{echoed}");
    }
}

#[tokio::test]
async fn failed_authentication_is_rate_limited_per_address_and_valid_keys_are_not() {
    let app = spawn_app_with(|s| s.server.auth_failures_per_minute = 3).await;
    for _ in 0..3 {
        crate::helpers::expect_error(
            app.get_with("/workers", "prl_guess").await,
            401,
            "unauthenticated",
        )
        .await;
    }

    let limited = app.get_with("/workers", "prl_guess").await;
    // Three a minute: the next is allowed within about 20 s, and the answer says so.
    let wait: u64 = limited.headers()["retry-after"]
        .to_str()
        .ok()
        .and_then(|v| v.parse().ok())
        .expect("a Retry-After in seconds");
    assert!((1..=20).contains(&wait), "Retry-After: {wait}");
    crate::helpers::expect_error(limited, 429, "rate_limited").await;
    let missing = app
        .request(reqwest::Method::GET, "/workers", None)
        .send()
        .await
        .expect("request");
    crate::helpers::expect_error(missing, 429, "rate_limited").await;

    expect_status(app.get("/workers").await, 200).await;
}

#[tokio::test]
async fn free_form_fields_are_bounded_and_a_refusal_never_echoes_the_value() {
    let app = crate::helpers::spawn_app().await;
    let big = "v".repeat(20 * 1024);
    let cases = [
        (
            "/stages",
            Method::POST,
            json!({"name": "Lead", "metadata": {"note": big}}),
            json!(["metadata"]),
        ),
        (
            "/identity/crm-9",
            Method::PUT,
            json!({"name": "Ana", "metadata": {"note": big}}),
            json!(["metadata"]),
        ),
        (
            "/identity/crm-9",
            Method::PUT,
            json!({"name": "Ana", "metadata": big}),
            json!(["metadata"]),
        ),
    ];
    for (path, method, body, field) in cases {
        let response = app.send_json(method, path, &body).await;
        assert_eq!(response.status(), 400, "{path}");
        let text = response.text().await.expect("body");
        assert!(text.len() < 1_000, "{path}: a {} byte refusal", text.len());
        assert!(!text.contains("vvvvvvvvvv"), "{path} echoed the value");
        let error: serde_json::Value = serde_json::from_str(&text).expect("json");
        assert_eq!(error["details"][0]["path"], field, "{path}: {error}");
    }
}

#[tokio::test]
async fn one_address_cannot_hold_every_connection() {
    let app = spawn_app_with(|s| {
        s.server.header_read_timeout_secs = 30;
        s.server.max_connections = 64;
        s.server.max_unfinished_per_address = 4;
    })
    .await;
    // One client (127.0.0.1) holds half-sent requests and opens more as it goes.
    let mut held = Vec::new();
    for _ in 0..12 {
        let mut stream = TcpStream::connect(host(&app)).await.expect("connect");
        let _ = stream
            .write_all(b"GET /health HTTP/1.1\r\nHost: parley\r\nX-Slow: ")
            .await;
        held.push(stream);
    }
    // Past its share, its connections are closed at once, long before the header timeout.
    let mut refused = 0;
    for stream in &mut held[4..] {
        if closed_by_server(stream, Duration::from_secs(5)).await {
            refused += 1;
        }
    }
    assert_eq!(
        refused, 8,
        "the hog's connections past its share were not closed"
    );

    // Another client address is answered at once.
    let other = reqwest::Client::builder()
        .local_address(std::net::IpAddr::from([127, 0, 0, 2]))
        .build()
        .expect("client");
    let health = tokio::time::timeout(
        Duration::from_secs(5),
        other.get(format!("http://{}/health", host(&app))).send(),
    )
    .await
    .expect("answered while another address held its share")
    .expect("health");
    assert_eq!(health.status(), 200);
    drop(held);
}
