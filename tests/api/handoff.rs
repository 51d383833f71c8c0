//! Human handoff: a person takes a conversation over, the assistant stays quiet, operators
//! reply through the channel, and the assistant comes back knowing a person was there.

use std::time::Duration;

use parley_testkit::graph::text_message;
use parley_testkit::{FakeToolCall, Reply};
use reqwest::Method;
use serde_json::{Value, json};

use crate::helpers::{TestApp, expect_error, expect_status, spawn_app, spawn_app_with};

const NUMBER: &str = "106540352242922";
const SHEENA: &str = "16505551234";
const SHEENA_ID: &str = "+16505551234";

/// Posts Sheena's message `wamid` saying `text` to the channel's webhook.
async fn sheena_writes(app: &TestApp, channel: &str, wamid: &str, text: &str) {
    let payload = text_message(NUMBER, SHEENA, "Sheena Nelson", wamid, text);
    assert_eq!(app.webhook(Some(channel), &payload).await, 200);
}

/// `POST /conversation/{identity}/{action}/{channel}` with `body`.
async fn act(app: &TestApp, action: &str, identity: &str, channel: &str, body: &Value) -> Value {
    let path = format!("/conversation/{identity}/{action}/{channel}");
    expect_status(app.send_json(Method::POST, &path, body).await, 200).await
}

/// Waits until the identity's messages hold one from the person saying `text`.
async fn wait_for_inbound(app: &TestApp, identity: &str, text: &str) -> Vec<Value> {
    app.wait_for_messages(identity, |all| {
        all.iter()
            .any(|m| m["role"] == "user" && m["content"] == text)
    })
    .await
}

/// The operator's token of the tests that read metrics.
const OPERATOR: &str = "op-token-handoff";

/// A server whose metrics the tests may read.
async fn app_with_metrics(configure: impl FnOnce(&mut parley::config::Settings)) -> TestApp {
    spawn_app_with(|s| {
        s.server.operator_token = Some(OPERATOR.into());
        configure(s);
    })
    .await
}

/// Asserts that the metrics hold a sample of `family` with `label` (the recorder is shared by
/// every test of the process: counts are not this test's alone).
async fn assert_counted(app: &TestApp, family: &str, label: &str) {
    let body = app.metrics(OPERATOR).await;
    assert!(
        body.lines()
            .any(|l| l.starts_with(family) && l.contains(label)),
        "{family} {{{label}}} in the metrics"
    );
}

/// The contents of the messages of the model's most recent request, as `(role, content)`.
fn last_request_messages(app: &TestApp) -> Vec<(String, String)> {
    let request = app.model.last_request().expect("the model was called");
    request["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .map(|m| {
            (
                m["role"].as_str().unwrap_or_default().to_owned(),
                m["content"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

#[tokio::test]
async fn a_person_takes_over_replies_through_the_channel_and_gives_it_back() {
    let app = app_with_metrics(|_| {}).await;
    let channel = app.live_channel(NUMBER).await;
    sheena_writes(&app, &channel, "wamid.H1", "Where is my order?").await;
    app.wait_for_sends(1).await;

    let handed = act(
        &app,
        "handoff",
        SHEENA_ID,
        &channel,
        &json!({"reason": "angry about a late order"}),
    )
    .await;
    assert_eq!(handed["data"]["mode"], "human");
    assert_eq!(handed["data"]["handoff_reason"], "angry about a late order");
    assert_eq!(handed["data"]["status"], "open");
    let changed_at = handed["data"]["mode_changed_at"].clone();
    assert!(changed_at.is_string(), "{handed}");
    // Idempotent: handing over again changes nothing.
    let again = act(&app, "handoff", SHEENA_ID, &channel, &json!({})).await;
    assert_eq!(again["data"]["id"], handed["data"]["id"]);
    assert_eq!(again["data"]["mode_changed_at"], changed_at);
    assert_eq!(again["data"]["handoff_reason"], "angry about a late order");

    // The person's message is stored for the operator; the assistant says nothing.
    sheena_writes(&app, &channel, "wamid.H2", "I want to talk to a person").await;
    wait_for_inbound(&app, SHEENA_ID, "I want to talk to a person").await;
    let chat = app.chat(SHEENA_ID, &channel, "Hello?").await;
    expect_error(chat, 409, "conversation_in_human_mode").await;
    let stream = app
        .get(&format!(
            "/conversation/{SHEENA_ID}/streaming?channel_id={channel}&message=Hi"
        ))
        .await;
    expect_error(stream, 409, "conversation_in_human_mode").await;
    assert_eq!(app.graph.sent().len(), 1, "no reply while a person has it");
    assert_eq!(app.model.requests().len(), 1, "the model was not asked");

    // Lists filter by mode.
    let human = expect_status(app.get("/conversations?mode=human").await, 200).await;
    assert_eq!(human["data"].as_array().map(Vec::len), Some(1));
    assert_eq!(human["data"][0]["id"], handed["data"]["id"]);
    let bot = expect_status(app.get("/conversations?mode=assistant").await, 200).await;
    assert_eq!(bot["data"], json!([]));
    let bad = expect_error(
        app.get("/conversations?mode=robot").await,
        400,
        "validation_failed",
    )
    .await;
    assert_eq!(bad["details"][0]["path"], json!(["mode"]));

    // The operator answers through the channel; the message is stored as the operator's.
    let replied = act(
        &app,
        "reply",
        SHEENA_ID,
        &channel,
        &json!({"text": "Hi Sheena, Rita here. It ships tomorrow."}),
    )
    .await;
    assert_eq!(replied["data"]["status"], "sent");
    assert_eq!(replied["data"]["conversation_id"], handed["data"]["id"]);
    let sent = app.wait_for_sends(2).await;
    assert_eq!(sent[1].to(), SHEENA);
    assert_eq!(
        sent[1].text(),
        Some("Hi Sheena, Rita here. It ships tomorrow.")
    );
    let messages = app
        .wait_for_messages(SHEENA_ID, |all| all.iter().any(|m| m["role"] == "operator"))
        .await;
    let operator = messages
        .iter()
        .find(|m| m["role"] == "operator")
        .expect("operator");
    assert_eq!(operator["direction"], "outbound");
    assert_eq!(operator["platform_message_id"], sent[1].wamid.as_str());

    // Back to the assistant, which answers again and knows a person was there.
    let resumed = act(&app, "resume", SHEENA_ID, &channel, &json!({})).await;
    assert_eq!(resumed["data"]["mode"], "assistant");
    assert_ne!(resumed["data"]["mode_changed_at"], changed_at);
    let resumed_again = act(&app, "resume", SHEENA_ID, &channel, &json!({})).await;
    assert_eq!(
        resumed_again["data"]["mode_changed_at"], resumed["data"]["mode_changed_at"],
        "resuming twice changes nothing"
    );
    sheena_writes(&app, &channel, "wamid.H3", "Thanks! One more thing").await;
    let sent = app.wait_for_sends(3).await;
    assert_eq!(sent[2].text(), Some("You said: Thanks! One more thing"));
    let history = last_request_messages(&app);
    let note = history
        .iter()
        .position(|(role, content)| {
            role == "system" && content.starts_with("A person from the business handled")
        })
        .unwrap_or_else(|| panic!("the model hears a person handled it: {history:?}"));
    let operator_line = history
        .iter()
        .position(|(_, content)| content == "Hi Sheena, Rita here. It ships tomorrow.")
        .expect("the operator's message is in the history");
    let held = history
        .iter()
        .position(|(role, content)| role == "user" && content == "I want to talk to a person")
        .expect("the message the person received is in the history");
    assert!(held < operator_line && operator_line < note, "{history:?}");
    assert_eq!(
        history.last().map(|(_, c)| c.as_str()),
        Some("Thanks! One more thing")
    );

    assert_counted(&app, "parley_handoffs_total", "by=\"api\"").await;
    assert_counted(&app, "parley_handoff_resumes_total", "why=\"api\"").await;
    assert_counted(&app, "parley_operator_messages_total", "outcome=\"sent\"").await;
}

#[tokio::test]
async fn a_burst_racing_a_handoff_is_answered_before_it_or_not_at_all() {
    let app = spawn_app().await;
    let channel = app.live_channel(NUMBER).await;
    app.model
        .set_latency(Duration::from_millis(5), Duration::from_millis(0));
    sheena_writes(&app, &channel, "wamid.R0", "first").await;
    app.wait_for_sends(1).await;

    // Ten messages race the handoff; ten more come after it was answered.
    for i in 1..=10 {
        sheena_writes(
            &app,
            &channel,
            &format!("wamid.R{i}"),
            &format!("racing {i}"),
        )
        .await;
    }
    let handed = act(&app, "handoff", SHEENA_ID, &channel, &json!({})).await;
    for i in 11..=20 {
        sheena_writes(
            &app,
            &channel,
            &format!("wamid.R{i}"),
            &format!("after {i}"),
        )
        .await;
    }
    let all = app
        .wait_for_messages(SHEENA_ID, |all| {
            all.iter().filter(|m| m["role"] == "user").count() == 21
        })
        .await;

    let handed_at = handed["data"]["mode_changed_at"].as_str().expect("time");
    let replies: Vec<&Value> = all.iter().filter(|m| m["role"] == "assistant").collect();
    for reply in &replies {
        let at = reply["created_at"].as_str().expect("time");
        assert!(
            at <= handed_at,
            "a reply stored at {at}, after the handoff at {handed_at}"
        );
        let answered = reply["content"].as_str().expect("text");
        assert!(!answered.contains("after"), "{answered}");
    }
    // Each racing message was answered once or kept for the person; none after the handoff.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let sent = app.graph.sent();
    assert_eq!(
        sent.len(),
        replies.len(),
        "every stored reply went out once"
    );
    assert!(
        sent.iter()
            .all(|s| !s.text().unwrap_or_default().contains("after"))
    );
}

#[tokio::test]
async fn the_assistant_hands_over_with_its_tool_and_its_reply_still_goes_out() {
    let app = app_with_metrics(|_| {}).await;
    let (_, channel) = app
        .chat_channel("Help.", json!({"settings": {"handoff": true}}))
        .await;
    app.put_identity("crm-7", json!({"name": "Ana"})).await;
    app.model.push([
        Reply::ToolCalls(vec![FakeToolCall::new(
            "handoff_to_human",
            json!({"reason": "asks for a refund over the limit"}),
        )]),
        Reply::Text("A colleague will answer you here shortly.".to_owned()),
    ]);

    let answered = expect_status(
        app.chat("crm-7", &channel, "I want my money back").await,
        200,
    )
    .await;
    assert_eq!(
        answered["data"]["reply"],
        "A colleague will answer you here shortly."
    );
    assert_eq!(
        answered["data"]["tool_calls"][0]["name"],
        "handoff_to_human"
    );
    assert_eq!(answered["data"]["tool_calls"][0]["result"]["ok"], true);
    let offered: Vec<String> = app.model.requests()[0]["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .filter_map(|t| t["function"]["name"].as_str().map(str::to_owned))
        .collect();
    assert!(
        offered.contains(&"handoff_to_human".to_owned()),
        "{offered:?}"
    );

    let conversation = expect_status(
        app.get(&format!(
            "/conversations/{}",
            answered["data"]["conversation_id"].as_str().expect("id")
        ))
        .await,
        200,
    )
    .await;
    assert_eq!(conversation["data"]["mode"], "human");
    assert_eq!(
        conversation["data"]["handoff_reason"],
        "asks for a refund over the limit"
    );
    expect_error(
        app.chat("crm-7", &channel, "Hello?").await,
        409,
        "conversation_in_human_mode",
    )
    .await;
    assert_counted(&app, "parley_handoffs_total", "by=\"tool\"").await;
}

#[tokio::test]
async fn the_handoff_tool_is_offered_only_when_the_assistant_allows_it() {
    let app = spawn_app().await;
    let (_, channel) = app.chat_channel("Help.", json!({})).await;
    app.put_identity("crm-8", json!({"name": "Bo"})).await;
    // A model that calls it anyway is told there is no such tool; nothing is handed over.
    app.model.push([Reply::ToolCalls(vec![FakeToolCall::new(
        "handoff_to_human",
        json!({"reason": "x"}),
    )])]);
    let answered = expect_status(app.chat("crm-8", &channel, "hi").await, 200).await;
    assert_eq!(answered["data"]["tool_calls"][0]["result"]["ok"], false);
    let offered = app.model.requests()[0]["tools"].to_string();
    assert!(!offered.contains("handoff_to_human"), "{offered}");
    expect_status(app.chat("crm-8", &channel, "still there?").await, 200).await;
}

#[tokio::test]
async fn a_quiet_person_gives_the_conversation_back_after_the_assistants_timeout() {
    use parley_persistence::entities::conversation;
    use sea_orm::sea_query::Expr;
    use sea_orm::{ColumnTrait, EntityTrait, QueryFilter};

    let app = app_with_metrics(|s| s.actors.handoff_sweep_ms = 50).await;
    let (_, channel) = app
        .chat_channel(
            "Help.",
            json!({"settings": {"handoff_timeout_minutes": 30}}),
        )
        .await;
    app.put_identity("crm-9", json!({"name": "Cy"})).await;
    expect_status(app.chat("crm-9", &channel, "hello").await, 200).await;
    let handed = act(
        &app,
        "handoff",
        "crm-9",
        &channel,
        &json!({"reason": "vip"}),
    )
    .await;
    let id = handed["data"]["id"].as_str().expect("id").to_owned();

    // Quiet for 29 minutes: still the person's.
    let db = app.db().await;
    let quiet_for = |minutes: i64| {
        let at = parley_persistence::clock::now() - chrono::Duration::minutes(minutes);
        conversation::Entity::update_many()
            .col_expr(conversation::Column::HumanActiveAt, Expr::value(at))
            .filter(conversation::Column::Id.eq(uuid::Uuid::parse_str(&id).expect("uuid")))
    };
    quiet_for(29).exec(&db).await.expect("backdated");
    tokio::time::sleep(Duration::from_millis(300)).await;
    let still = expect_status(app.get(&format!("/conversations/{id}")).await, 200).await;
    assert_eq!(still["data"]["mode"], "human", "not quiet long enough");

    // Quiet for 31 minutes: the sweep gives it back.
    quiet_for(31).exec(&db).await.expect("backdated");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let now = expect_status(app.get(&format!("/conversations/{id}")).await, 200).await;
        if now["data"]["mode"] == "assistant" {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "never given back: {now}"
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let answered = expect_status(app.chat("crm-9", &channel, "anyone?").await, 200).await;
    assert_eq!(answered["data"]["reply"], "You said: anyone?");
    let history = last_request_messages(&app);
    assert!(
        history.iter().any(|(role, content)| role == "system"
            && content.starts_with("A person from the business handled")),
        "{history:?}"
    );
    assert_counted(&app, "parley_handoff_resumes_total", "why=\"timeout\"").await;
}

#[tokio::test]
async fn an_operator_reply_outside_the_service_window_needs_a_template() {
    let app = spawn_app().await;
    let channel = app.live_channel(NUMBER).await;
    app.graph
        .add_template("waba-1", crate::helpers::order_update());
    // A template reaches Sheena before she ever wrote: no window is open.
    let sent = app
        .send_template(&channel, &crate::helpers::order_update_send(SHEENA_ID))
        .await;
    expect_status(sent, 200).await;
    let before = app.stored_messages(SHEENA_ID).await.len();

    let path = format!("/conversation/{SHEENA_ID}/reply/{channel}");
    let refused = app
        .send_json(Method::POST, &path, &json!({"text": "Hi!"}))
        .await;
    let body = expect_error(refused, 409, "outside_service_window").await;
    assert!(
        body["message"]
            .as_str()
            .is_some_and(|m| m.contains("template"))
    );
    assert_eq!(
        app.stored_messages(SHEENA_ID).await.len(),
        before,
        "nothing stored"
    );
    assert_eq!(app.graph.sent().len(), 1, "only the template went out");
}

#[tokio::test]
async fn refusals_name_what_is_wrong_and_other_workspaces_are_not_found() {
    let app = spawn_app().await;
    let (_, channel) = app.chat_channel("Help.", json!({})).await;
    app.put_identity("crm-1", json!({"name": "Ana"})).await;
    let post = |path: String, body: Value| {
        let app = &app;
        async move { app.send_json(Method::POST, &path, &body).await }
    };

    // Bodies.
    for (body, problem) in [
        (json!({}), "is required"),
        (json!({"text": "  "}), "must not be empty"),
        (json!({"text": 7}), "must be a string"),
        (
            json!({"text": "x".repeat(4097)}),
            "must be at most 4096 characters",
        ),
    ] {
        let refused = post(format!("/conversation/crm-1/reply/{channel}"), body).await;
        let refused = expect_error(refused, 400, "validation_failed").await;
        assert_eq!(refused["details"][0]["path"], json!(["text"]));
        assert_eq!(refused["details"][0]["message"], problem);
    }
    let long = post(
        format!("/conversation/crm-1/handoff/{channel}"),
        json!({"reason": "r".repeat(1025)}),
    )
    .await;
    let long = expect_error(long, 400, "validation_failed").await;
    assert_eq!(long["details"][0]["path"], json!(["reason"]));
    let not_uuid = post("/conversation/crm-1/handoff/nope".to_owned(), json!({})).await;
    expect_error(not_uuid, 400, "validation_failed").await;

    // Unknown ids, and nothing to give back.
    let unknown_channel = uuid::Uuid::now_v7();
    for action in ["handoff", "resume", "reply"] {
        let refused = post(
            format!("/conversation/crm-1/{action}/{unknown_channel}"),
            json!({"text": "hi"}),
        )
        .await;
        let refused = expect_error(refused, 404, "not_found").await;
        assert_eq!(refused["message"], "Channel not found");
        let refused = post(
            format!("/conversation/nobody/{action}/{channel}"),
            json!({"text": "hi"}),
        )
        .await;
        expect_error(refused, 404, "not_found").await;
    }
    let nothing = post(format!("/conversation/crm-1/resume/{channel}"), json!({})).await;
    let nothing = expect_error(nothing, 404, "not_found").await;
    assert_eq!(nothing["message"], "Conversation not found");
    // A handoff without a body at all is one without a reason.
    let bare = app
        .request(
            Method::POST,
            &format!("/conversation/crm-1/handoff/{channel}"),
            Some(&app.owner.api_key),
        )
        .send()
        .await
        .expect("request");
    let bare = expect_status(bare, 200).await;
    assert_eq!(bare["data"]["mode"], "human");
    assert_eq!(bare["data"]["handoff_reason"], Value::Null);

    // Another workspace sees none of it.
    let other_key = app
        .bootstrap_another("Other Inc", "Other", "owner@other.test")
        .await
        .api_key;
    for action in ["handoff", "resume", "reply"] {
        let response = app
            .request(
                Method::POST,
                &format!("/conversation/crm-1/{action}/{channel}"),
                Some(&other_key),
            )
            .json(&json!({"text": "hi"}))
            .send()
            .await
            .expect("request");
        expect_error(response, 404, "not_found").await;
    }

    // A read-only key cannot act.
    let reader = app.key_with(&["read"]).await;
    for action in ["handoff", "resume", "reply"] {
        let response = app
            .request(
                Method::POST,
                &format!("/conversation/crm-1/{action}/{channel}"),
                Some(&reader),
            )
            .json(&json!({"text": "hi"}))
            .send()
            .await
            .expect("request");
        expect_error(response, 403, "forbidden").await;
    }
}

#[tokio::test]
async fn the_sandbox_outbox_lists_everything_the_channel_sent_with_its_author() {
    let app = spawn_app().await;
    let (_, channel) = app.chat_channel("Echo.", json!({})).await;
    let inbound = app
        .send_json(
            Method::POST,
            &format!("/channels/{channel}/sandbox/inbound"),
            &json!({"from": "+351912345678", "name": "Maria", "text": "Hi"}),
        )
        .await;
    assert!(inbound.status().is_success());
    let outbox_path = format!("/channels/{channel}/sandbox/outbox");
    let outbox = async || expect_status(app.get(&outbox_path).await, 200).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while outbox().await["pagination"]["total"] != 1 {
        assert!(tokio::time::Instant::now() < deadline, "no reply");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let handed = app
        .send_json(
            Method::POST,
            &format!("/conversation/+351912345678/handoff/{channel}"),
            &json!({}),
        )
        .await;
    expect_status(handed, 200).await;
    let replied = app
        .send_json(
            Method::POST,
            &format!("/conversation/+351912345678/reply/{channel}"),
            &json!({"text": "This is Rui, from the shop."}),
        )
        .await;
    expect_status(replied, 200).await;

    let listed = outbox().await;
    let sent: Vec<(String, String)> = listed["data"]
        .as_array()
        .expect("outbox")
        .iter()
        .map(|m| {
            (
                m["role"].as_str().unwrap_or_default().to_owned(),
                m["content"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        sent,
        [
            ("assistant".to_owned(), "You said: Hi".to_owned()),
            (
                "operator".to_owned(),
                "This is Rui, from the shop.".to_owned()
            )
        ]
    );
}
