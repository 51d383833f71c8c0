//! Conversation and send routes are not cut by the general request limit: they wait on their
//! upstreams under limits of their own, answer 504 past them, and finish claimed work whatever
//! happens to the client.

use std::time::Duration;

use parley_testkit::Reply;
use serde_json::json;

use crate::helpers::{
    expect_error, expect_status, order_update, order_update_send, spawn_app_with,
};

const NUMBER: &str = "106540352242922";

#[tokio::test]
async fn a_chat_turn_longer_than_the_general_limit_is_answered() {
    let app = spawn_app_with(|s| s.server.request_timeout_secs = 1).await;
    let (_, channel) = app.chat_channel("Echo.", json!({})).await;
    app.put_identity("crm-1", json!({"name": "Ana"})).await;
    app.model
        .set_latency(Duration::from_millis(1_500), Duration::ZERO);

    let body = expect_status(app.chat("crm-1", &channel, "slow one").await, 200).await;

    assert_eq!(body["data"]["reply"], "You said: slow one");
}

#[tokio::test]
async fn a_send_longer_than_the_general_limit_is_answered_and_recorded() {
    let app = spawn_app_with(|s| s.server.request_timeout_secs = 1).await;
    let channel = app.live_channel(NUMBER).await;
    app.graph.add_template("waba-1", order_update());
    app.graph.set_latency(Duration::from_millis(1_500));

    let response = app
        .send_template(&channel, &order_update_send("5511987654321"))
        .await;

    let body = expect_status(response, 200).await;
    assert_eq!(body["data"]["status"], "sent");
    assert_eq!(app.graph.sent().len(), 1);
}

#[tokio::test]
async fn a_send_past_its_own_limit_is_a_504_and_still_recorded_once() {
    let app = spawn_app_with(|s| s.server.send_timeout_secs = 1).await;
    let channel = app.live_channel(NUMBER).await;
    app.graph.add_template("waba-1", order_update());
    app.graph.set_latency(Duration::from_millis(2_500));

    let response = app
        .send_template(&channel, &order_update_send("5511987654321"))
        .await;

    expect_error(response, 504, "upstream_timeout").await;
    let messages = app
        .wait_for_messages("+5511987654321", |messages| {
            messages
                .iter()
                .any(|m| m["status"] == "sent" && m["platform_message_id"].is_string())
        })
        .await;
    assert_eq!(messages.len(), 1, "{messages:#?}");
    let sent = app.graph.sent();
    assert_eq!(sent.len(), 1);
    assert_eq!(messages[0]["platform_message_id"], sent[0].wamid.as_str());
    // A status for it now finds it.
    let status = parley_testkit::graph::status_payload(NUMBER, &sent[0].wamid, "delivered", None);
    assert_eq!(app.webhook(None, &status).await, 200);
    app.wait_for_messages("+5511987654321", |messages| {
        messages.iter().any(|m| m["status"] == "delivered")
    })
    .await;
}

#[tokio::test]
async fn a_chat_past_the_turn_limit_is_a_504_and_the_reply_is_stored() {
    let app = spawn_app_with(|s| s.actors.turn_timeout_secs = 1).await;
    let (_, channel) = app.chat_channel("Echo.", json!({})).await;
    app.put_identity("crm-1", json!({"name": "Ana"})).await;
    app.model.push([Reply::Text("late but here".to_owned())]);
    app.model
        .set_latency(Duration::from_millis(2_000), Duration::ZERO);

    expect_error(
        app.chat("crm-1", &channel, "hello").await,
        504,
        "upstream_timeout",
    )
    .await;

    app.wait_for_messages("crm-1", |messages| {
        messages.iter().any(|m| m["content"] == "late but here")
    })
    .await;
}
