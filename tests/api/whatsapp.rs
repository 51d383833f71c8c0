use std::time::Duration;

use parley_testkit::graph::{messages_payload, status_payload, text_message};
use reqwest::Method;
use serde_json::json;

use crate::helpers::{
    TOKEN, TestApp, expect_error, expect_status, order_update_send, spawn_app, spawn_app_with,
};

const NUMBER: &str = "106540352242922";
const SHEENA: &str = "16505551234";

/// Polls `check` until it holds.
async fn eventually<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    while !check().await {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

async fn reply_status(app: &TestApp, identity: &str) -> Option<(String, serde_json::Value)> {
    // The webhook answers before the identity exists; until then there is nothing to see.
    let response = app
        .get(&format!("/conversations?identity_id={identity}"))
        .await;
    if response.status().as_u16() == 404 {
        return None;
    }
    let listed = expect_status(response, 200).await;
    let id = listed["data"][0]["id"].as_str()?.to_owned();
    let messages =
        expect_status(app.get(&format!("/conversations/{id}/messages")).await, 200).await;
    let reply = messages["data"]
        .as_array()?
        .iter()
        .rev()
        .find(|m| m["role"] == "assistant")?
        .clone();
    Some((reply["status"].as_str()?.to_owned(), reply))
}

#[tokio::test]
async fn a_signed_webhook_is_answered_once_through_the_graph_api() {
    let app = spawn_app().await;
    let channel = app.live_channel(NUMBER).await;
    let payload = text_message(
        NUMBER,
        SHEENA,
        "Sheena Nelson",
        "wamid.HBgL1",
        "Does it come in another color?",
    );

    assert_eq!(app.webhook(Some(&channel), &payload).await, 200);

    let sent = app.wait_for_sends(1).await;
    assert_eq!(sent[0].phone_number_id, NUMBER);
    assert_eq!(sent[0].to(), SHEENA);
    assert_eq!(
        sent[0].text(),
        Some("You said: Does it come in another color?")
    );
    assert_eq!(sent[0].body["context"]["message_id"], "wamid.HBgL1");
    assert_eq!(sent[0].token, TOKEN);
    let identity = expect_status(app.get("/identity/+16505551234").await, 200).await;
    assert_eq!(identity["data"]["name"], "Sheena Nelson");
    assert_eq!(identity["data"]["phone"], "+16505551234");
    let wamid = sent[0].wamid.clone();
    eventually("the reply to be recorded as sent", || async {
        reply_status(&app, "+16505551234")
            .await
            .is_some_and(|(s, r)| s == "sent" && r["platform_message_id"] == wamid.as_str())
    })
    .await;

    // Meta delivers at least once: the same message again is stored once and answered once.
    assert_eq!(app.webhook(Some(&channel), &payload).await, 200);
    let next = text_message(
        NUMBER,
        SHEENA,
        "Sheena Nelson",
        "wamid.HBgL2",
        "And in blue?",
    );
    assert_eq!(app.webhook(Some(&channel), &next).await, 200);
    let sent = app.wait_for_sends(2).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let sent_now = app.graph.sent();
    assert_eq!(
        sent_now.len(),
        2,
        "a re-delivery produced no second reply: {sent:?}"
    );
    assert_eq!(sent_now[1].text(), Some("You said: And in blue?"));
    let stored = app.stored_messages("+16505551234").await;
    let user_messages: Vec<_> = stored.iter().filter(|(role, _)| role == "user").collect();
    assert_eq!(user_messages.len(), 2);
}

#[tokio::test]
async fn messages_delivered_many_times_at_once_are_answered_once_each() {
    let app = spawn_app().await;
    let channel = app.live_channel(NUMBER).await;
    // Meta's retries can cross: each message several times, all in flight at once, so that
    // copies share the writer's batches (and its one INSERT for the events waiting there).
    let payloads: Vec<_> = (0..4)
        .map(|i| {
            let from = format!("1650555{i:04}");
            text_message(NUMBER, &from, "Racer", &format!("wamid.RACE{i}"), "Hello?")
        })
        .collect();
    let posts = payloads
        .iter()
        .cycle()
        .take(payloads.len() * 6)
        .map(|payload| app.webhook(Some(&channel), payload));
    let statuses = futures_util::future::join_all(posts).await;
    assert!(statuses.iter().all(|s| *s == 200), "{statuses:?}");

    app.wait_for_sends(payloads.len()).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut recipients: Vec<_> = app.graph.sent().iter().map(|s| s.to().to_owned()).collect();
    recipients.sort();
    let expected: Vec<_> = (0..4).map(|i| format!("1650555{i:04}")).collect();
    assert_eq!(recipients, expected, "one reply per message");
    for i in 0..4 {
        let stored = app.stored_messages(&format!("+1650555{i:04}")).await;
        let asked = stored.iter().filter(|(role, _)| role == "user").count();
        assert_eq!(asked, 1, "sender {i}: {stored:?}");
    }
}

#[tokio::test]
async fn a_webhook_to_the_shared_url_is_routed_by_phone_number_id() {
    let app = spawn_app().await;
    app.live_channel(NUMBER).await;

    let status = app
        .webhook(
            None,
            &text_message(NUMBER, SHEENA, "Sheena", "wamid.R1", "hi"),
        )
        .await;

    assert_eq!(status, 200);
    let sent = app.wait_for_sends(1).await;
    assert_eq!(sent[0].text(), Some("You said: hi"));
    let unknown = app
        .webhook(
            None,
            &text_message("999", SHEENA, "Sheena", "wamid.R2", "hi"),
        )
        .await;
    assert_eq!(
        unknown, 200,
        "an unknown number is acknowledged so Meta stops retrying"
    );
}

#[tokio::test]
async fn forged_and_unsigned_webhooks_are_refused() {
    let app = spawn_app().await;
    let channel = app.live_channel(NUMBER).await;
    let url = format!("{}/webhooks/waba/{channel}", app.address);
    let body = text_message(NUMBER, SHEENA, "Sheena", "wamid.F1", "hi").to_string();
    let client = reqwest::Client::new();

    let forged = client
        .post(&url)
        .header("content-type", "application/json")
        .header(
            "x-hub-signature-256",
            parley_testkit::graph::sign(b"not-the-secret", body.as_bytes()),
        )
        .body(body.clone())
        .send()
        .await
        .expect("request");
    let body_json = expect_error(forged, 401, "invalid_signature").await;
    assert!(
        body_json["message"]
            .as_str()
            .unwrap_or_default()
            .contains("does not match")
    );
    let unsigned = client
        .post(&url)
        .header("content-type", "application/json")
        .body(body.clone())
        .send()
        .await
        .expect("request");
    expect_error(unsigned, 401, "invalid_signature").await;
    let tampered = client
        .post(&url)
        .header("content-type", "application/json")
        .header(
            "x-hub-signature-256",
            parley_testkit::graph::sign(b"test-app-secret", b"something else"),
        )
        .body(body)
        .send()
        .await
        .expect("request");
    expect_error(tampered, 401, "invalid_signature").await;

    let identities = expect_status(app.get("/identity").await, 200).await;
    assert_eq!(identities["pagination"]["total"], 0, "nothing was stored");
    assert!(app.graph.sent().is_empty());
}

#[tokio::test]
async fn unsigned_webhooks_pass_only_under_the_development_setting() {
    let app = spawn_app_with(|s| {
        s.whatsapp.app_secret = None;
        s.whatsapp.allow_unsigned = true;
    })
    .await;
    let channel = app.live_channel(NUMBER).await;

    let response = reqwest::Client::new()
        .post(format!("{}/webhooks/waba/{channel}", app.address))
        .header("content-type", "application/json")
        .body(text_message(NUMBER, SHEENA, "Sheena", "wamid.U1", "hi").to_string())
        .send()
        .await
        .expect("request");

    assert_eq!(response.status().as_u16(), 200);
    app.wait_for_sends(1).await;
}

#[tokio::test]
async fn meta_verification_echoes_the_challenge_only_for_the_right_token() {
    let app = spawn_app().await;
    let channel = app.live_channel(NUMBER).await;
    let record = expect_status(app.get(&format!("/channels/{channel}")).await, 200).await;
    let token = record["data"]["webhook"]["verifyToken"]
        .as_str()
        .expect("token")
        .to_owned();
    let client = reqwest::Client::new();
    let url = format!("{}/webhooks/waba/{channel}", app.address);

    let ok = client
        .get(format!(
            "{url}?hub.mode=subscribe&hub.verify_token={token}&hub.challenge=1158201444"
        ))
        .send()
        .await
        .expect("request");
    assert_eq!(ok.status().as_u16(), 200);
    assert_eq!(ok.text().await.expect("body"), "1158201444");
    let wrong = client
        .get(format!(
            "{url}?hub.mode=subscribe&hub.verify_token=nope&hub.challenge=1"
        ))
        .send()
        .await
        .expect("request");
    assert_eq!(wrong.status().as_u16(), 403);
}

#[tokio::test]
async fn statuses_move_a_message_forward_only_whatever_their_order() {
    let app = spawn_app().await;
    let channel = app.live_channel(NUMBER).await;
    app.webhook(
        Some(&channel),
        &text_message(NUMBER, SHEENA, "Sheena", "wamid.S1", "hi"),
    )
    .await;
    let wamid = app.wait_for_sends(1).await[0].wamid.clone();
    eventually("the reply to be sent", || async {
        reply_status(&app, "+16505551234")
            .await
            .is_some_and(|(s, _)| s == "sent")
    })
    .await;

    for status in ["read", "delivered", "sent", "read"] {
        assert_eq!(
            app.webhook(
                Some(&channel),
                &status_payload(NUMBER, &wamid, status, None)
            )
            .await,
            200
        );
    }

    let (status, _) = reply_status(&app, "+16505551234").await.expect("reply");
    assert_eq!(status, "read");
}

#[tokio::test]
async fn a_failed_status_keeps_metas_code_and_title() {
    let app = spawn_app().await;
    let channel = app.live_channel(NUMBER).await;
    app.webhook(
        Some(&channel),
        &text_message(NUMBER, SHEENA, "Sheena", "wamid.S2", "hi"),
    )
    .await;
    let wamid = app.wait_for_sends(1).await[0].wamid.clone();
    eventually("the reply to be sent", || async {
        reply_status(&app, "+16505551234")
            .await
            .is_some_and(|(s, _)| s == "sent")
    })
    .await;

    app.webhook(
        Some(&channel),
        &status_payload(NUMBER, &wamid, "failed", Some(131026)),
    )
    .await;

    let (status, reply) = reply_status(&app, "+16505551234").await.expect("reply");
    assert_eq!(status, "failed");
    assert_eq!(reply["error"]["code"], 131026);
    assert_eq!(reply["error"]["title"], "Message undeliverable");
}

#[tokio::test]
async fn interactive_replies_and_captions_are_understood() {
    let app = spawn_app().await;
    let channel = app.live_channel(NUMBER).await;
    let button = json!({"from": SHEENA, "id": "wamid.I1", "type": "interactive",
                        "interactive": {"type": "button_reply", "button_reply": {"id": "yes", "title": "Yes, please"}}});
    app.webhook(
        Some(&channel),
        &messages_payload(NUMBER, SHEENA, "Sheena", button),
    )
    .await;
    let sent = app.wait_for_sends(1).await;
    assert_eq!(sent[0].text(), Some("You said: Yes, please"));

    let image = json!({"from": SHEENA, "id": "wamid.I2", "type": "image", "image": {"id": "m1", "caption": "my receipt"}});
    app.webhook(
        Some(&channel),
        &messages_payload(NUMBER, SHEENA, "Sheena", image),
    )
    .await;
    let sent = app.wait_for_sends(2).await;
    assert_eq!(sent[1].text(), Some("You said: [image] my receipt"));
}

#[tokio::test]
async fn metas_throughput_limit_is_retried_until_everyone_is_answered() {
    let app = spawn_app().await;
    let channel = app.live_channel(NUMBER).await;
    // Meta answers 130429 to the first sends, as when the number's throughput is exceeded.
    app.graph.fail_next_sends([130429, 130429, 130429]);

    for n in 0..5 {
        let from = format!("1650555{:04}", 1200 + n);
        let payload = text_message(
            NUMBER,
            &from,
            "Person",
            &format!("wamid.T{n}"),
            &format!("hello {n}"),
        );
        assert_eq!(app.webhook(Some(&channel), &payload).await, 200);
    }

    let sent = app.wait_for_sends(5).await;
    assert_eq!(sent.len(), 5);
    let mut texts: Vec<_> = sent
        .iter()
        .filter_map(|m| m.text())
        .map(str::to_owned)
        .collect();
    texts.sort();
    assert_eq!(
        texts,
        (0..5)
            .map(|n| format!("You said: hello {n}"))
            .collect::<Vec<_>>()
    );
    let throttled = app
        .graph
        .rejected()
        .iter()
        .filter(|(_, code)| *code == 130429)
        .count();
    assert_eq!(throttled, 3, "every throttled send was retried");
}

#[tokio::test]
async fn an_expired_token_fails_the_reply_and_marks_the_channel() {
    let app = spawn_app().await;
    let channel = app.live_channel(NUMBER).await;
    app.graph.invalidate_token(TOKEN);

    app.webhook(
        Some(&channel),
        &text_message(NUMBER, SHEENA, "Sheena", "wamid.E1", "hi"),
    )
    .await;

    eventually("the reply to fail", || async {
        reply_status(&app, "+16505551234")
            .await
            .is_some_and(|(s, _)| s == "failed")
    })
    .await;
    let (_, reply) = reply_status(&app, "+16505551234").await.expect("reply");
    assert_eq!(reply["error"]["code"], 190);
    eventually("the channel to be marked", || async {
        expect_status(app.get(&format!("/channels/{channel}")).await, 200).await["data"]["credentialsError"].is_string()
    })
    .await;
    let fixed = app
        .send_json(
            Method::PUT,
            &format!("/channels/{channel}"),
            &json!({"accessToken": "EAAB-new"}),
        )
        .await;
    assert_eq!(
        expect_status(fixed, 200).await["data"]["credentialsError"],
        json!(null)
    );
}

#[tokio::test]
async fn a_sandbox_channel_runs_the_pipeline_without_meta() {
    let app = spawn_app().await;
    let (_, channel) = app.chat_channel("Echo.", json!({})).await;

    let injected = app
        .send_json(
            Method::POST,
            &format!("/channels/{channel}/sandbox/inbound"),
            &json!({"from": "+351912345678", "name": "Maria", "text": "Olá"}),
        )
        .await;
    let injected = expect_status(injected, 201).await;
    assert!(injected["data"]["platformMessageId"].is_string());
    assert!(injected["data"]["eventId"].is_string());
    assert!(
        injected["data"].get("platform_message_id").is_none(),
        "no snake_case alias"
    );

    let outbox_path = format!("/channels/{channel}/sandbox/outbox");
    eventually("the reply in the outbox", || async {
        expect_status(app.get(&outbox_path).await, 200).await["pagination"]["total"] == 1
    })
    .await;
    let outbox = expect_status(app.get(&outbox_path).await, 200).await;
    assert_eq!(outbox["data"][0]["content"], "You said: Olá");
    assert_eq!(outbox["data"][0]["status"], "delivered");
    let identity = expect_status(app.get("/identity/+351912345678").await, 200).await;
    assert_eq!(identity["data"]["name"], "Maria");
    assert!(app.graph.sent().is_empty(), "Meta was never called");

    let bad = app
        .send_json(
            Method::POST,
            &format!("/channels/{channel}/sandbox/inbound"),
            &json!({"from": "12", "text": ""}),
        )
        .await;
    let body = expect_error(bad, 400, "validation_failed").await;
    assert_eq!(body["details"][0]["path"], json!(["from"]));
    let live = app.live_channel(NUMBER).await;
    let refused = app
        .send_json(
            Method::POST,
            &format!("/channels/{live}/sandbox/inbound"),
            &json!({"from": "+351912345678", "text": "hi"}),
        )
        .await;
    expect_error(refused, 409, "conflict").await;
}

#[tokio::test]
async fn a_sandbox_channel_sends_only_templates_it_keeps() {
    let app = spawn_app().await;
    let channel = app.sandbox_channel("Main line").await;
    let send = format!("/channels/{channel}/waba/send");
    let body = order_update_send("+351912345678");

    let unknown = app.send_json(Method::POST, &send, &body).await;
    let refused = expect_error(unknown, 400, "validation_failed").await;
    assert_eq!(refused["details"][0]["path"], json!(["templateId"]));
    let outbox_path = format!("/channels/{channel}/sandbox/outbox");
    let outbox = expect_status(app.get(&outbox_path).await, 200).await;
    assert_eq!(outbox["pagination"]["total"], 0, "nothing was sent");

    app.created(
        &format!("/channels/{channel}/waba/templates"),
        json!({"name": "order_update", "type": "UTILITY", "language": "en_US",
               "components": [{"type": "BODY", "text": "Hi {{1}}, your order {{2}} has shipped."}]}),
    )
    .await;
    let sent = app.send_json(Method::POST, &send, &body).await;
    expect_status(sent, 200).await;
    let outbox = expect_status(app.get(&outbox_path).await, 200).await;
    assert_eq!(
        outbox["data"][0]["content"],
        "Hi Ana, your order #42 has shipped."
    );
}

#[tokio::test]
async fn creating_a_live_channel_registers_the_webhook_with_meta() {
    let app =
        spawn_app_with(|s| s.server.public_url = Some("https://parley.example.com".to_owned()))
            .await;

    let channel = app.live_channel(NUMBER).await;

    let record = expect_status(app.get(&format!("/channels/{channel}")).await, 200).await;
    let url = format!("https://parley.example.com/webhooks/waba/{channel}");
    assert_eq!(record["data"]["webhook"]["url"], url.as_str());
    let subscriptions = app.graph.subscriptions();
    assert_eq!(subscriptions.len(), 1);
    assert_eq!(subscriptions[0].0, "waba-1");
    assert_eq!(subscriptions[0].1["override_callback_uri"], url.as_str());
    assert_eq!(
        subscriptions[0].1["verify_token"],
        record["data"]["webhook"]["verifyToken"]
    );
}

#[tokio::test]
async fn metas_pair_limit_delays_only_that_recipient() {
    let app = spawn_app_with(|s| s.whatsapp.pair_period_ms = 300).await;
    let channel = app.live_channel(NUMBER).await;
    app.webhook(
        Some(&channel),
        &text_message(NUMBER, SHEENA, "Sheena", "wamid.P0", "first"),
    )
    .await;
    app.wait_for_sends(1).await;
    // Meta refuses the next message to Sheena: too many to this person too fast.
    app.graph.fail_next_sends([131056]);

    app.webhook(
        Some(&channel),
        &text_message(NUMBER, SHEENA, "Sheena", "wamid.P1", "second"),
    )
    .await;

    let sent = app.wait_for_sends(2).await;
    assert_eq!(sent[1].text(), Some("You said: second"));
    assert_eq!(
        app.graph
            .rejected()
            .iter()
            .filter(|(_, code)| *code == 131056)
            .count(),
        1
    );
}

#[tokio::test]
async fn a_model_outage_delays_the_reply_it_never_drops_it() {
    let app = spawn_app_with(|s| {
        s.actors.inbound_retry_base_ms = 100;
        s.actors.inbound_sweep_ms = 50;
    })
    .await;
    let channel = app.live_channel(NUMBER).await;
    // Both attempts of the first try (one retry in tests) and of the second fail.
    app.model.push([
        parley_testkit::Reply::Status(503),
        parley_testkit::Reply::Status(503),
        parley_testkit::Reply::Status(503),
        parley_testkit::Reply::Status(503),
    ]);

    let status = app
        .webhook(
            Some(&channel),
            &text_message(NUMBER, SHEENA, "Sheena", "wamid.OUT1", "anyone there?"),
        )
        .await;
    assert_eq!(status, 200);

    let sent = app.wait_for_sends(1).await;
    assert_eq!(sent[0].text(), Some("You said: anyone there?"));
    assert!(
        app.model.requests().len() >= 5,
        "tried again after the outage"
    );
    let stored = app.stored_messages(&format!("+{SHEENA}")).await;
    let roles: Vec<&str> = stored.iter().map(|(role, _)| role.as_str()).collect();
    assert_eq!(roles, ["user", "assistant"], "{stored:?}");
}

#[tokio::test]
async fn more_than_a_thousand_waiting_events_are_all_worked_off() {
    use parley_actors::domain::Phone;
    use parley_actors::whatsapp::message::{InboundContent, InboundMessage};
    let app = spawn_app_with(|s| s.actors.inbound_sweep_ms = 100).await;
    // A channel without an assistant: each event is refused quickly, which is all this needs.
    let channel = app.sandbox_channel("Quiet line").await;
    let channel_id = uuid::Uuid::parse_str(&channel).expect("uuid");
    let db = app.db().await;
    for n in 0..1_100 {
        let message = InboundMessage {
            wamid: format!("wamid.BULK{n}"),
            from: Phone::try_from("+16505551234").expect("phone"),
            profile_name: None,
            sent_at: None,
            content: InboundContent::Text {
                body: format!("message {n}"),
            },
        };
        parley_persistence::webhook_events::insert_if_new(
            &db,
            app.owner.workspace_id,
            channel_id,
            &message.wamid,
            serde_json::to_value(&message).expect("payload"),
            parley_persistence::clock::now(),
        )
        .await
        .expect("stored");
    }

    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let due = parley_persistence::webhook_events::due(
            &db,
            parley_persistence::clock::now(),
            10,
            None,
        )
        .await
        .expect("query");
        if due.is_empty() {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "events still waiting"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Answered events are marked done in batches after their replies: every one of a burst ends
/// `processed`, and the sweep (here every 20 ms) never answers one again.
#[tokio::test]
async fn answered_events_are_marked_done_and_never_answered_again() {
    use parley_persistence::EventStatus;
    use parley_persistence::entities::webhook_event;
    use sea_orm::EntityTrait;

    let app = spawn_app_with(|s| s.actors.inbound_sweep_ms = 20).await;
    let channel = app.live_channel(NUMBER).await;
    for n in 0..5 {
        let payload = text_message(
            NUMBER,
            &format!("1650555{n:04}"),
            "P",
            &format!("wamid.MARK{n}"),
            "hi",
        );
        assert_eq!(app.webhook(Some(&channel), &payload).await, 200);
    }
    app.wait_for_sends(5).await;

    let db = app.db().await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    loop {
        let events = webhook_event::Entity::find()
            .all(&db)
            .await
            .expect("events");
        let done = events
            .iter()
            .filter(|e| e.status == EventStatus::Processed && e.processed_at.is_some())
            .count();
        if events.len() == 5 && done == 5 {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{done} of {} events marked done",
            events.len()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Ten sweeps later, still one model call and one reply per message.
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(app.model.requests().len(), 5);
    assert_eq!(app.graph.sent_count(), 5);
}
