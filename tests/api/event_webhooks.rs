//! Event webhooks: endpoints managed by admins, events written with their facts, delivered to a
//! real receiver in this process and checked with another HMAC implementation than Parley's.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use parley_testkit::graph::{status_payload, text_message};
use reqwest::Method;
use serde_json::{Value, json};

use crate::helpers::{TestApp, expect_error, expect_status, spawn_app, spawn_app_with};

const NUMBER: &str = "106540352242922";
const SHEENA: &str = "16505551234";

/// One request the receiver took.
#[derive(Clone, Debug)]
pub struct Received {
    pub id: String,
    pub timestamp: String,
    pub signature: String,
    pub body: String,
}

impl Received {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).expect("a JSON body")
    }
}

/// What the receiver answers next.
#[derive(Clone, Copy, Debug)]
pub enum Answer {
    Status(u16),
    RetryAfter(u16, u64),
    /// Holds the request this long, then answers 200.
    Slow(Duration),
}

#[derive(Default)]
struct ReceiverState {
    received: Mutex<Vec<Received>>,
    script: Mutex<VecDeque<Answer>>,
    /// Answer when the script is empty (200 when `None`).
    otherwise: Mutex<Option<Answer>>,
    in_flight: Mutex<(usize, usize)>,
}

/// A webhook receiver on a port of its own.
#[derive(Clone)]
pub struct Receiver {
    pub url: String,
    state: Arc<ReceiverState>,
}

impl Receiver {
    pub async fn start() -> Self {
        let state = Arc::new(ReceiverState::default());
        let app = axum::Router::new()
            .route("/hook", axum::routing::post(receive))
            .with_state(state.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let url = format!("http://{}/hook", listener.local_addr().expect("addr"));
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Self { url, state }
    }

    pub fn script(&self, answers: impl IntoIterator<Item = Answer>) {
        self.state.script.lock().expect("lock").extend(answers);
    }

    pub fn otherwise(&self, answer: Option<Answer>) {
        *self.state.otherwise.lock().expect("lock") = answer;
    }

    pub fn received(&self) -> Vec<Received> {
        self.state.received.lock().expect("lock").clone()
    }

    /// Most requests it held at once.
    pub fn most_in_flight(&self) -> usize {
        self.state.in_flight.lock().expect("lock").1
    }

    /// Waits until requests of `count` distinct events arrived; answers them all.
    pub async fn wait_for(&self, count: usize) -> Vec<Received> {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        loop {
            let received = self.received();
            let mut ids: Vec<&str> = received.iter().map(|r| r.id.as_str()).collect();
            ids.sort_unstable();
            ids.dedup();
            if ids.len() >= count {
                return received;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "only {} of {count} events arrived: {received:#?}",
                ids.len()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// The first request of each event of `kind`.
    pub fn of(&self, kind: &str) -> Vec<Received> {
        let mut seen = Vec::new();
        let mut found = Vec::new();
        for r in self.received() {
            if r.json()["type"] == kind && !seen.contains(&r.id) {
                seen.push(r.id.clone());
                found.push(r);
            }
        }
        found
    }
}

async fn receive(
    State(state): State<Arc<ReceiverState>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned()
    };
    state.received.lock().expect("lock").push(Received {
        id: header("webhook-id"),
        timestamp: header("webhook-timestamp"),
        signature: header("webhook-signature"),
        body: String::from_utf8_lossy(&body).into_owned(),
    });
    let next = state.script.lock().expect("lock").pop_front();
    let answer = next.or(*state.otherwise.lock().expect("lock"));
    match answer {
        None => StatusCode::OK.into_response(),
        Some(Answer::Status(code)) => StatusCode::from_u16(code).expect("status").into_response(),
        Some(Answer::RetryAfter(code, seconds)) => (
            StatusCode::from_u16(code).expect("status"),
            [("retry-after", seconds.to_string())],
        )
            .into_response(),
        Some(Answer::Slow(wait)) => {
            {
                let mut flight = state.in_flight.lock().expect("lock");
                flight.0 += 1;
                flight.1 = flight.1.max(flight.0);
            }
            tokio::time::sleep(wait).await;
            state.in_flight.lock().expect("lock").0 -= 1;
            StatusCode::OK.into_response()
        }
    }
}

/// Whether `received` carries a Standard Webhooks signature of `secret`, checked with ring's
/// HMAC (Parley signs with the `hmac` crate).
pub fn signed_by(received: &Received, secret: &str) -> bool {
    let key = STANDARD
        .decode(secret.strip_prefix("whsec_").expect("whsec_ prefix"))
        .expect("base64 secret");
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, &key);
    let signed = format!("{}.{}.{}", received.id, received.timestamp, received.body);
    let expected = STANDARD.encode(ring::hmac::sign(&key, signed.as_bytes()).as_ref());
    received
        .signature
        .split(' ')
        .any(|part| part.strip_prefix("v1,") == Some(expected.as_str()))
}

/// Creates an endpoint for `events` at `url`; answers its id and secret.
pub async fn endpoint(app: &TestApp, url: &str, events: Value) -> (String, String) {
    let created = app
        .created("/workspace/webhooks", json!({"url": url, "events": events}))
        .await;
    (
        created["id"].as_str().expect("id").to_owned(),
        created["secret"].as_str().expect("secret").to_owned(),
    )
}

#[tokio::test]
async fn endpoints_are_managed_by_admins_and_the_secret_is_shown_once() {
    let app = spawn_app().await;
    let created = app
        .send_json(
            Method::POST,
            "/workspace/webhooks",
            &json!({"url": "https://hooks.example.com/parley", "events": ["message.received", "message.received", "flow.finished"], "description": "CRM"}),
        )
        .await;
    let created = expect_status(created, 201).await;
    let secret = created["data"]["secret"]
        .as_str()
        .expect("secret")
        .to_owned();
    assert!(
        secret.starts_with("whsec_") && secret.len() == 50,
        "{secret}"
    );
    assert_eq!(
        created["data"]["events"],
        json!(["message.received", "flow.finished"])
    );
    assert_eq!(created["data"]["enabled"], true);
    let id = created["data"]["id"].as_str().expect("id").to_owned();

    let read = expect_status(app.get(&format!("/workspace/webhooks/{id}")).await, 200).await;
    let masked = read["data"]["secret"].as_str().expect("masked");
    assert_ne!(masked, secret);
    assert!(masked.starts_with("whsec_") && masked.ends_with(&secret[secret.len() - 4..]));
    assert!(
        !read.to_string().contains(&secret[6..30]),
        "never the secret again"
    );
    let listed = expect_status(app.get("/workspace/webhooks").await, 200).await;
    assert_eq!(listed["pagination"]["total"], 1);
    assert!(!listed.to_string().contains(&secret[6..30]));

    let path = format!("/workspace/webhooks/{id}");
    let patched = app
        .send_json(
            Method::PATCH,
            &path,
            &json!({"events": ["*", "message.sent"], "description": null, "enabled": false}),
        )
        .await;
    let patched = expect_status(patched, 200).await;
    assert_eq!(patched["data"]["events"], json!(["*"]));
    assert_eq!(patched["data"]["description"], Value::Null);
    assert_eq!(patched["data"]["enabled"], false);

    let rotated = app
        .send_json(Method::POST, &format!("{path}/rotate-secret"), &json!({}))
        .await;
    let rotated = expect_status(rotated, 200).await;
    let new_secret = rotated["data"]["secret"].as_str().expect("secret");
    assert!(new_secret.starts_with("whsec_") && new_secret != secret);
    assert!(rotated["data"]["previous_secret_until"].is_string());
    // A second rotation within the day would drop the secret receivers may still hold: it is
    // refused with a sentence, and the secrets stand as they were.
    let again = app
        .send_json(Method::POST, &format!("{path}/rotate-secret"), &json!({}))
        .await;
    let refused = expect_error(again, 409, "rotation_too_soon").await;
    assert!(
        refused["message"]
            .as_str()
            .is_some_and(|m| m.contains("24 hours")),
        "{refused}"
    );

    // Refusals, each naming its field.
    for (body, field) in [
        (json!({"events": ["*"]}), "url"),
        (
            json!({"url": "ftp://x.example.com", "events": ["*"]}),
            "url",
        ),
        (
            json!({"url": "http://10.0.0.7/hook", "events": ["*"]}),
            "url",
        ),
        (
            json!({"url": "http://[::ffff:192.168.1.1]/hook", "events": ["*"]}),
            "url",
        ),
        (json!({"url": "https://x.example.com"}), "events"),
        (
            json!({"url": "https://x.example.com", "events": []}),
            "events",
        ),
        (
            json!({"url": "https://x.example.com", "events": ["message.eaten"]}),
            "events",
        ),
    ] {
        let refused = app
            .send_json(Method::POST, "/workspace/webhooks", &body)
            .await;
        let refused = expect_error(refused, 400, "validation_failed").await;
        assert_eq!(refused["details"][0]["path"][0], field, "{body}");
    }
    let writer = app.key_with(&["read", "write"]).await;
    let response = app
        .request(Method::GET, "/workspace/webhooks", Some(&writer))
        .send()
        .await
        .expect("request");
    expect_error(response, 403, "forbidden").await;
    let other = app
        .bootstrap_another("Other Inc", "Other", "owner@other.test")
        .await
        .api_key;
    for (method, suffix) in [
        (Method::GET, ""),
        (Method::DELETE, ""),
        (Method::POST, "/rotate-secret"),
        (Method::GET, "/deliveries"),
    ] {
        let response = app
            .request(method, &format!("{path}{suffix}"), Some(&other))
            .send()
            .await
            .expect("request");
        expect_error(response, 404, "not_found").await;
    }

    expect_status(app.delete(&path).await, 200).await;
    expect_error(app.get(&path).await, 404, "not_found").await;
}

#[tokio::test]
async fn each_fact_is_told_signed_and_a_rotated_secret_signs_beside_the_new_one() {
    let app = spawn_app().await;
    let receiver = Receiver::start().await;
    let channel = app.live_channel(NUMBER).await;
    let (id, secret) = endpoint(&app, &receiver.url, json!(["*"])).await;

    let payload = text_message(NUMBER, SHEENA, "Sheena", "wamid.E1", "Hello");
    assert_eq!(app.webhook(Some(&channel), &payload).await, 200);
    let sent = app.wait_for_sends(1).await;
    // Meta's reports come once the send is recorded (`message.sent`): one that came sooner
    // would wait, and `read` could overtake `delivered`, which then moves nothing.
    receiver.wait_for(2).await;
    let delivered = status_payload(NUMBER, &sent[0].wamid, "delivered", None);
    assert_eq!(app.webhook(Some(&channel), &delivered).await, 200);
    let read = status_payload(NUMBER, &sent[0].wamid, "read", None);
    assert_eq!(app.webhook(Some(&channel), &read).await, 200);
    let hand = format!("/conversation/+{SHEENA}/handoff/{channel}");
    expect_status(
        app.send_json(Method::POST, &hand, &json!({"reason": "vip"}))
            .await,
        200,
    )
    .await;
    let back = format!("/conversation/+{SHEENA}/resume/{channel}");
    expect_status(app.send_json(Method::POST, &back, &json!({})).await, 200).await;
    let stop = text_message(NUMBER, SHEENA, "Sheena", "wamid.E2", "STOP");
    assert_eq!(app.webhook(Some(&channel), &stop).await, 200);

    // received ×2, sent ×2 (the reply and the opt-out's confirmation), delivered, read,
    // handoff, resumed, opted out.
    let all = receiver.wait_for(9).await;
    assert!(all.iter().all(|r| signed_by(r, &secret)), "{all:#?}");
    let received = receiver.of("message.received");
    assert_eq!(received.len(), 2);
    let first = received[0].json();
    assert_eq!(first["data"]["content"], "Hello");
    assert_eq!(first["data"]["platform_message_id"], "wamid.E1");
    assert!(first["timestamp"].is_string());
    let sent_events = receiver.of("message.sent");
    assert_eq!(
        sent_events[0].json()["data"]["platform_message_id"],
        sent[0].wamid.as_str()
    );
    assert_eq!(receiver.of("message.delivered").len(), 1);
    assert_eq!(receiver.of("message.read").len(), 1);
    let handoff = receiver.of("conversation.handoff");
    assert_eq!(handoff[0].json()["data"]["reason"], "vip");
    assert_eq!(receiver.of("conversation.resumed").len(), 1);
    let opted = receiver.of("identity.opted_out");
    assert_eq!(opted[0].json()["data"]["reason"], "stop_word");
    let now = chrono::Utc::now().timestamp();
    let stamp: i64 = all[0].timestamp.parse().expect("unix seconds");
    assert!((now - stamp).abs() < 60);

    // Each is recorded succeeded (outcomes are recorded a moment after their answer).
    let path = format!("/workspace/webhooks/{id}/deliveries?limit=100");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let deliveries = expect_status(app.get(&path).await, 200).await;
        assert_eq!(deliveries["pagination"]["total"], 9);
        let all_done = deliveries["data"]
            .as_array()
            .expect("deliveries")
            .iter()
            .all(|d| {
                d["status"] == "succeeded" && d["attempts"] == 1 && d["last_status_code"] == 200
            });
        if all_done {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "{deliveries}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    // After a rotation both secrets sign, for receivers to switch without a gap.
    let rotated = app
        .send_json(
            Method::POST,
            &format!("/workspace/webhooks/{id}/rotate-secret"),
            &json!({}),
        )
        .await;
    let rotated = expect_status(rotated, 200).await;
    let new_secret = rotated["data"]["secret"]
        .as_str()
        .expect("secret")
        .to_owned();
    expect_status(app.send_json(Method::POST, &hand, &json!({})).await, 200).await;
    let all = receiver.wait_for(10).await;
    let last = all.last().expect("one more");
    assert_eq!(last.signature.split(' ').count(), 2);
    assert!(signed_by(last, &new_secret) && signed_by(last, &secret));
}

#[tokio::test]
async fn only_the_events_an_endpoint_takes_reach_it_and_other_workspaces_tell_it_nothing() {
    let app = spawn_app().await;
    let receiver = Receiver::start().await;
    let (_, channel) = app.chat_channel("Echo.", json!({})).await;
    endpoint(&app, &receiver.url, json!(["conversation.handoff"])).await;
    app.put_identity("crm-1", json!({"name": "Ana"})).await;
    expect_status(app.chat("crm-1", &channel, "hi").await, 200).await;
    let hand = format!("/conversation/crm-1/handoff/{channel}");
    expect_status(app.send_json(Method::POST, &hand, &json!({})).await, 200).await;
    let all = receiver.wait_for(1).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(receiver.received().len(), 1, "only the handoff: {all:#?}");
    assert_eq!(all[0].json()["type"], "conversation.handoff");
}

#[tokio::test]
async fn a_failing_endpoint_is_retried_with_the_same_id_and_a_gone_one_is_disabled() {
    let app = spawn_app().await;
    let receiver = Receiver::start().await;
    let (_, channel) = app.chat_channel("Echo.", json!({})).await;
    let (id, _) = endpoint(&app, &receiver.url, json!(["message.received"])).await;
    app.put_identity("crm-2", json!({"name": "Bo"})).await;
    receiver.script([Answer::Status(503), Answer::RetryAfter(429, 3600)]);

    expect_status(app.chat("crm-2", &channel, "one").await, 200).await;
    receiver.wait_for(1).await;
    let deliveries = format!("/workspace/webhooks/{id}/deliveries");
    let delivery = wait_for_delivery(&app, &deliveries, |d| d["attempts"] == 1).await;
    assert_eq!(delivery["status"], "pending");
    assert_eq!(delivery["last_status_code"], 503);
    let next = delivery["next_attempt_at"].as_str().expect("due later");
    let next = chrono::DateTime::parse_from_rfc3339(next).expect("time");
    let wait = next.timestamp() - chrono::Utc::now().timestamp();
    assert!((2..=8).contains(&wait), "about 5 s with jitter, not {wait}");
    let path = format!("/workspace/webhooks/{id}");
    let failing = expect_status(app.get(&path).await, 200).await;
    assert!(failing["data"]["failing_since"].is_string(), "{failing}");

    // Sent again now: the endpoint asks for an hour, and gets it.
    let retry = format!(
        "{deliveries}/{}/retry",
        delivery["id"].as_str().expect("id")
    );
    expect_status(app.send_json(Method::POST, &retry, &json!({})).await, 200).await;
    let delivery = wait_for_delivery(&app, &deliveries, |d| d["attempts"] == 2).await;
    assert_eq!(delivery["last_status_code"], 429);
    let next = delivery["next_attempt_at"].as_str().expect("due later");
    let next = chrono::DateTime::parse_from_rfc3339(next).expect("time");
    assert!(
        next.timestamp() - chrono::Utc::now().timestamp() > 3_500,
        "Retry-After honoured"
    );

    // Once more: 200, with the same webhook-id every time.
    expect_status(app.send_json(Method::POST, &retry, &json!({})).await, 200).await;
    let delivery = wait_for_delivery(&app, &deliveries, |d| d["status"] == "succeeded").await;
    assert_eq!(delivery["attempts"], 3);
    // The success ended the endpoint's failing streak.
    let healthy = expect_status(app.get(&path).await, 200).await;
    assert_eq!(healthy["data"]["failing_since"], Value::Null, "{healthy}");
    let ids: Vec<String> = receiver.received().iter().map(|r| r.id.clone()).collect();
    assert_eq!(ids.len(), 3);
    assert!(ids.iter().all(|i| *i == ids[0]), "{ids:?}");

    // 410 Gone disables the endpoint; later facts are not written for it.
    receiver.script([Answer::Status(410)]);
    expect_status(app.chat("crm-2", &channel, "two").await, 200).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let read = expect_status(app.get(&path).await, 200).await;
        if read["data"]["enabled"] == false {
            assert_eq!(
                read["data"]["disabled_reason"],
                "the endpoint answered 410 Gone"
            );
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "never disabled: {read}"
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    expect_status(app.chat("crm-2", &channel, "three").await, 200).await;
    let listed = expect_status(app.get(&deliveries).await, 200).await;
    assert_eq!(
        listed["pagination"]["total"], 2,
        "nothing new for a disabled endpoint"
    );
    let gone = &listed["data"][0];
    assert_eq!(gone["status"], "failed");
    assert_eq!(gone["last_status_code"], 410);
}

#[tokio::test]
async fn a_slow_endpoint_holds_up_no_other_and_gets_at_most_four_at_once() {
    let app = spawn_app().await;
    let (slow, fast) = (Receiver::start().await, Receiver::start().await);
    slow.otherwise(Some(Answer::Slow(Duration::from_secs(2))));
    let (_, channel) = app.chat_channel("Echo.", json!({})).await;
    endpoint(&app, &slow.url, json!(["message.received"])).await;
    endpoint(&app, &fast.url, json!(["message.received"])).await;
    app.put_identity("crm-3", json!({"name": "Cy"})).await;
    let started = tokio::time::Instant::now();
    for i in 0..10 {
        expect_status(app.chat("crm-3", &channel, &format!("m{i}")).await, 200).await;
    }
    fast.wait_for(10).await;
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "the fast endpoint had every event before the slow one answered its first"
    );
    slow.wait_for(10).await;
    assert!(slow.most_in_flight() <= 4, "{}", slow.most_in_flight());
    assert!(
        slow.most_in_flight() >= 2,
        "requests to one endpoint still overlap"
    );
}

#[tokio::test]
async fn flows_and_task_runs_tell_how_they_ended_and_metrics_count_deliveries() {
    let app = spawn_app_with(|s| s.server.operator_token = Some("op-events".into())).await;
    let receiver = Receiver::start().await;
    let (_, channel) = app.chat_channel("Echo.", json!({})).await;
    endpoint(&app, &receiver.url, json!(["task.run.finished"])).await;
    let identity = app
        .put_identity("crm-4", json!({"name": "Di", "phone": "+351912000004"}))
        .await;
    let identity = identity["id"].as_str().expect("id");
    let task = app
        .created(
            "/scheduled-tasks",
            json!({"name": "Hello", "task_type": "send_message", "scheduled_at": chrono::Utc::now().to_rfc3339(),
                   "payload": {"channel_id": channel, "identity_id": identity, "message": "Hi"}}),
        )
        .await;
    let all = receiver.wait_for(1).await;
    let told = all[0].json();
    assert_eq!(told["type"], "task.run.finished");
    assert_eq!(told["data"]["task_id"], task["id"]);
    assert_eq!(told["data"]["task_type"], "send_message");
    assert!(told["data"]["status"].is_string());

    let metrics = app.metrics("op-events").await;
    for family in [
        "parley_event_deliveries_total{outcome=\"succeeded\"}",
        "parley_event_deliveries_pending",
        "parley_event_delivery_oldest_pending_seconds",
    ] {
        assert!(metrics.contains(family), "{family}");
    }
}

#[tokio::test]
async fn a_flow_tells_how_it_ended_whether_it_completed_or_was_cancelled() {
    use crate::flows::{campaign, people, sandbox_with_template};

    let app = spawn_app().await;
    let receiver = Receiver::start().await;
    endpoint(&app, &receiver.url, json!(["flow.finished"])).await;
    let sandbox = sandbox_with_template(&app, "Sandbox").await;
    let campaign = campaign(&app, &sandbox, "Welcome", json!({})).await;
    let people = people(&app, 2).await;
    let completed = app
        .created(
            "/flows",
            json!({"channelUid": sandbox, "campaignUid": campaign, "contactUids": people,
                   "configuration": {"pauseBetweenContactsMs": 0}}),
        )
        .await;
    let told = receiver.wait_for(1).await[0].json();
    assert_eq!(told["data"]["flow_id"], completed["uid"]);
    assert_eq!(told["data"]["campaign_id"], campaign.as_str());
    assert_eq!(told["data"]["status"], "completed");

    // A slow flow, cancelled by a user: told too, with its end state.
    let slow = app
        .created(
            "/flows",
            json!({"channelUid": sandbox, "campaignUid": campaign, "contactUids": people,
                   "configuration": {"pauseBetweenContactsMs": 60000}}),
        )
        .await;
    let path = format!("/flows/{}", slow["uid"].as_str().expect("uid"));
    let cancelled = app
        .send_json(Method::PATCH, &path, &json!({"status": "cancelled"}))
        .await;
    expect_status(cancelled, 200).await;
    let all = receiver.wait_for(2).await;
    let last = all.last().expect("second").json();
    assert_eq!(last["data"]["flow_id"], slow["uid"]);
    assert_eq!(last["data"]["status"], "cancelled");
}

#[tokio::test]
async fn an_endpoint_failing_for_five_days_is_disabled() {
    use parley_persistence::entities::event_webhook;
    use sea_orm::sea_query::Expr;
    use sea_orm::{ColumnTrait, EntityTrait, QueryFilter};

    let app = spawn_app().await;
    let receiver = Receiver::start().await;
    receiver.otherwise(Some(Answer::Status(500)));
    let (_, channel) = app.chat_channel("Echo.", json!({})).await;
    let (id, _) = endpoint(&app, &receiver.url, json!(["*"])).await;
    let six_days_ago = chrono::Utc::now() - chrono::Duration::days(6);
    event_webhook::Entity::update_many()
        .col_expr(
            event_webhook::Column::FailingSince,
            Expr::value(six_days_ago),
        )
        .filter(event_webhook::Column::Id.eq(uuid::Uuid::parse_str(&id).expect("uuid")))
        .exec(&app.db().await)
        .await
        .expect("backdated");
    app.put_identity("crm-5", json!({"name": "Ed"})).await;
    expect_status(app.chat("crm-5", &channel, "anyone?").await, 200).await;
    let path = format!("/workspace/webhooks/{id}");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let read = expect_status(app.get(&path).await, 200).await;
        if read["data"]["enabled"] == false {
            assert_eq!(
                read["data"]["disabled_reason"],
                "every delivery failed for five days"
            );
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "never disabled: {read}"
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    // Turned back on, it is delivered to again, its failing streak forgotten.
    let on = app
        .send_json(Method::PATCH, &path, &json!({"enabled": true}))
        .await;
    let on = expect_status(on, 200).await;
    assert_eq!(on["data"]["disabled_reason"], Value::Null);
    assert_eq!(on["data"]["failing_since"], Value::Null);
}

#[tokio::test]
async fn a_name_that_leads_inside_is_refused_at_connection_like_an_unreachable_server() {
    let app = spawn_app_with(|s| s.egress.allow = String::new()).await;
    let receiver = Receiver::start().await;
    // A name, not an address: accepted when registered, refused when connecting.
    let url = receiver.url.replace("127.0.0.1", "localhost");
    let (_, channel) = app.chat_channel("Echo.", json!({})).await;
    let (id, _) = endpoint(&app, &url, json!(["message.received"])).await;
    app.put_identity("crm-6", json!({"name": "Flo"})).await;
    expect_status(app.chat("crm-6", &channel, "hi").await, 200).await;
    let deliveries = format!("/workspace/webhooks/{id}/deliveries");
    let delivery = wait_for_delivery(&app, &deliveries, |d| d["attempts"] == 1).await;
    assert_eq!(delivery["status"], "pending");
    assert_eq!(delivery["last_error"], "the endpoint could not be reached");
    assert_eq!(delivery["last_status_code"], Value::Null);
    assert!(
        receiver.received().is_empty(),
        "nothing reached the inside address"
    );
}

/// Polls the endpoint's newest delivery until `check` holds.
async fn wait_for_delivery(app: &TestApp, path: &str, check: impl Fn(&Value) -> bool) -> Value {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let listed = expect_status(app.get(path).await, 200).await;
        let newest = listed["data"][0].clone();
        if check(&newest) {
            return newest;
        }
        assert!(tokio::time::Instant::now() < deadline, "{listed}");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

#[tokio::test]
async fn a_host_port_exception_opens_that_port_only_whatever_the_spelling() {
    // The receiver listens on one port; the operator opened another of the same address.
    let receiver = Receiver::start().await;
    let port: u16 = receiver
        .url
        .rsplit(':')
        .next()
        .and_then(|p| p.trim_end_matches("/hook").parse().ok())
        .expect("a port");
    let opened = if port == 65_535 { port - 1 } else { port + 1 };
    let app = spawn_app_with(move |s| s.egress.allow = format!("127.0.0.1:{opened}")).await;

    // Another spelling of the address on the receiver's port is refused when registered.
    for spelling in [
        "[::ffff:127.0.0.1]",
        "[::ffff:7f00:1]",
        "[0:0:0:0:0:ffff:127.0.0.1]",
    ] {
        let url = format!("http://{spelling}:{port}/hook");
        let refused = app
            .send_json(
                Method::POST,
                "/workspace/webhooks",
                &json!({"url": url, "events": ["*"]}),
            )
            .await;
        let refused = expect_error(refused, 400, "validation_failed").await;
        assert_eq!(refused["details"][0]["path"], json!(["url"]), "{spelling}");
    }
    // A name that resolves to the address reaches no port through the exception.
    let (_, channel) = app.chat_channel("Echo.", json!({})).await;
    let url = format!("http://localhost:{port}/hook");
    let (id, _) = endpoint(&app, &url, json!(["message.received"])).await;
    app.put_identity("crm-7", json!({"name": "Gil"})).await;
    expect_status(app.chat("crm-7", &channel, "hi").await, 200).await;
    let deliveries = format!("/workspace/webhooks/{id}/deliveries");
    let delivery = wait_for_delivery(&app, &deliveries, |d| d["attempts"] == 1).await;
    assert_eq!(delivery["last_error"], "the endpoint could not be reached");
    assert!(receiver.received().is_empty(), "port {port} was reached");
}

#[tokio::test]
async fn a_delivery_due_already_is_not_asked_for_again() {
    let app = spawn_app().await;
    let receiver = Receiver::start().await;
    // Every attempt takes the receiver two seconds: the first is in flight meanwhile.
    receiver.otherwise(Some(Answer::Slow(Duration::from_secs(2))));
    let (_, channel) = app.chat_channel("Echo.", json!({})).await;
    let (id, _) = endpoint(&app, &receiver.url, json!(["message.received"])).await;
    app.put_identity("crm-8", json!({"name": "Hal"})).await;
    expect_status(app.chat("crm-8", &channel, "hi").await, 200).await;
    let deliveries = format!("/workspace/webhooks/{id}/deliveries");
    let delivery = wait_for_delivery(&app, &deliveries, |d| d.is_object()).await;
    let retry = format!(
        "{deliveries}/{}/retry",
        delivery["id"].as_str().expect("id")
    );

    // However often it is asked for, one attempt at a time.
    for _ in 0..3 {
        let again = app.send_json(Method::POST, &retry, &json!({})).await;
        expect_error(again, 409, "delivery_already_due").await;
    }
    let delivery = wait_for_delivery(&app, &deliveries, |d| d["status"] == "succeeded").await;
    assert_eq!(delivery["attempts"], 1);
    assert_eq!(receiver.received().len(), 1);
}

#[tokio::test]
async fn a_sandbox_reply_is_told_sent_then_delivered_as_a_live_one_is() {
    let app = spawn_app().await;
    let receiver = Receiver::start().await;
    let (_, channel) = app.chat_channel("Echo.", json!({})).await;
    endpoint(
        &app,
        &receiver.url,
        json!(["message.sent", "message.delivered"]),
    )
    .await;
    let inbound = app
        .send_json(
            Method::POST,
            &format!("/channels/{channel}/sandbox/inbound"),
            &json!({"from": "+351912345678", "name": "Maria", "text": "Hi"}),
        )
        .await;
    assert!(inbound.status().is_success());

    receiver.wait_for(2).await;
    let (sent, delivered) = (
        receiver.of("message.sent"),
        receiver.of("message.delivered"),
    );
    assert_eq!((sent.len(), delivered.len()), (1, 1));
    assert_eq!(
        sent[0].json()["data"]["message_id"],
        delivered[0].json()["data"]["message_id"]
    );
}

#[tokio::test]
async fn an_endpoint_gets_as_many_deliveries_at_once_as_the_setting_allows_and_no_more() {
    let app = spawn_app_with(|s| s.actors.event_delivery_per_endpoint = 2).await;
    let receiver = Receiver::start().await;
    // Each request is held long enough for a backlog to queue behind the ones in flight.
    receiver.otherwise(Some(Answer::Slow(Duration::from_millis(50))));
    let (_, channel) = app.chat_channel("Echo.", json!({})).await;
    endpoint(&app, &receiver.url, json!(["message.received"])).await;
    app.put_identity("crm-8", json!({"name": "Ivo"})).await;
    let turns = 12;
    for n in 0..turns {
        expect_status(app.chat("crm-8", &channel, &format!("hi {n}")).await, 200).await;
    }
    let received = receiver.wait_for(turns).await;
    assert_eq!(received.len(), turns, "an event went out twice");
    // Not the default's four: the setting is the bound, and the backlog reaches it.
    assert_eq!(receiver.most_in_flight(), 2);
}

#[tokio::test]
async fn a_backlog_longer_than_a_read_ahead_goes_out_once_each_and_a_later_fact_still_goes() {
    let app = spawn_app().await;
    let receiver = Receiver::start().await;
    // The receiver holds each request a little: the lane's queue fills past its read-ahead
    // (64) while the first ones are in flight.
    receiver.otherwise(Some(Answer::Slow(Duration::from_millis(30))));
    let (_, channel) = app.chat_channel("Echo.", json!({})).await;
    let (id, _) = endpoint(&app, &receiver.url, json!(["message.received"])).await;
    app.put_identity("crm-9", json!({"name": "Ida"})).await;
    let turns = 80;
    for n in 0..turns {
        expect_status(app.chat("crm-9", &channel, &format!("hi {n}")).await, 200).await;
    }
    let received = receiver.wait_for(turns).await;
    assert_eq!(received.len(), turns, "an event went out twice");
    assert!(receiver.most_in_flight() <= 4, "more than four in flight");

    // The lane ended once idle; the next fact starts another, and it goes out too.
    let deliveries = format!("/workspace/webhooks/{id}/deliveries?limit=100");
    wait_for_delivery(&app, &deliveries, |d| d["status"] == "succeeded").await;
    expect_status(app.chat("crm-9", &channel, "again").await, 200).await;
    let received = receiver.wait_for(turns + 1).await;
    assert_eq!(received.len(), turns + 1);
    let last = received.last().expect("last").json();
    assert_eq!(last["data"]["content"], "again", "{last}");
}

/// The distinct event ids among `received`.
fn distinct_ids(received: &[Received]) -> usize {
    let mut ids: Vec<&str> = received.iter().map(|r| r.id.as_str()).collect();
    ids.sort_unstable();
    ids.dedup();
    ids.len()
}

/// Four people chatting on `channel` at once, `turns` turns each, one after the other;
/// answers how many turns there were.
async fn chatting_at_once(app: &TestApp, channel: &str, turns: usize) -> usize {
    let people = ["crm-a", "crm-b", "crm-c", "crm-d"];
    for person in people {
        app.put_identity(person, json!({"name": person})).await;
    }
    let chats = people.map(|person| async move {
        for n in 0..turns {
            expect_status(app.chat(person, channel, &format!("hi {n}")).await, 200).await;
        }
    });
    futures_util::future::join_all(chats).await;
    people.len() * turns
}

#[tokio::test]
async fn deliveries_handed_over_at_commit_go_out_with_no_sweep_to_find_them() {
    // No sweep in the test's time: every delivery after the first goes out because its
    // write handed it to the endpoint's lane (or told the lane to read).
    let app = spawn_app_with(|s| s.actors.event_delivery_sweep_ms = 3_600_000).await;
    let receiver = Receiver::start().await;
    let (_, channel) = app.chat_channel("Echo.", json!({})).await;
    endpoint(&app, &receiver.url, json!(["message.received"])).await;

    let events = chatting_at_once(&app, &channel, 15).await;
    let received = receiver.wait_for(events).await;
    assert_eq!(received.len(), events, "an event went out twice");

    // A lane idle between bursts takes the next one's deliveries too.
    expect_status(app.chat("crm-a", &channel, "later").await, 200).await;
    let received = receiver.wait_for(events + 1).await;
    assert_eq!(received.len(), events + 1, "an event went out twice");
}

#[tokio::test]
async fn a_sweep_racing_the_hand_over_sends_no_delivery_twice() {
    // A sweep every 10 ms tells the lane to look while deliveries are handed to it: each
    // must go out once, whichever found it first. (The race is narrow: a smoke test of the
    // lane's guard, not a proof of it.)
    let app = spawn_app_with(|s| s.actors.event_delivery_sweep_ms = 10).await;
    let receiver = Receiver::start().await;
    let (_, channel) = app.chat_channel("Echo.", json!({})).await;
    endpoint(&app, &receiver.url, json!(["message.received"])).await;

    let events = chatting_at_once(&app, &channel, 15).await;
    let received = receiver.wait_for(events).await;
    // A moment more for a second copy of any of them to arrive.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let received_late = receiver.received();
    assert_eq!(distinct_ids(&received), events);
    assert_eq!(received_late.len(), events, "an event went out twice");
}
