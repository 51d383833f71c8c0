//! What live actors cache follows what changes through the API: the next turn of a live
//! conversation sees a renamed stage, a changed assistant, and a deleted channel's actor stops.

use parley_testkit::graph::text_message;
use reqwest::Method;
use serde_json::json;

use crate::helpers::{expect_error, expect_status, order_update, spawn_app, spawn_app_with};

const STAGED: &str = "Stage: {{identity.stage}}.";

#[tokio::test]
async fn renaming_or_deleting_a_stage_reaches_a_live_conversation() {
    let app = spawn_app().await;
    let (_, channel) = app.chat_channel(STAGED, json!({})).await;
    let stage = app.stage("Lead").await;
    app.put_identity("crm-1", json!({"name": "Ana"})).await;
    app.set_stage("crm-1", "Lead").await;
    expect_status(app.chat("crm-1", &channel, "one").await, 200).await;
    assert_eq!(app.last_system_prompt(), "Stage: Lead.");
    assert_eq!(app.live_actors("root/conversations").await, 1);

    let renamed = app
        .send_json(
            Method::PUT,
            &format!("/stages/{stage}"),
            &json!({"name": "Qualified"}),
        )
        .await;
    expect_status(renamed, 200).await;
    expect_status(app.chat("crm-1", &channel, "two").await, 200).await;
    assert_eq!(app.last_system_prompt(), "Stage: Qualified.");

    expect_status(app.delete(&format!("/stages/{stage}")).await, 200).await;
    expect_status(app.chat("crm-1", &channel, "three").await, 200).await;
    assert_eq!(app.last_system_prompt(), "Stage: .");
    let tools = app.model.last_request().expect("request")["tools"].to_string();
    assert!(!tools.contains("Qualified"), "{tools}");
}

#[tokio::test]
async fn a_changed_assistant_answers_the_next_turn_of_a_live_conversation() {
    let app = spawn_app().await;
    let (assistant, channel) = app.chat_channel("First instructions.", json!({})).await;
    app.put_identity("crm-1", json!({"name": "Ana"})).await;
    expect_status(app.chat("crm-1", &channel, "one").await, 200).await;
    assert_eq!(app.last_system_prompt(), "First instructions.");

    let patched = app
        .send_json(
            Method::PATCH,
            &format!("/assistant/{assistant}"),
            &json!({"instructions": "Second instructions."}),
        )
        .await;
    expect_status(patched, 200).await;
    expect_status(app.chat("crm-1", &channel, "two").await, 200).await;
    assert_eq!(app.last_system_prompt(), "Second instructions.");

    expect_status(app.delete(&format!("/assistant/{assistant}")).await, 200).await;
    let refused = app.chat("crm-1", &channel, "three").await;
    expect_error(refused, 409, "conflict").await;
}

/// Routes and stages are read once for all conversation actors: a change must reach an actor
/// that was not live when it happened, not only the live ones.
#[tokio::test]
async fn a_change_reaches_the_first_turn_of_an_identity_not_live_when_it_happened() {
    let app = spawn_app().await;
    let (assistant, channel) = app.chat_channel(STAGED, json!({})).await;
    let stage = app.stage("Lead").await;
    app.put_identity("crm-1", json!({"name": "Ana"})).await;
    app.put_identity("crm-2", json!({"name": "Bo"})).await;
    app.set_stage("crm-2", "Lead").await;
    expect_status(app.chat("crm-1", &channel, "one").await, 200).await;
    assert_eq!(app.last_system_prompt(), "Stage: .");
    assert_eq!(app.live_actors("root/conversations").await, 1);

    let patched = app
        .send_json(
            Method::PATCH,
            &format!("/assistant/{assistant}"),
            &json!({"instructions": "Now: {{identity.stage}}."}),
        )
        .await;
    expect_status(patched, 200).await;
    let renamed = app
        .send_json(
            Method::PUT,
            &format!("/stages/{stage}"),
            &json!({"name": "Qualified"}),
        )
        .await;
    expect_status(renamed, 200).await;
    expect_status(app.chat("crm-2", &channel, "hello").await, 200).await;
    assert_eq!(app.last_system_prompt(), "Now: Qualified.");
    assert_eq!(app.live_actors("root/conversations").await, 2);
}

#[tokio::test]
async fn deleting_a_channel_stops_its_actor() {
    let app = spawn_app().await;
    let channel = app.live_channel("106540352242922").await;
    app.wait_for_live_actors("root/channels", 1).await;

    expect_status(app.delete(&format!("/channels/{channel}")).await, 200).await;

    app.wait_for_live_actors("root/channels", 0).await;
}

/// The channel a webhook is addressed to is remembered; a change through the API is seen by
/// the next webhook.
#[tokio::test]
async fn a_webhook_sees_its_channel_renumbered_or_deleted_at_once() {
    let app = spawn_app().await;
    let (old, new) = ("106540352242922", "106540352242999");
    let channel = app.live_channel(old).await;
    let from = "16505551234";
    let message = |number: &str, wamid: &str| text_message(number, from, "Sheena", wamid, "hi");
    let (status, summary) = app.webhook_summary(None, &message(old, "wamid.C1")).await;
    assert_eq!((status, &summary["stored"]), (200, &json!(1)), "{summary}");
    let (status, summary) = app
        .webhook_summary(Some(&channel), &message(old, "wamid.C2"))
        .await;
    assert_eq!((status, &summary["stored"]), (200, &json!(1)), "{summary}");

    let renumbered = app
        .send_json(
            Method::PUT,
            &format!("/channels/{channel}"),
            &json!({"phoneNumberId": new}),
        )
        .await;
    expect_status(renumbered, 200).await;
    let (status, summary) = app.webhook_summary(None, &message(old, "wamid.C3")).await;
    assert_eq!(
        (status, &summary["ignored"]),
        (200, &json!(1)),
        "the old number routes nowhere: {summary}"
    );
    let (status, summary) = app.webhook_summary(None, &message(new, "wamid.C4")).await;
    assert_eq!((status, &summary["stored"]), (200, &json!(1)), "{summary}");
    let (status, summary) = app
        .webhook_summary(Some(&channel), &message(old, "wamid.C5"))
        .await;
    assert_eq!(
        (status, &summary["ignored"]),
        (200, &json!(1)),
        "a change for the old number is not the channel's any more: {summary}"
    );

    expect_status(app.delete(&format!("/channels/{channel}")).await, 200).await;
    let (status, _) = app
        .webhook_summary(Some(&channel), &message(new, "wamid.C6"))
        .await;
    assert_eq!(status, 404, "a deleted channel takes no webhooks");
    let (status, summary) = app.webhook_summary(None, &message(new, "wamid.C7")).await;
    assert_eq!((status, &summary["ignored"]), (200, &json!(1)), "{summary}");
}

#[tokio::test]
async fn a_message_sent_to_a_live_identity_is_in_its_next_turns_history() {
    let app = spawn_app().await;
    let channel = app.live_channel("106540352242922").await;
    app.graph.add_template("waba-1", order_update());
    app.put_identity("crm-1", json!({"name": "Ana", "phone": "+5511987654321"}))
        .await;
    // The first turn makes the identity's actor live, keeping the conversation's history.
    expect_status(app.chat("crm-1", &channel, "one").await, 200).await;

    let sent = app
        .send_template(
            &channel,
            &json!({"identity": {"phone": "5511987654321"}, "templateId": "order_update", "templateType": "text",
                    "templateLanguage": "en_US", "templateComponents": {"body": [{"type": "text", "text": "Ana"}, {"type": "text", "text": "#42"}]}}),
        )
        .await;
    expect_status(sent, 200).await;
    expect_status(app.chat("crm-1", &channel, "two").await, 200).await;

    let request = app.model.last_request().expect("request");
    let history: Vec<_> = request["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .skip(1)
        .map(|m| (m["role"].clone(), m["content"].clone()))
        .collect();
    assert_eq!(
        history,
        [
            (json!("user"), json!("one")),
            (json!("assistant"), json!("You said: one")),
            (
                json!("assistant"),
                json!("Hi Ana, your order #42 has shipped.")
            ),
            (json!("user"), json!("two")),
        ]
    );
}

/// A quiet identity's actor rests: it stops, and the registry keeps its cache until the idle
/// timeout. A change announced while it rests must reach that cache.
#[tokio::test]
async fn a_change_reaches_an_identity_whose_actor_rests() {
    let app = spawn_app_with(|s| s.actors.conversation_actor_rest_ms = 50).await;
    let (_, channel) = app
        .chat_channel("You help {{identity.name}}.", json!({}))
        .await;
    app.put_identity("crm-1", json!({"name": "Ana"})).await;
    expect_status(app.chat("crm-1", &channel, "one").await, 200).await;
    assert_eq!(app.last_system_prompt(), "You help Ana.");
    app.wait_for_live_actors("root/conversations", 0).await;
    assert_eq!(app.resting_identities().await, 1);

    app.put_identity("crm-1", json!({"name": "Bea"})).await;
    expect_status(app.chat("crm-1", &channel, "two").await, 200).await;
    assert_eq!(app.last_system_prompt(), "You help Bea.");
}
