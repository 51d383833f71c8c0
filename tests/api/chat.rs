use std::time::Duration;

use parley_testkit::{FakeToolCall, Reply};
use reqwest::Method;
use serde_json::{Value, json};

use crate::helpers::{expect_error, expect_status, spawn_app, spawn_app_with};

const PERSONAL: &str = "You help {{identity.name}}. Stage: {{identity.stage}}. \
                        {{#if memory.profile.name}}Their name is {{memory.profile.name}}.{{/if}}";

#[tokio::test]
async fn the_model_receives_the_rendered_instructions_with_memory_and_stage() {
    let app = spawn_app().await;
    let (_, channel) = app.chat_channel(PERSONAL, json!({})).await;
    app.stage("Lead").await;
    app.put_identity("crm-1", json!({"name": "Ana Maria"}))
        .await;
    app.set_stage("crm-1", "Lead").await;
    let put = app
        .send_json(
            Method::PUT,
            "/memory/from/crm-1",
            &json!({"key": "profile.name", "value": "Ana & Co"}),
        )
        .await;
    expect_status(put, 201).await;

    let response = app.chat("crm-1", &channel, "Hello!").await;

    let body = expect_status(response, 200).await;
    assert_eq!(body["message"], "You said: Hello!");
    assert_eq!(body["data"]["reply"], "You said: Hello!");
    for field in ["conversation_id", "message_id"] {
        assert!(
            body["data"][field]
                .as_str()
                .is_some_and(|v| uuid::Uuid::parse_str(v).is_ok()),
            "{field}"
        );
    }
    assert_eq!(body["data"]["tool_calls"], json!([]));
    assert!(
        body["data"]["usage"]["total_tokens"]
            .as_u64()
            .is_some_and(|t| t > 0)
    );
    assert_eq!(
        app.last_system_prompt(),
        "You help Ana Maria. Stage: Lead. Their name is Ana & Co.",
        "rendered, and without HTML escaping"
    );
    let request = app.model.last_request().expect("request");
    assert_eq!(request["model"], "fake-model");
    assert_eq!(
        request["messages"]
            .as_array()
            .expect("messages")
            .last()
            .expect("last")["content"],
        "Hello!"
    );
    let stored = app.stored_messages("crm-1").await;
    assert_eq!(
        stored,
        [
            ("user".to_owned(), "Hello!".to_owned()),
            ("assistant".to_owned(), "You said: Hello!".to_owned())
        ]
    );
}

#[tokio::test]
async fn memory_written_by_a_tool_in_one_channel_is_used_on_another() {
    let app = spawn_app().await;
    let (_, first) = app.chat_channel(PERSONAL, json!({})).await;
    let second = app.sandbox_channel("Second line").await;
    let worker =
        expect_status(app.get(&format!("/channels/{first}")).await, 200).await["data"]["workerId"]
            .as_str()
            .expect("worker")
            .to_owned();
    expect_status(
        app.send_json(
            Method::POST,
            &format!("/channels/{second}/worker/{worker}"),
            &json!({}),
        )
        .await,
        200,
    )
    .await;
    app.put_identity("+351912345678", json!({"phone": "+351912345678"}))
        .await;
    app.model.push([
        Reply::ToolCalls(vec![FakeToolCall::new(
            "remember",
            json!({"key": "profile.name", "value": "Ana", "confidence": 0.9}),
        )]),
        Reply::Text("Nice to meet you, Ana.".to_owned()),
    ]);

    let first_reply = expect_status(app.chat("+351912345678", &first, "I'm Ana").await, 200).await;

    assert_eq!(first_reply["data"]["reply"], "Nice to meet you, Ana.");
    assert_eq!(first_reply["data"]["tool_calls"][0]["name"], "remember");
    assert_eq!(first_reply["data"]["tool_calls"][0]["result"]["ok"], true);
    let memory = expect_status(app.get("/memory/from/+351912345678").await, 200).await;
    assert_eq!(memory["data"][0]["key"], "profile.name");
    assert_eq!(memory["data"][0]["value"], "Ana");
    assert_eq!(memory["data"][0]["metadata"]["source"], "conversation");
    assert_eq!(memory["data"][0]["metadata"]["confidence"], 0.9);
    let requests = app.model.requests();
    let tool_round = &requests[1]["messages"];
    let roles: Vec<_> = tool_round
        .as_array()
        .expect("messages")
        .iter()
        .map(|m| m["role"].clone())
        .collect();
    assert_eq!(
        roles,
        [
            json!("system"),
            json!("user"),
            json!("assistant"),
            json!("tool")
        ]
    );

    expect_status(app.chat("+351912345678", &second, "Hi again").await, 200).await;

    assert!(
        app.last_system_prompt().contains("Their name is Ana."),
        "{}",
        app.last_system_prompt()
    );
}

#[tokio::test]
async fn the_set_stage_and_forget_tools_change_the_identity() {
    let app = spawn_app().await;
    let (_, channel) = app.chat_channel(PERSONAL, json!({})).await;
    app.stage("Customer").await;
    app.put_identity("crm-1", json!({"name": "Ana"})).await;
    expect_status(
        app.send_json(
            Method::PUT,
            "/memory/from/crm-1",
            &json!({"key": "custom.coupon", "value": "X1"}),
        )
        .await,
        201,
    )
    .await;
    app.model.push([
        Reply::ToolCalls(vec![
            FakeToolCall::new("set_stage", json!({"stage": "customer"})),
            FakeToolCall::new("forget", json!({"key": "custom.coupon"})),
            FakeToolCall::new("remember", json!({"key": "Not A Key", "value": 1})),
        ]),
        Reply::Text("Done.".to_owned()),
    ]);

    let body = expect_status(app.chat("crm-1", &channel, "I bought it").await, 200).await;

    let results: Vec<_> = body["data"]["tool_calls"]
        .as_array()
        .expect("calls")
        .iter()
        .map(|c| c["result"]["ok"].clone())
        .collect();
    assert_eq!(
        results,
        [json!(true), json!(true), json!(false)],
        "a bad key is refused to the model, not to the caller"
    );
    let identity = expect_status(app.get("/identity/crm-1").await, 200).await;
    assert_eq!(identity["data"]["stage"], "Customer");
    let history = expect_status(app.get("/identity/crm-1/stages").await, 200).await;
    assert_eq!(history["data"][0]["metadata"]["source"], "conversation");
    let memory = expect_status(app.get("/memory/from/crm-1").await, 200).await;
    assert_eq!(memory["data"], json!([]));
}

#[tokio::test]
async fn history_carries_previous_turns_of_the_conversation() {
    let app = spawn_app().await;
    let (_, channel) = app
        .chat_channel("Be brief.", json!({"settings": {"history_turns": 1}}))
        .await;
    app.put_identity("crm-1", json!({"name": "Ana"})).await;

    for text in ["one", "two", "three"] {
        expect_status(app.chat("crm-1", &channel, text).await, 200).await;
    }

    let request = app.model.last_request().expect("request");
    let contents: Vec<_> = request["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .map(|m| m["content"].clone())
        .collect();
    assert_eq!(
        contents,
        [
            json!("Be brief."),
            json!("two"),
            json!("You said: two"),
            json!("three")
        ]
    );
}

#[tokio::test]
async fn concurrent_chats_of_one_identity_are_answered_in_order() {
    let app = spawn_app().await;
    let (_, channel) = app.chat_channel("Echo.", json!({})).await;
    app.put_identity("crm-1", json!({"name": "Ana"})).await;
    app.model
        .set_latency(Duration::from_millis(20), Duration::ZERO);

    let calls = (0..6).map(|n| {
        let app = &app;
        let channel = channel.clone();
        async move {
            (
                n,
                app.chat("crm-1", &channel, &format!("message {n}")).await,
            )
        }
    });
    let answers = futures_util::future::join_all(calls).await;

    for (n, response) in answers {
        let body = expect_status(response, 200).await;
        assert_eq!(body["data"]["reply"], format!("You said: message {n}"));
    }
    let stored = app.stored_messages("crm-1").await;
    assert_eq!(stored.len(), 12);
    for pair in stored.chunks(2) {
        assert_eq!(pair[0].0, "user");
        assert_eq!(
            pair[1],
            ("assistant".to_owned(), format!("You said: {}", pair[0].1)),
            "each reply follows its own message"
        );
    }
}

#[tokio::test]
async fn a_failing_model_is_a_502_and_the_message_is_kept() {
    let app = spawn_app().await;
    let (_, channel) = app.chat_channel("Echo.", json!({})).await;
    app.put_identity("crm-1", json!({"name": "Ana"})).await;
    app.model.push([Reply::Status(500), Reply::Status(500)]);

    let response = app.chat("crm-1", &channel, "are you there?").await;

    expect_error(response, 502, "upstream_failed").await;
    assert_eq!(app.model.requests().len(), 2, "retried once as configured");
    assert_eq!(
        app.stored_messages("crm-1").await,
        [("user".to_owned(), "are you there?".to_owned())]
    );
}

#[tokio::test]
async fn a_transient_model_failure_is_retried_invisibly() {
    let app = spawn_app().await;
    let (_, channel) = app.chat_channel("Echo.", json!({})).await;
    app.put_identity("crm-1", json!({"name": "Ana"})).await;
    app.model.push([Reply::Status(429)]);

    let body = expect_status(app.chat("crm-1", &channel, "hi").await, 200).await;

    assert_eq!(body["data"]["reply"], "You said: hi");
}

#[tokio::test]
async fn a_hanging_model_is_a_504() {
    let app = spawn_app_with(|s| {
        s.llm.timeout_secs = 1;
        s.llm.max_retries = 0;
    })
    .await;
    let (_, channel) = app.chat_channel("Echo.", json!({})).await;
    app.put_identity("crm-1", json!({"name": "Ana"})).await;
    app.model.push([Reply::Hang]);

    let response = app.chat("crm-1", &channel, "hello?").await;

    expect_error(response, 504, "upstream_timeout").await;
    assert_eq!(
        app.stored_messages("crm-1").await.len(),
        1,
        "the message is kept"
    );
}

#[tokio::test]
async fn a_malformed_model_answer_is_a_502() {
    let app = spawn_app().await;
    let (_, channel) = app.chat_channel("Echo.", json!({})).await;
    app.put_identity("crm-1", json!({"name": "Ana"})).await;
    app.model.push([Reply::Malformed]);

    expect_error(
        app.chat("crm-1", &channel, "hello?").await,
        502,
        "upstream_failed",
    )
    .await;
}

#[tokio::test]
async fn the_fallback_message_answers_when_the_model_fails() {
    let app = spawn_app().await;
    let (_, channel) = app
        .chat_channel(
            "Echo.",
            json!({"settings": {"fallback_message": "We'll get back to you shortly."}}),
        )
        .await;
    app.put_identity("crm-1", json!({"name": "Ana"})).await;
    app.model.push([Reply::Status(503), Reply::Status(503)]);

    let body = expect_status(app.chat("crm-1", &channel, "help").await, 200).await;

    assert_eq!(body["data"]["reply"], "We'll get back to you shortly.");
    assert_eq!(body["data"]["fallback"], true);
    let stored = app.stored_messages("crm-1").await;
    assert_eq!(
        stored[1],
        (
            "assistant".to_owned(),
            "We'll get back to you shortly.".to_owned()
        )
    );
}

#[tokio::test]
async fn bad_chat_requests_are_refused() {
    let app = spawn_app().await;
    let (_, channel) = app.chat_channel("Echo.", json!({})).await;
    app.put_identity("crm-1", json!({"name": "Ana"})).await;
    let path = format!("/conversation/crm-1/chat/{channel}");

    for (body, field) in [
        (json!({"message": "   "}), "message"),
        (json!({"message": "x".repeat(4097)}), "message"),
        (json!({}), "message"),
        (json!({"message": 5}), "message"),
        (json!({"message": "hi", "metadata": "x"}), "metadata"),
    ] {
        let response = app.send_json(Method::POST, &path, &body).await;
        let error = expect_error(response, 400, "validation_failed").await;
        assert_eq!(error["details"][0]["path"], json!([field]), "{body}");
    }
    expect_error(app.chat("ghost", &channel, "hi").await, 404, "not_found").await;
    expect_error(
        app.chat("crm-1", "01a200f8-0000-7000-8000-000000000000", "hi")
            .await,
        404,
        "not_found",
    )
    .await;
    let unsynced = app.sandbox_channel("Unsynced").await;
    expect_error(app.chat("crm-1", &unsynced, "hi").await, 409, "conflict").await;
    let empty_worker = app.worker("Empty").await;
    expect_status(
        app.send_json(
            Method::POST,
            &format!("/channels/{unsynced}/worker/{empty_worker}"),
            &json!({}),
        )
        .await,
        200,
    )
    .await;
    expect_error(app.chat("crm-1", &unsynced, "hi").await, 409, "conflict").await;
    let read_only = app.key_with(&["read"]).await;
    let response = app
        .send_json_with(Method::POST, &path, &read_only, &json!({"message": "hi"}))
        .await;
    expect_error(response, 403, "forbidden").await;
    assert!(
        app.model.requests().is_empty(),
        "no refused call reached the model"
    );
}

#[tokio::test]
async fn an_unconfigured_model_is_a_503() {
    let app = spawn_app_with(|s| s.llm.base_url = None).await;
    let (_, channel) = app.chat_channel("Echo.", json!({})).await;
    app.put_identity("crm-1", json!({"name": "Ana"})).await;

    expect_error(
        app.chat("crm-1", &channel, "hi").await,
        503,
        "llm_not_configured",
    )
    .await;
}

#[tokio::test]
async fn the_assistant_speaking_the_identitys_language_answers() {
    let app = spawn_app().await;
    let (_, channel) = app
        .chat_channel("English assistant.", json!({"languages": ["en"]}))
        .await;
    let worker = expect_status(app.get(&format!("/channels/{channel}")).await, 200).await["data"]["workerId"].as_str().expect("worker").to_owned();
    app.created(
        &format!("/workers/{worker}/assistants"),
        json!({"name": "Bia", "instructions": "Assistente em português.", "languages": ["pt-BR"]}),
    )
    .await;
    app.put_identity("crm-1", json!({"name": "Ana"})).await;
    app.put_identity(
        "crm-2",
        json!({"name": "Bo", "metadata": {"language": "en-GB"}}),
    )
    .await;
    expect_status(
        app.send_json(
            Method::PUT,
            "/memory/from/crm-1",
            &json!({"key": "preferences.language", "value": "pt-BR"}),
        )
        .await,
        201,
    )
    .await;

    expect_status(app.chat("crm-1", &channel, "olá").await, 200).await;
    assert!(
        app.last_system_prompt()
            .starts_with("Assistente em português."),
        "{}",
        app.last_system_prompt()
    );
    expect_status(app.chat("crm-2", &channel, "hello").await, 200).await;
    assert_eq!(app.last_system_prompt(), "English assistant.");
}

#[tokio::test]
async fn a_new_conversation_starts_after_the_idle_time() {
    let app = spawn_app_with(|s| s.actors.conversation_idle_hours = 0).await;
    let (_, channel) = app.chat_channel("Echo.", json!({})).await;
    app.put_identity("crm-1", json!({"name": "Ana"})).await;

    expect_status(app.chat("crm-1", &channel, "one").await, 200).await;
    expect_status(app.chat("crm-1", &channel, "two").await, 200).await;

    let listed = expect_status(app.get("/conversations?identity_id=crm-1").await, 200).await;
    assert_eq!(listed["pagination"]["total"], 2);
    let statuses: Vec<_> = listed["data"]
        .as_array()
        .expect("array")
        .iter()
        .map(|c| c["status"].clone())
        .collect();
    // With an idle time of zero hours both have been idle long enough to read closed.
    assert_eq!(statuses, [json!("closed"), json!("closed")]);
    let request = app.model.last_request().expect("request");
    assert_eq!(
        request["messages"].as_array().expect("messages").len(),
        2,
        "no history from the closed conversation"
    );
}

#[tokio::test]
async fn a_burst_within_the_debounce_window_is_one_turn() {
    let app = spawn_app().await;
    let (_, channel) = app
        .chat_channel("Echo.", json!({"settings": {"debounce_ms": 1000}}))
        .await;
    app.put_identity("crm-1", json!({"name": "Ana"})).await;

    let (first, second) = tokio::join!(app.chat("crm-1", &channel, "hello"), async {
        tokio::time::sleep(Duration::from_millis(50)).await;
        app.chat("crm-1", &channel, "are you there?").await
    });

    let first = expect_status(first, 200).await;
    let second = expect_status(second, 200).await;
    assert_eq!(first["data"]["reply"], "You said: hello\nare you there?");
    assert_eq!(first["data"]["message_id"], second["data"]["message_id"]);
    assert_eq!(app.model.requests().len(), 1);
    let stored = app.stored_messages("crm-1").await;
    let roles: Vec<_> = stored.iter().map(|(role, _)| role.as_str()).collect();
    assert_eq!(roles, ["user", "user", "assistant"]);
}

#[tokio::test]
async fn an_api_change_to_memory_reaches_the_live_conversation() {
    let app = spawn_app().await;
    let (_, channel) = app.chat_channel(PERSONAL, json!({})).await;
    app.put_identity("crm-1", json!({"name": "Ana"})).await;
    expect_status(
        app.send_json(
            Method::PUT,
            "/memory/from/crm-1",
            &json!({"key": "profile.name", "value": "Ana"}),
        )
        .await,
        201,
    )
    .await;
    expect_status(app.chat("crm-1", &channel, "one").await, 200).await;
    assert!(app.last_system_prompt().contains("Their name is Ana."));

    expect_status(
        app.send_json(
            Method::PUT,
            "/memory/from/crm-1",
            &json!({"key": "profile.name", "value": "Bo"}),
        )
        .await,
        200,
    )
    .await;
    expect_status(
        app.send_json(Method::PUT, "/identity/crm-1", &json!({"name": "Bo Lee"}))
            .await,
        200,
    )
    .await;
    expect_status(app.chat("crm-1", &channel, "two").await, 200).await;

    assert_eq!(
        app.last_system_prompt(),
        "You help Bo Lee. Stage: . Their name is Bo."
    );
}

#[tokio::test]
async fn with_memory_disabled_no_tools_are_offered() {
    let app = spawn_app().await;
    let (_, channel) = app
        .chat_channel("Echo.", json!({"settings": {"memory_enabled": false}}))
        .await;
    app.put_identity("crm-1", json!({"name": "Ana"})).await;

    expect_status(app.chat("crm-1", &channel, "hi").await, 200).await;

    let request = app.model.last_request().expect("request");
    assert!(request.get("tools").is_none(), "{request}");
    let (_, other) = app.chat_channel("Echo.", json!({})).await;
    expect_status(app.chat("crm-1", &other, "hi").await, 200).await;
    let names: Vec<_> = app.model.last_request().expect("request")["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .map(|t| t["function"]["name"].clone())
        .collect();
    assert_eq!(
        names,
        [json!("remember"), json!("forget"), json!("set_stage")]
    );
}

#[tokio::test]
async fn an_idle_identity_rests_then_is_forgotten_and_comes_back() {
    let app = spawn_app_with(|s| s.actors.conversation_actor_idle_secs = 1).await;
    let (_, channel) = app.chat_channel("Echo.", json!({})).await;
    app.put_identity("crm-1", json!({"name": "Ana"})).await;
    expect_status(app.chat("crm-1", &channel, "one").await, 200).await;
    assert_eq!(app.live_actors("root/conversations").await, 1);

    // The rest time is capped by the idle time: the actor rests after a second, and what it
    // cached is forgotten a second after the turn.
    app.wait_for_live_actors("root/conversations", 0).await;
    app.wait_for_resting_identities(0).await;

    let body = expect_status(app.chat("crm-1", &channel, "two").await, 200).await;
    assert_eq!(body["data"]["reply"], "You said: two");
    assert_eq!(app.live_actors("root/conversations").await, 1);
}

/// Reads a Server-Sent Events response to its end, answering the JSON of each `data:` line;
/// asserts that each event names its kind (`event: token`, as a browser's
/// `EventSource.addEventListener('token', …)` hears it) as its data's `type` does.
async fn sse_events(response: reqwest::Response) -> Vec<Value> {
    let text = response.text().await.expect("stream");
    text.split("\n\n")
        .filter_map(|block| {
            let data = block.lines().find_map(|l| l.strip_prefix("data:"))?;
            let data: Value = serde_json::from_str(data.trim()).expect("JSON event");
            let kind = block.lines().find_map(|l| l.strip_prefix("event:"));
            assert_eq!(kind.map(str::trim), data["type"].as_str(), "{block}");
            Some(data)
        })
        .collect()
}

#[tokio::test]
async fn a_streamed_reply_arrives_token_by_token_and_complete_carries_it_whole() {
    let app = spawn_app().await;
    let (_, channel) = app.chat_channel("Echo.", json!({})).await;
    app.put_identity("crm-1", json!({"name": "Ana"})).await;
    app.model.push([Reply::Text("Hello there Ana".to_owned())]);
    app.model
        .set_latency(Duration::from_millis(10), Duration::from_millis(10));

    let response = app
        .request(
            Method::GET,
            &format!("/conversation/crm-1/streaming?channel_id={channel}&message=hi%20there"),
            Some(&app.owner.api_key),
        )
        .send()
        .await
        .expect("request");

    assert_eq!(response.status().as_u16(), 200);
    assert!(
        response.headers()["content-type"]
            .to_str()
            .unwrap_or_default()
            .starts_with("text/event-stream")
    );
    let events = sse_events(response).await;
    let tokens: Vec<_> = events
        .iter()
        .filter(|e| e["type"] == "token")
        .map(|e| e["content"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(tokens, ["Hello ", "there ", "Ana"]);
    let complete = events.last().expect("events");
    assert_eq!(complete["type"], "complete");
    assert_eq!(complete["content"], "Hello there Ana");
    assert!(complete["conversation_id"].is_string() && complete["message_id"].is_string());
    assert_eq!(app.model.last_request().expect("request")["stream"], true);
    assert_eq!(
        app.stored_messages("crm-1").await[1],
        ("assistant".to_owned(), "Hello there Ana".to_owned())
    );
}

#[tokio::test]
async fn a_model_failure_during_streaming_is_an_error_event() {
    let app = spawn_app().await;
    let (_, channel) = app.chat_channel("Echo.", json!({})).await;
    app.put_identity("crm-1", json!({"name": "Ana"})).await;
    app.model.push([Reply::Status(500), Reply::Status(500)]);

    let response = app
        .request(
            Method::GET,
            &format!("/conversation/crm-1/streaming?channel_id={channel}&message=hi"),
            Some(&app.owner.api_key),
        )
        .send()
        .await
        .expect("request");

    let events = sse_events(response).await;
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0]["type"], "error");
    assert_eq!(events[0]["code"], "upstream_failed");
    assert!(events[0]["content"].as_str().is_some_and(|c| !c.is_empty()));
}

#[tokio::test]
async fn bad_streaming_requests_are_refused_before_the_stream_starts() {
    let app = spawn_app().await;
    let (_, channel) = app.chat_channel("Echo.", json!({})).await;
    app.put_identity("crm-1", json!({"name": "Ana"})).await;

    let missing_channel = app.get("/conversation/crm-1/streaming?message=hi").await;
    let body = expect_error(missing_channel, 400, "validation_failed").await;
    assert_eq!(body["details"][0]["path"], json!(["channel_id"]));
    let missing_message = app
        .get(&format!(
            "/conversation/crm-1/streaming?channel_id={channel}"
        ))
        .await;
    let body = expect_error(missing_message, 400, "validation_failed").await;
    assert_eq!(body["details"][0]["path"], json!(["message"]));
    expect_error(
        app.get(&format!(
            "/conversation/ghost/streaming?channel_id={channel}&message=hi"
        ))
        .await,
        404,
        "not_found",
    )
    .await;
}

#[tokio::test]
async fn a_client_that_disconnects_does_not_lose_the_turn() {
    let app = spawn_app().await;
    let (_, channel) = app.chat_channel("Echo.", json!({})).await;
    app.put_identity("crm-1", json!({"name": "Ana"})).await;
    app.model
        .push([Reply::Text("one two three four five six".to_owned())]);
    app.model
        .set_latency(Duration::from_millis(10), Duration::from_millis(100));

    let mut response = app
        .request(
            Method::GET,
            &format!("/conversation/crm-1/streaming?channel_id={channel}&message=hi"),
            Some(&app.owner.api_key),
        )
        .send()
        .await
        .expect("request");
    let first = response.chunk().await.expect("chunk").expect("some bytes");
    assert!(!first.is_empty());
    drop(response);

    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let stored = app.stored_messages("crm-1").await;
        if stored.len() == 2 {
            assert_eq!(
                stored[1],
                (
                    "assistant".to_owned(),
                    "one two three four five six".to_owned()
                )
            );
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the reply was never stored: {stored:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn the_chat_calls_metadata_is_kept_on_the_message() {
    let app = spawn_app().await;
    let (_, channel) = app.chat_channel("Echo.", json!({})).await;
    app.put_identity("crm-1", json!({"name": "Ana"})).await;

    let response = app
        .send_json(
            Method::POST,
            &format!("/conversation/crm-1/chat/{channel}"),
            &json!({"message": "hello", "metadata": {"source": "web", "page": 3}}),
        )
        .await;
    let conversation = expect_status(response, 200).await["data"]["conversation_id"]
        .as_str()
        .expect("id")
        .to_owned();

    let messages = expect_status(
        app.get(&format!("/conversations/{conversation}/messages"))
            .await,
        200,
    )
    .await;
    assert_eq!(
        messages["data"][0]["metadata"],
        json!({"source": "web", "page": 3})
    );
    assert_eq!(messages["data"][1]["metadata"], json!(null));
}

#[tokio::test]
async fn an_error_event_carries_a_public_message_not_the_upstreams_words() {
    let app = spawn_app().await;
    let (_, channel) = app.chat_channel("Echo.", json!({})).await;
    app.put_identity("crm-1", json!({"name": "Ana"})).await;
    app.model.push([Reply::Status(500), Reply::Status(500)]);

    let response = app
        .request(
            Method::GET,
            &format!("/conversation/crm-1/streaming?channel_id={channel}&message=hi"),
            Some(&app.owner.api_key),
        )
        .send()
        .await
        .expect("request");

    let events = sse_events(response).await;
    let content = events[0]["content"].as_str().expect("content");
    assert!(!content.contains("injected"), "{content}");
    assert!(!content.contains("127.0.0.1"), "{content}");
    assert_eq!(events[0]["code"], "upstream_failed");
}

#[tokio::test]
async fn a_path_that_comes_to_name_another_identity_reaches_it_at_once() {
    let app = spawn_app().await;
    let (_, channel) = app.chat_channel("Echo.", json!({})).await;
    let first = app.put_identity("crm-1", json!({"name": "Ana"})).await;
    expect_status(app.chat("crm-1", &channel, "hello").await, 200).await;

    let first_id = first["id"].as_str().expect("id");
    expect_status(app.delete(&format!("/identity/{first_id}")).await, 200).await;
    expect_error(
        app.chat("crm-1", &channel, "anyone?").await,
        404,
        "not_found",
    )
    .await;
    let second = app.put_identity("crm-1", json!({"name": "Bia"})).await;
    assert_ne!(second["id"], first["id"]);

    let answered = expect_status(app.chat("crm-1", &channel, "hello again").await, 200).await;
    let listed = expect_status(app.get("/conversations?identity_id=crm-1").await, 200).await;
    let ids: Vec<_> = listed["data"]
        .as_array()
        .expect("conversations")
        .iter()
        .map(|c| c["id"].clone())
        .collect();
    assert_eq!(ids, [answered["data"]["conversation_id"].clone()]);
}

#[tokio::test]
async fn plain_instructions_still_tell_the_model_the_persons_memory_and_stage() {
    let app = spawn_app().await;
    let (_, channel) = app
        .chat_channel("You are a helpful shop assistant.", json!({}))
        .await;
    app.stage("Lead").await;
    app.put_identity("crm-1", json!({"name": "Ana"})).await;
    app.set_stage("crm-1", "Lead").await;
    expect_status(
        app.send_json(
            Method::PUT,
            "/memory/from/crm-1",
            &json!({"key": "profile.name", "value": "Maria"}),
        )
        .await,
        201,
    )
    .await;

    expect_status(app.chat("crm-1", &channel, "what is my name?").await, 200).await;

    assert_eq!(
        app.last_system_prompt(),
        "You are a helpful shop assistant.\n\nWhat you remember about this person:\n\
         - profile.name: Maria\nTheir journey stage: Lead"
    );
    // Instructions that place them keep full control: nothing is added.
    let (_, placed) = app
        .chat_channel("Call them {{memory.profile.name}}.", json!({}))
        .await;
    expect_status(app.chat("crm-1", &placed, "hi").await, 200).await;
    assert_eq!(app.last_system_prompt(), "Call them Maria.");
}
