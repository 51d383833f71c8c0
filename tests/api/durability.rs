//! Nothing lost, nothing sent twice: the real binary is killed (`kill -9`) at the worst moments
//! and restarted on the same database. The in-process test server shares the database, so its
//! inbound worker is told not to sweep: only the binary answers.

use std::path::Path;
use std::process::Child;
use std::time::{Duration, Instant};

use parley_testkit::Reply;
use parley_testkit::graph::text_message;
use serde_json::Value;

use crate::helpers::{APP_SECRET, TestApp, order_update, order_update_send, spawn_app_with};

const NUMBER: &str = "106540352242922";

/// The in-process server of these tests, with its inbound sweep out of the way.
async fn quiet_app() -> TestApp {
    spawn_app_with(|s| {
        s.actors.inbound_sweep_ms = 3_600_000;
        s.actors.scheduler_sweep_ms = 3_600_000;
        s.actors.event_delivery_sweep_ms = 3_600_000;
        s.media.sweep_ms = 3_600_000;
    })
    .await
}

/// `parley serve` as a separate process on the test's database, fakes and secret key; answers
/// the process and its base URL once it listens.
pub(crate) fn serve(app: &TestApp) -> (Child, String) {
    serve_with(app, &[])
}

/// [`serve`] with more environment variables.
fn serve_with(app: &TestApp, env: &[(&str, &str)]) -> (Child, String) {
    let data_dir = app.data_dir().display().to_string();
    let (model, graph) = (app.model.base_url(), app.graph.base_url());
    let mut envs = vec![
        ("PARLEY_DATABASE_URL", app.database_url.as_str()),
        ("PARLEY_DATA_DIR", data_dir.as_str()),
        ("PARLEY_LLM_BASE_URL", model.as_str()),
        ("PARLEY_LLM_TIMEOUT_SECS", "60"),
        ("PARLEY_WHATSAPP_GRAPH_URL", graph.as_str()),
        ("PARLEY_WHATSAPP_APP_SECRET", APP_SECRET),
        ("PARLEY_WHATSAPP_RETRY_BACKOFF_MS", "10"),
        ("PARLEY_LOG", "info"),
    ];
    envs.extend_from_slice(env);
    parley_testkit::process::serve(Path::new(env!("CARGO_BIN_EXE_parley")), &envs, None)
}

#[tokio::test]
async fn a_server_killed_between_storing_an_event_and_replying_answers_it_once_after_restart() {
    let app = quiet_app().await;
    let channel = app.live_channel(NUMBER).await;
    // The first model call never answers: the process dies while the turn waits for it.
    app.model.push([Reply::Hang]);
    let (mut first, base) = serve(&app);
    let payload = text_message(
        NUMBER,
        "16505551234",
        "Sheena",
        "wamid.CRASH1",
        "Is my order late?",
    );
    let status = app
        .graph
        .post_webhook(
            &format!("{base}/webhooks/waba/{channel}"),
            APP_SECRET,
            &payload,
        )
        .await;
    assert_eq!(status, 200);
    let deadline = Instant::now() + Duration::from_secs(30);
    while app.model.requests().is_empty() {
        assert!(
            Instant::now() < deadline,
            "the turn never reached the model"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    first.kill().expect("kill -9");
    first.wait().expect("reaped");
    assert!(
        app.graph.sent().is_empty(),
        "nothing was sent before the crash"
    );

    let (mut second, base) = serve(&app);
    let sent = app.wait_for_sends(1).await;
    assert_eq!(sent[0].text(), Some("You said: Is my order late?"));
    assert_eq!(sent[0].body["context"]["message_id"], "wamid.CRASH1");

    // Meta re-delivers the same event after the outage: still one reply.
    let again = app
        .graph
        .post_webhook(
            &format!("{base}/webhooks/waba/{channel}"),
            APP_SECRET,
            &payload,
        )
        .await;
    assert_eq!(again, 200);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(app.graph.sent().len(), 1, "exactly one reply");
    let stored = app.stored_messages("+16505551234").await;
    let roles: Vec<&str> = stored.iter().map(|(role, _)| role.as_str()).collect();
    assert_eq!(
        roles,
        ["user", "assistant"],
        "the message was stored once: {stored:?}"
    );

    second.kill().expect("kill");
    second.wait().expect("reaped");
}

/// Kills the process and waits for it.
fn kill(mut child: Child) {
    child.kill().expect("kill -9");
    child.wait().expect("reaped");
}

/// The stored outbound messages of the identity with `phone`, straight from the database.
async fn outbound_of(
    app: &TestApp,
    phone: &str,
) -> Vec<parley_persistence::entities::message::Model> {
    use parley_persistence::{Direction, Page, conversations, identities};
    let db = app.db().await;
    let identity = identities::find_by_contact(
        &db,
        app.owner.workspace_id,
        parley_persistence::ContactKind::Phone,
        phone,
    )
    .await
    .expect("query")
    .expect("identity");
    let filter = conversations::ConversationFilter {
        identity_id: Some(identity.id),
        channel_id: None,
        mode: None,
    };
    let page = Page {
        page: 1,
        limit: 100,
    };
    let mut all = Vec::new();
    for conversation in conversations::list(&db, app.owner.workspace_id, filter, page)
        .await
        .expect("conversations")
        .items
    {
        all.extend(
            conversations::messages(&db, conversation.id, page)
                .await
                .expect("messages")
                .items
                .into_iter()
                .filter(|m| m.direction == Direction::Outbound),
        );
    }
    all
}

#[tokio::test]
async fn a_template_waiting_to_retry_at_a_crash_is_sent_at_restart_as_the_same_template() {
    let app = quiet_app().await;
    let channel = app.live_channel(NUMBER).await;
    app.graph.add_template("waba-1", order_update());
    // Meta's throughput limit: the send waits (3 s) before trying again, and dies waiting.
    app.graph.fail_next_sends([130_429]);
    let slow_retry = [("PARLEY_WHATSAPP_RETRY_BACKOFF_MS", "3000")];
    let (first, base) = serve_with(&app, &slow_retry);
    let request = reqwest::Client::new()
        .post(format!("{base}/channels/{channel}/waba/send"))
        .bearer_auth(&app.owner.api_key)
        .json(&order_update_send("5511987654321"));
    let call = tokio::spawn(request.send());
    let deadline = Instant::now() + Duration::from_secs(30);
    while app.graph.rejected().is_empty() {
        assert!(Instant::now() < deadline, "the first attempt never came");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    tokio::time::sleep(Duration::from_millis(200)).await;

    kill(first);
    let _ = call.await;
    let stored = outbound_of(&app, "+5511987654321").await;
    assert_eq!(stored.len(), 1);
    assert_eq!(
        stored[0].status,
        parley_persistence::MessageStatus::Pending,
        "waiting to retry is not in flight"
    );

    let (second, _) = serve(&app);
    let sent = app.wait_for_sends(1).await;
    assert_eq!(
        sent[0].body["type"], "template",
        "a template stays a template"
    );
    assert_eq!(sent[0].body["template"]["name"], "order_update");
    assert_eq!(sent[0].to(), "5511987654321");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let stored = outbound_of(&app, "+5511987654321").await;
        if stored[0].status == parley_persistence::MessageStatus::Sent {
            assert_eq!(
                stored[0].platform_message_id.as_deref(),
                Some(sent[0].wamid.as_str())
            );
            break;
        }
        assert!(Instant::now() < deadline, "never recorded: {stored:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(app.graph.sent().len(), 1);
    kill(second);
}

#[tokio::test]
async fn a_message_caught_mid_attempt_is_failed_interrupted_and_never_resent() {
    let app = quiet_app().await;
    let channel = app.live_channel(NUMBER).await;
    app.graph.add_template("waba-1", order_update());
    app.graph.set_latency(Duration::from_secs(30));
    let (first, base) = serve(&app);
    let request = reqwest::Client::new()
        .post(format!("{base}/channels/{channel}/waba/send"))
        .bearer_auth(&app.owner.api_key)
        .json(&order_update_send("5511987654321"));
    let call = tokio::spawn(request.send());
    let deadline = Instant::now() + Duration::from_secs(30);
    while !in_flight(&app).await {
        assert!(Instant::now() < deadline, "the attempt never started");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    kill(first);
    let _ = call.await;
    app.graph.set_latency(Duration::ZERO);
    let (second, _) = serve(&app);
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let stored = outbound_of(&app, "+5511987654321").await;
        if stored[0].status == parley_persistence::MessageStatus::Failed {
            assert_eq!(
                stored[0].error.as_ref().map(|e| e["message"].clone()),
                Some(serde_json::json!("interrupted"))
            );
            break;
        }
        assert!(Instant::now() < deadline, "never failed: {stored:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(app.graph.sent().is_empty(), "never sent again");
    kill(second);
}

/// Whether the send's message is stored and in flight (`sending`).
async fn in_flight(app: &TestApp) -> bool {
    let db = app.db().await;
    let Ok(Some(_)) = parley_persistence::identities::find_by_contact(
        &db,
        app.owner.workspace_id,
        parley_persistence::ContactKind::Phone,
        "+5511987654321",
    )
    .await
    else {
        return false;
    };
    outbound_of(app, "+5511987654321")
        .await
        .iter()
        .any(|m| m.status == parley_persistence::MessageStatus::Sending)
}

#[tokio::test]
async fn a_flow_killed_mid_send_resumes_by_itself_and_nobody_gets_the_template_twice() {
    let app = quiet_app().await;
    let channel = app.live_channel(NUMBER).await;
    app.graph.add_template("waba-1", order_update());
    let people = crate::flows::people(&app, 6).await;
    let campaign =
        crate::flows::campaign(&app, &channel, "Orders", crate::flows::per_person()).await;
    // Slow answers from Meta: two sends are always in flight.
    app.graph.set_latency(Duration::from_millis(400));
    let (first, base) = serve(&app);
    let created: Value = reqwest::Client::new()
        .post(format!("{base}/flows"))
        .bearer_auth(&app.owner.api_key)
        .json(&serde_json::json!({"channelUid": channel, "campaignUid": campaign, "contactUids": people,
            "configuration": {"pauseBetweenContactsMs": 0, "maxConcurrentMessages": 2, "timeoutMs": 300}}))
        .send()
        .await
        .expect("create the flow")
        .json()
        .await
        .expect("json");
    let uid = created["data"]["uid"].as_str().expect("uid").to_owned();
    app.wait_for_sends(2).await;
    tokio::time::sleep(Duration::from_millis(150)).await;

    kill(first);
    let before = app.graph.sent().len();
    assert!(before < 6, "the flow was still sending when killed");
    app.graph.set_latency(Duration::ZERO);
    let (second, _) = serve(&app);
    let deadline = Instant::now() + Duration::from_secs(30);
    let done = loop {
        let flow: Value = app
            .get(&format!("/flows/{uid}"))
            .await
            .json()
            .await
            .expect("json");
        let status = flow["data"]["status"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        if !["queued", "running"].contains(&status.as_str()) {
            break flow["data"].clone();
        }
        assert!(Instant::now() < deadline, "the flow never ended: {flow}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    kill(second);

    let sent = app.graph.sent();
    let mut phones: Vec<&str> = sent.iter().map(parley_testkit::SentMessage::to).collect();
    phones.sort_unstable();
    let distinct = phones.len();
    phones.dedup();
    assert_eq!(
        phones.len(),
        distinct,
        "someone got the template twice: {phones:?}"
    );
    assert!(
        sent.len() > before,
        "the flow resumed after the restart by itself"
    );
    let stats = &done["statistics"];
    assert_eq!(
        stats["total"], 6,
        "every recipient is accounted for: {done}"
    );
    assert_eq!(stats["pending"], 0, "{done}");
    // Those caught mid-send are failed `interrupted` (Meta may or may not have had them); all
    // the others were sent, before or after the restart.
    let interrupted = done["metadata"]["errorCounts"]["interrupted"]
        .as_u64()
        .unwrap_or(0);
    assert!(interrupted >= 1, "the kill caught sends in flight: {done}");
    assert_eq!(
        stats["sent"].as_u64().expect("sent") + interrupted,
        6,
        "{done}"
    );
}

#[tokio::test]
async fn a_task_due_while_the_server_was_down_runs_once_at_start_up_marked_late() {
    let app = quiet_app().await;
    let channel = crate::flows::sandbox_with_template(&app, "Sandbox").await;
    crate::flows::people(&app, 1).await;
    let (first, base) = serve(&app);
    // Far enough ahead that the kill comes first even on a loaded machine.
    let due = chrono::Utc::now() + chrono::Duration::seconds(4);
    let created: Value = reqwest::Client::new()
        .post(format!("{base}/scheduled-tasks"))
        .bearer_auth(&app.owner.api_key)
        .json(
            &serde_json::json!({"name": "Shipped", "task_type": "send_template",
            "scheduled_at": due.to_rfc3339(),
            "payload": {"identity_id": "p0", "channel_id": channel, "template_name": "order_update",
                        "language": "en_US", "parameters": ["Ana", "#9"]}}),
        )
        .send()
        .await
        .expect("create the task")
        .json()
        .await
        .expect("json");
    let task = created["data"]["id"]
        .as_str()
        .expect("a task id")
        .to_owned();
    kill(first);
    // Down past the task's time.
    while chrono::Utc::now() < due + chrono::Duration::milliseconds(300) {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    let (second, _) = serve(&app);
    wait_until_completed(&app, &task).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    kill(second);
    let runs: Value = app
        .get(&format!("/scheduled-tasks/{task}/runs"))
        .await
        .json()
        .await
        .expect("json");
    let runs = runs["data"].as_array().expect("runs");
    assert_eq!(runs.len(), 1, "exactly one run: {runs:?}");
    assert_eq!(runs[0]["late"], true, "{runs:?}");
    assert_eq!(runs[0]["status"], "succeeded", "{runs:?}");
    let outbox: Value = app
        .get(&format!("/channels/{channel}/sandbox/outbox"))
        .await
        .json()
        .await
        .expect("json");
    assert_eq!(
        outbox["data"].as_array().map(Vec::len),
        Some(1),
        "exactly one message: {outbox}"
    );
}

#[tokio::test]
async fn task_sends_stopped_before_their_message_was_handed_over_run_again_after_a_crash() {
    let app = quiet_app().await;
    let channel = app.live_channel(NUMBER).await;
    app.graph.add_template("waba-1", order_update());
    crate::flows::people(&app, 3).await;
    let (first, base) = serve_with(&app, &[("PARLEY_SCHEDULER_SWEEP_MS", "200")]);
    let client = reqwest::Client::new();
    let due = chrono::Utc::now() + chrono::Duration::milliseconds(1_500);
    let mut tasks = Vec::new();
    for person in ["p0", "p1", "p2"] {
        let created: Value = client
            .post(format!("{base}/scheduled-tasks"))
            .bearer_auth(&app.owner.api_key)
            .json(
                &serde_json::json!({"name": "Shipped", "task_type": "send_template",
                "scheduled_at": due.to_rfc3339(),
                "payload": {"identity_id": person, "channel_id": channel,
                            "template_name": "order_update", "language": "en_US",
                            "parameters": ["Ana", "#9"]}}),
            )
            .send()
            .await
            .expect("create the task")
            .json()
            .await
            .expect("json");
        tasks.push(created["data"]["id"].as_str().expect("id").to_owned());
    }
    // Creating them checked the template at Meta; now Meta is slow to list templates, so
    // every run is caught before it stored its message.
    app.graph.delay_template_listing(Duration::from_secs(30));
    // Every run is under way (claimed `running`) when the server dies.
    let deadline = Instant::now() + Duration::from_secs(20);
    for task in &tasks {
        loop {
            let runs: Value = app
                .get(&format!("/scheduled-tasks/{task}/runs"))
                .await
                .json()
                .await
                .expect("json");
            if runs["data"].as_array().is_some_and(|r| !r.is_empty()) {
                break;
            }
            assert!(Instant::now() < deadline, "the run never started: {runs}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    kill(first);
    assert!(
        app.graph.sent().is_empty(),
        "nothing reached Meta before the crash"
    );

    app.graph.delay_template_listing(Duration::ZERO);
    let (second, _) = serve_with(&app, &[("PARLEY_SCHEDULER_SWEEP_MS", "200")]);
    let sent = app.wait_for_sends(3).await;
    for task in &tasks {
        wait_until_completed(&app, task).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    kill(second);

    // Each person got the template exactly once: nothing lost, nothing twice.
    let mut phones: Vec<&str> = sent.iter().map(parley_testkit::SentMessage::to).collect();
    phones.sort_unstable();
    phones.dedup();
    assert_eq!(phones.len(), 3, "{phones:?}");
    assert_eq!(app.graph.sent().len(), 3, "a template went twice");
    for task in &tasks {
        let runs: Value = app
            .get(&format!("/scheduled-tasks/{task}/runs"))
            .await
            .json()
            .await
            .expect("json");
        let statuses: Vec<&str> = runs["data"]
            .as_array()
            .expect("runs")
            .iter()
            .filter_map(|r| r["status"].as_str())
            .collect();
        assert!(statuses.contains(&"succeeded"), "{runs}");
    }
}

/// Waits (20 s at most) until the scheduled task `task` reads `completed`.
async fn wait_until_completed(app: &TestApp, task: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let record: Value = app
            .get(&format!("/scheduled-tasks/{task}"))
            .await
            .json()
            .await
            .expect("json");
        if record["data"]["status"] == "completed" {
            break;
        }
        assert!(Instant::now() < deadline, "the task never ran: {record}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn a_conversation_handed_to_a_person_stays_theirs_across_a_restart() {
    let app = quiet_app().await;
    let channel = app.live_channel(NUMBER).await;
    let client = reqwest::Client::new();
    let post = |base: &str, path: String| {
        client
            .post(format!("{base}{path}"))
            .bearer_auth(&app.owner.api_key)
            .json(&serde_json::json!({"message": "Hello?"}))
            .send()
    };
    let graph = &app.graph;
    let channel = &channel;
    let write = |base: &str, wamid: &str, text: &str| {
        let payload = text_message(NUMBER, "16505551234", "Sheena", wamid, text);
        let url = format!("{base}/webhooks/waba/{channel}");
        async move { graph.post_webhook(&url, APP_SECRET, &payload).await }
    };
    let (first, base) = serve(&app);
    assert_eq!(write(&base, "wamid.HR1", "Hi").await, 200);
    app.wait_for_sends(1).await;
    let handed = post(
        &base,
        format!("/conversation/+16505551234/handoff/{channel}"),
    )
    .await
    .expect("handoff");
    assert_eq!(handed.status(), 200);
    kill(first);

    let (second, base) = serve(&app);
    assert_eq!(write(&base, "wamid.HR2", "Is anyone there?").await, 200);
    app.wait_for_messages("+16505551234", |all| {
        all.iter().any(|m| m["content"] == "Is anyone there?")
    })
    .await;
    let chat = post(&base, format!("/conversation/+16505551234/chat/{channel}"))
        .await
        .expect("chat");
    assert_eq!(chat.status(), 409, "still the person's after the restart");
    assert_eq!(app.graph.sent().len(), 1, "the assistant stayed quiet");

    let resumed = post(
        &base,
        format!("/conversation/+16505551234/resume/{channel}"),
    )
    .await
    .expect("resume");
    assert_eq!(resumed.status(), 200);
    assert_eq!(write(&base, "wamid.HR3", "Hello again").await, 200);
    let sent = app.wait_for_sends(2).await;
    assert_eq!(sent[1].text(), Some("You said: Hello again"));
    kill(second);
}

#[tokio::test]
async fn events_in_flight_at_a_kill_all_arrive_after_the_restart() {
    use crate::event_webhooks::{Answer, Receiver, endpoint, signed_by};

    let app = quiet_app().await;
    let receiver = Receiver::start().await;
    // The endpoint holds every request: the kill finds them in flight.
    receiver.otherwise(Some(Answer::Slow(Duration::from_secs(30))));
    let (_, channel) = app.chat_channel("Echo.", serde_json::json!({})).await;
    let (id, secret) = endpoint(&app, &receiver.url, serde_json::json!(["message.received"])).await;
    app.put_identity("crm-k", serde_json::json!({"name": "Kay"}))
        .await;
    let allow = [("PARLEY_EGRESS_ALLOW", "127.0.0.0/8")];
    let (first, base) = serve_with(&app, &allow);
    let client = reqwest::Client::new();
    for i in 0..3 {
        let chat = client
            .post(format!("{base}/conversation/crm-k/chat/{channel}"))
            .bearer_auth(&app.owner.api_key)
            .json(&serde_json::json!({"message": format!("m{i}")}))
            .send()
            .await
            .expect("chat");
        assert_eq!(chat.status(), 200);
    }
    let held = receiver.wait_for(3).await;
    kill(first);

    receiver.otherwise(None);
    let (second, _) = serve_with(&app, &allow);
    let deliveries = format!("/workspace/webhooks/{id}/deliveries");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let listed: Value = app.get(&deliveries).await.json().await.expect("json");
        let data = listed["data"].as_array().cloned().unwrap_or_default();
        if data.len() == 3 && data.iter().all(|d| d["status"] == "succeeded") {
            break;
        }
        assert!(Instant::now() < deadline, "not all delivered: {listed}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    kill(second);
    let mut before: Vec<String> = held.iter().map(|r| r.id.clone()).collect();
    before.sort();
    let after: Vec<_> = receiver.received().into_iter().skip(held.len()).collect();
    let mut again: Vec<String> = after.iter().map(|r| r.id.clone()).collect();
    again.sort();
    again.dedup();
    assert_eq!(again, before, "each event again, with the same webhook-id");
    assert!(after.iter().all(|r| signed_by(r, &secret)));
}

#[tokio::test]
async fn a_file_being_fetched_at_a_kill_is_fetched_whole_after_the_restart() {
    use parley_testkit::graph::messages_payload;
    let app = quiet_app().await;
    let channel = app.live_channel(NUMBER).await;
    let size = 4 * 1024 * 1024;
    let sha256 = app
        .graph
        .add_generated_media("media-crash", size, 9, "image/jpeg");
    // A slow link: the download is still going when the process dies.
    app.graph.pace_downloads(Duration::from_millis(20));
    let (first, base) = serve(&app);
    let image = serde_json::json!({"from": "16505551234", "id": "wamid.MEDIA1", "timestamp": "1749416383",
        "type": "image", "image": {"id": "media-crash", "mime_type": "image/jpeg", "sha256": sha256}});
    let payload = messages_payload(NUMBER, "16505551234", "Sheena", image);
    let url = format!("{base}/webhooks/waba/{channel}");
    assert_eq!(
        app.graph.post_webhook(&url, APP_SECRET, &payload).await,
        200
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    while app.graph.downloads() == 0 {
        assert!(Instant::now() < deadline, "the download never started");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    kill(first);
    let pending = app
        .wait_for_messages("+16505551234", |m| !m.is_empty())
        .await;
    assert_eq!(
        pending[0]["attachments"][0]["status"], "pending",
        "{pending:?}"
    );

    app.graph.pace_downloads(Duration::ZERO);
    let (second, _) = serve(&app);
    let messages = app
        .wait_for_messages("+16505551234", |all| {
            all.iter()
                .any(|m| m["attachments"][0]["status"] == "stored")
        })
        .await;
    let file = &messages[0]["attachments"][0];
    assert_eq!(file["size"], size);
    assert_eq!(
        app.graph.downloads(),
        2,
        "the cut-short download, then the whole one"
    );
    let read = app
        .get(&format!("/media/{}", file["id"].as_str().expect("id")))
        .await;
    assert_eq!(read.status().as_u16(), 200);
    let etag = read.headers()["etag"]
        .to_str()
        .expect("etag")
        .trim_matches('"')
        .to_owned();
    assert_eq!(etag, sha256);
    assert_eq!(read.bytes().await.expect("bytes").len() as u64, size);
    kill(second);
}
