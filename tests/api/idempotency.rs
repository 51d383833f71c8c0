//! `Idempotency-Key` on the template send: a retry answers the first response again without
//! sending again; another request under the same key is refused; keys are per workspace and
//! live 24 hours.

use reqwest::Method;
use sea_orm::ConnectionTrait;
use serde_json::{Value, json};

use crate::helpers::{
    TestApp, expect_error, expect_status, order_update, order_update_send, spawn_app,
};

const NUMBER: &str = "106540352242922";

async fn send_with_key(app: &TestApp, key: &str, channel: &str, body: &Value) -> reqwest::Response {
    app.request(
        Method::POST,
        &format!("/channels/{channel}/waba/send"),
        Some(&app.owner.api_key),
    )
    .header("Idempotency-Key", key)
    .json(body)
    .send()
    .await
    .expect("request")
}

#[tokio::test]
async fn a_retry_with_the_same_key_answers_the_first_response_without_sending_again() {
    let app = spawn_app().await;
    let channel = app.live_channel(NUMBER).await;
    app.graph.add_template("waba-1", order_update());
    let body = order_update_send("5511987654321");

    let first = expect_status(send_with_key(&app, "order-42", &channel, &body).await, 200).await;
    let retry = send_with_key(&app, "order-42", &channel, &body).await;
    assert_eq!(
        retry
            .headers()
            .get("idempotent-replayed")
            .and_then(|v| v.to_str().ok()),
        Some("true")
    );
    let retry = expect_status(retry, 200).await;

    assert_eq!(retry, first);
    assert_eq!(app.graph.sent().len(), 1, "sent once");
    let stored = app.stored_messages("+5511987654321").await;
    assert_eq!(stored.len(), 1, "{stored:?}");
}

#[tokio::test]
async fn the_same_key_with_another_body_is_a_409() {
    let app = spawn_app().await;
    let channel = app.live_channel(NUMBER).await;
    app.graph.add_template("waba-1", order_update());
    expect_status(
        send_with_key(&app, "k-1", &channel, &order_update_send("5511987654321")).await,
        200,
    )
    .await;

    let other = send_with_key(&app, "k-1", &channel, &order_update_send("5511912345678")).await;

    expect_error(other, 409, "idempotency_key_reused").await;
    assert_eq!(app.graph.sent().len(), 1);
}

#[tokio::test]
async fn a_refusal_is_replayed_too_and_keys_are_per_workspace_and_expire() {
    let app = spawn_app().await;
    let channel = app.live_channel(NUMBER).await;
    app.graph.add_template("waba-1", order_update());
    app.graph.fail_next_sends([131_026]);
    let body = order_update_send("5511987654321");

    let refused = send_with_key(&app, "k-2", &channel, &body).await;
    let first = expect_error(refused, 502, "upstream_failed").await;
    let again = expect_status(send_with_key(&app, "k-2", &channel, &body).await, 502).await;
    assert_eq!(again, first, "the refusal again, not a second try");
    assert_eq!(app.graph.rejected().len(), 1);

    // Another workspace's key of the same name is its own.
    let other = app
        .bootstrap_another("Globex", "Globex HQ", "boss@globex.test")
        .await;
    let theirs = app
        .send_json_with(
            Method::POST,
            "/channels/waba",
            &other.api_key,
            &json!({"name": "Their line", "integration": "sandbox"}),
        )
        .await;
    let their_channel = expect_status(theirs, 201).await["data"]["id"]
        .as_str()
        .expect("id")
        .to_owned();
    let template = app
        .send_json_with(
            Method::POST,
            &format!("/channels/{their_channel}/waba/templates"),
            &other.api_key,
            &json!({"name": "order_update", "type": "UTILITY", "language": "en_US",
                    "components": [{"type": "BODY", "text": "Hi {{1}}, your order {{2}} has shipped."}]}),
        )
        .await;
    expect_status(template, 201).await;
    let response = app
        .request(
            Method::POST,
            &format!("/channels/{their_channel}/waba/send"),
            Some(&other.api_key),
        )
        .header("Idempotency-Key", "k-2")
        .json(&body)
        .send()
        .await
        .expect("request");
    expect_status(response, 200).await;

    // After 24 hours the key is free again.
    let db = app.db().await;
    db.execute_unprepared(
        "UPDATE idempotency_keys SET created_at = created_at - interval '25 hours'",
    )
    .await
    .or(db
        .execute_unprepared(
            "UPDATE idempotency_keys SET created_at = datetime(created_at, '-25 hours')",
        )
        .await)
    .expect("age the keys");
    let fresh = send_with_key(&app, "k-2", &channel, &body).await;
    expect_status(fresh, 200).await;
    assert_eq!(app.graph.sent().len(), 1, "sent this time");
}

#[tokio::test]
async fn a_malformed_key_is_a_400_naming_the_header() {
    let app = spawn_app().await;
    let channel = app.sandbox_channel("Main line").await;
    let long = "k".repeat(300);

    let response = send_with_key(&app, &long, &channel, &order_update_send("5511987654321")).await;

    let body = expect_error(response, 400, "invalid_idempotency_key").await;
    assert_eq!(body["details"][0]["path"], json!(["Idempotency-Key"]));
}

#[tokio::test]
async fn a_chat_retried_with_its_key_gets_the_same_turn_without_a_second_model_call() {
    let app = spawn_app().await;
    let (_, channel) = app.chat_channel("Echo.", json!({})).await;
    app.put_identity("crm-1", json!({"name": "Ana"})).await;
    let chat = || {
        app.request(
            Method::POST,
            &format!("/conversation/crm-1/chat/{channel}"),
            Some(&app.owner.api_key),
        )
        .header("Idempotency-Key", "chat-7")
        .json(&json!({"message": "hello"}))
        .send()
    };

    let first = expect_status(chat().await.expect("request"), 200).await;
    let retry = expect_status(chat().await.expect("request"), 200).await;

    assert_eq!(retry, first);
    assert_eq!(app.model.requests().len(), 1, "one model call");
    assert_eq!(
        app.stored_messages("crm-1").await.len(),
        2,
        "one user message, one reply"
    );
}
