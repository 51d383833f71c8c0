//! Scheduled tasks: records, refusals, each task type's effect, pause/resume, recurrence and
//! deletion, with the scheduler running in the server.

use std::time::Duration;

use parley_testkit::Reply;
use reqwest::Method;
use serde_json::{Value, json};

use crate::flows::{campaign, people, sandbox_with_template};
use crate::helpers::{TestApp, expect_error, expect_status, spawn_app};

/// An RFC 3339 time `ms` milliseconds from now.
fn in_ms(ms: i64) -> String {
    (chrono::Utc::now() + chrono::Duration::milliseconds(ms)).to_rfc3339()
}

async fn task(app: &TestApp, body: Value) -> Value {
    app.created("/scheduled-tasks", body).await
}

fn id(record: &Value) -> String {
    record["id"].as_str().expect("id").to_owned()
}

/// Polls the task until `check` holds for its record.
async fn wait_task(app: &TestApp, task: &str, check: impl Fn(&Value) -> bool) -> Value {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let record =
            expect_status(app.get(&format!("/scheduled-tasks/{task}")).await, 200).await["data"]
                .clone();
        if check(&record) {
            return record;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the task never matched: {record:#}"
        );
        tokio::time::sleep(Duration::from_millis(30)).await;
    }
}

async fn runs(app: &TestApp, task: &str) -> Vec<Value> {
    expect_status(app.get(&format!("/scheduled-tasks/{task}/runs")).await, 200).await["data"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// A sandbox channel with its template, and a person who wrote to it (the 24-hour window is
/// open); answers the channel.
async fn open_window(app: &TestApp) -> String {
    let channel = sandbox_with_template(app, "Sandbox").await;
    let worker = app.worker("Support").await;
    app.assistant(&worker, "Ana").await;
    expect_status(
        app.send_json(
            Method::POST,
            &format!("/channels/{channel}/worker/{worker}"),
            &json!({}),
        )
        .await,
        200,
    )
    .await;
    people(app, 1).await;
    app.model.push([Reply::Text("Hello!".to_owned())]);
    let injected = app
        .send_json(
            Method::POST,
            &format!("/channels/{channel}/sandbox/inbound"),
            &json!({"from": "+351912300000", "name": "Person 0", "text": "Hi"}),
        )
        .await;
    expect_status(injected, 201).await;
    app.wait_for_messages(&person_id(app).await, |m| m.len() >= 2)
        .await;
    channel
}

async fn person_id(app: &TestApp) -> String {
    app.put_identity("p0", json!({})).await["id"]
        .as_str()
        .expect("id")
        .to_owned()
}

async fn outbox(app: &TestApp, channel: &str) -> Vec<String> {
    let listed = expect_status(
        app.get(&format!("/channels/{channel}/sandbox/outbox"))
            .await,
        200,
    )
    .await;
    listed["data"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|m| m["content"].as_str().map(str::to_owned))
        .collect()
}

#[tokio::test]
async fn tasks_that_cannot_run_are_refused_at_creation() {
    let app = spawn_app().await;
    let channel = app.sandbox_channel("Sandbox").await;
    people(&app, 1).await;
    let refused = |body: Value| {
        let app = &app;
        async move {
            expect_error(
                app.send_json(Method::POST, "/scheduled-tasks", &body).await,
                400,
                "validation_failed",
            )
            .await
        }
    };
    let base = |task_type: &str, payload: Value| json!({"name": "Reminder", "task_type": task_type, "payload": payload, "scheduled_at": in_ms(60_000)});
    let unknown = refused(base("send_fax", json!({}))).await;
    assert_eq!(unknown["details"][0]["path"], json!(["task_type"]));
    let missing = refused(base(
        "send_message",
        json!({"identity_id": "p0", "channel_id": channel}),
    ))
    .await;
    assert_eq!(missing["details"][0]["path"], json!(["payload", "message"]));
    let mistyped = refused(base(
        "set_stage",
        json!({"identity_id": "p0", "stage_id": 7}),
    ))
    .await;
    assert_eq!(
        mistyped["details"][0]["path"],
        json!(["payload", "stage_id"])
    );
    let nobody = refused(base(
        "send_message",
        json!({"identity_id": "ghost", "channel_id": channel, "message": "Hi"}),
    ))
    .await;
    assert_eq!(
        nobody["details"][0]["path"],
        json!(["payload", "identity_id"])
    );
    let no_channel = refused(base(
        "send_message",
        json!({"identity_id": "p0", "channel_id": uuid::Uuid::now_v7(), "message": "Hi"}),
    ))
    .await;
    assert_eq!(
        no_channel["details"][0]["path"],
        json!(["payload", "channel_id"])
    );
    let no_stage = refused(base(
        "set_stage",
        json!({"identity_id": "p0", "stage_id": uuid::Uuid::now_v7()}),
    ))
    .await;
    assert_eq!(
        no_stage["details"][0]["path"],
        json!(["payload", "stage_id"])
    );
    let no_campaign = refused(base("start_flow", json!({"campaign_uid": uuid::Uuid::now_v7(), "channel_uid": channel, "contact_uids": ["p0"]}))).await;
    assert_eq!(
        no_campaign["details"][0]["path"],
        json!(["payload", "campaign_uid"])
    );
    let valid = json!({"identity_id": "p0", "channel_id": channel, "message": "Hi"});
    let mut late = base("send_message", valid.clone());
    late["scheduled_at"] = json!("tomorrow at nine");
    assert_eq!(
        refused(late).await["details"][0]["path"],
        json!(["scheduled_at"])
    );
    let mut cron = base("send_message", valid.clone());
    cron["recurrence"] = json!("0 9 * *");
    assert_eq!(
        refused(cron).await["details"][0]["path"],
        json!(["recurrence"])
    );
    // A cron that never fires, with no first time given, has no first run: a 400, not a 500.
    for never in ["0 0 30 2 *", "0 0 31 4 *"] {
        let mut cron = base("send_message", valid.clone());
        cron["recurrence"] = json!(never);
        cron.as_object_mut().map(|b| b.remove("scheduled_at"));
        let error = refused(cron).await;
        assert_eq!(
            error["details"][0]["path"],
            json!(["recurrence"]),
            "{error}"
        );
    }
    let mut zone = base("send_message", valid.clone());
    zone["recurrence"] = json!("0 9 * * *");
    zone["timezone"] = json!("Mars/Olympus");
    assert_eq!(
        refused(zone).await["details"][0]["path"],
        json!(["timezone"])
    );

    // A valid one is stored with its identity resolved; other workspaces do not see it.
    let made = task(&app, base("send_message", valid)).await;
    assert_eq!(made["status"], "scheduled");
    assert_eq!(
        made["payload"]["identity_id"],
        person_id(&app).await.as_str()
    );
    assert_eq!(made["next_run_at"], made["scheduled_at"]);
    let other = app
        .bootstrap_another("Globex", "Globex HQ", "boss@globex.test")
        .await;
    expect_error(
        app.get_with(&format!("/scheduled-tasks/{}", id(&made)), &other.api_key)
            .await,
        404,
        "not_found",
    )
    .await;
    let listed = expect_status(app.get("/scheduled-tasks").await, 200).await;
    assert_eq!(listed["pagination"]["total"], 1);
    // Pause and resume refuse the wrong states.
    expect_error(
        app.send_json(
            Method::PATCH,
            &format!("/scheduled-tasks/{}/resume", id(&made)),
            &json!({}),
        )
        .await,
        409,
        "task_not_paused",
    )
    .await;
    expect_status(
        app.send_json(
            Method::PATCH,
            &format!("/scheduled-tasks/{}/pause", id(&made)),
            &json!({}),
        )
        .await,
        200,
    )
    .await;
    expect_error(
        app.send_json(
            Method::PATCH,
            &format!("/scheduled-tasks/{}/pause", id(&made)),
            &json!({}),
        )
        .await,
        409,
        "task_not_scheduled",
    )
    .await;
    expect_status(
        app.delete(&format!("/scheduled-tasks/{}", id(&made))).await,
        200,
    )
    .await;
    expect_error(
        app.get(&format!("/scheduled-tasks/{}", id(&made))).await,
        404,
        "not_found",
    )
    .await;
}

#[tokio::test]
async fn a_message_a_template_and_a_stage_run_at_their_time() {
    let app = spawn_app().await;
    let channel = open_window(&app).await;
    let stage = app.stage("Customer").await;
    let message = task(&app, json!({"name": "Reminder", "task_type": "send_message", "scheduled_at": in_ms(300),
        "payload": {"identity_id": "+351912300000", "channel_id": channel, "message": "Your table is ready"}})).await;
    let template = task(
        &app,
        json!({"name": "Shipped", "task_type": "send_template", "scheduled_at": in_ms(300),
        "payload": {"identity_id": "p0", "channel_id": channel, "template_name": "order_update",
                    "language": "en_US", "parameters": ["Ana", "#5"]}}),
    )
    .await;
    let staged = task(
        &app,
        json!({"name": "Promote", "task_type": "set_stage", "scheduled_at": in_ms(300),
        "payload": {"identity_id": "p0", "stage_id": stage, "metadata": {"by": "schedule"}}}),
    )
    .await;
    for made in [&message, &template, &staged] {
        let done = wait_task(&app, &id(made), |t| t["status"] == "completed").await;
        assert_eq!(done["run_count"], 1, "{done}");
        assert_eq!(done["next_run_at"], Value::Null);
        let runs = runs(&app, &id(made)).await;
        assert_eq!(runs.len(), 1);
        assert_eq!(runs[0]["status"], "succeeded", "{runs:?}");
        assert_eq!(runs[0]["late"], false);
    }
    let sent = outbox(&app, &channel).await;
    assert!(sent.contains(&"Your table is ready".to_owned()), "{sent:?}");
    assert!(
        sent.contains(&"Hi Ana, your order #5 has shipped.".to_owned()),
        "{sent:?}"
    );
    let person = app.put_identity("p0", json!({})).await;
    assert_eq!(person["stage"], "Customer");
    let history = expect_status(app.get("/identity/p0/stages").await, 200).await;
    assert!(history.to_string().contains("schedule"), "{history}");
    // Every message is in the conversation.
    let messages = app.wait_for_messages(&id(&person), |m| m.len() >= 4).await;
    assert!(
        messages
            .iter()
            .any(|m| m["content"] == "Your table is ready")
    );
}

#[tokio::test]
async fn a_message_outside_the_window_fails_its_run_with_a_clear_error() {
    let app = spawn_app().await;
    app.graph
        .add_template("waba-1", crate::helpers::order_update());
    let live = app.live_channel("100001").await;
    people(&app, 1).await;
    let made = task(
        &app,
        json!({"name": "Nudge", "task_type": "send_message", "scheduled_at": in_ms(100),
        "payload": {"identity_id": "p0", "channel_id": live, "message": "Still there?"}}),
    )
    .await;
    let done = wait_task(&app, &id(&made), |t| t["status"] == "failed").await;
    assert!(
        done["last_error"]
            .as_str()
            .expect("an error")
            .contains("24-hour"),
        "{done}"
    );
    let runs = runs(&app, &id(&made)).await;
    assert_eq!(runs[0]["status"], "failed");
    assert!(app.graph.sent().is_empty());
}

#[tokio::test]
async fn a_flow_and_an_assistant_follow_up_start_from_tasks() {
    let app = spawn_app().await;
    let channel = open_window(&app).await;
    let campaign = campaign(&app, &channel, "Welcome", json!({})).await;
    let flow = task(
        &app,
        json!({"name": "Monday send", "task_type": "start_flow", "scheduled_at": in_ms(200),
        "payload": {"campaign_uid": campaign, "channel_uid": channel, "contact_uids": ["p0"],
                    "configuration": {"pauseBetweenContactsMs": 0}}}),
    )
    .await;
    let done = wait_task(&app, &id(&flow), |t| t["status"] == "completed").await;
    let runs = runs(&app, &id(&flow)).await;
    let flow_uid = runs[0]["result"]["flow_uid"]
        .as_str()
        .expect("the flow's uid")
        .to_owned();
    expect_status(app.get(&format!("/flows/{flow_uid}")).await, 200).await;
    assert_eq!(done["run_count"], 1);

    app.model.push([Reply::Text(
        "Just checking in: is everything fine with your order?".to_owned(),
    )]);
    let follow = task(&app, json!({"name": "Check in", "task_type": "assistant_followup", "scheduled_at": in_ms(200),
        "payload": {"identity_id": "p0", "channel_id": channel, "instructions": "Ask whether the order arrived well"}})).await;
    wait_task(&app, &id(&follow), |t| t["status"] == "completed").await;
    let asked = app
        .model
        .last_request()
        .expect("the model was asked")
        .to_string();
    assert!(
        asked.contains("Ask whether the order arrived well"),
        "{asked}"
    );
    let sent = outbox(&app, &channel).await;
    assert!(
        sent.contains(&"Just checking in: is everything fine with your order?".to_owned()),
        "{sent:?}"
    );
}

#[tokio::test]
async fn a_paused_task_waits_and_runs_at_once_when_resumed_after_its_time() {
    let app = spawn_app().await;
    let channel = open_window(&app).await;
    let made = task(
        &app,
        json!({"name": "Later", "task_type": "send_message", "scheduled_at": in_ms(1_500),
        "payload": {"identity_id": "p0", "channel_id": channel, "message": "Paused and resumed"}}),
    )
    .await;
    expect_status(
        app.send_json(
            Method::PATCH,
            &format!("/scheduled-tasks/{}/pause", id(&made)),
            &json!({}),
        )
        .await,
        200,
    )
    .await;
    // Past its time, paused: nothing runs.
    tokio::time::sleep(Duration::from_millis(1_800)).await;
    assert!(
        runs(&app, &id(&made)).await.is_empty(),
        "a paused task does not run"
    );
    assert!(
        !outbox(&app, &channel)
            .await
            .contains(&"Paused and resumed".to_owned())
    );
    let resumed = expect_status(
        app.send_json(
            Method::PATCH,
            &format!("/scheduled-tasks/{}/resume", id(&made)),
            &json!({}),
        )
        .await,
        200,
    )
    .await;
    assert_ne!(resumed["data"]["status"], "paused", "{resumed}");
    wait_task(&app, &id(&made), |t| t["status"] == "completed").await;
    assert!(
        outbox(&app, &channel)
            .await
            .contains(&"Paused and resumed".to_owned())
    );
}

#[tokio::test]
async fn a_recurring_task_runs_again_until_deleted() {
    let app = spawn_app().await;
    let channel = open_window(&app).await;
    let stage = app.stage("Warm").await;
    // Every second (six fields: seconds first).
    let made = task(
        &app,
        json!({"name": "Tick", "task_type": "set_stage", "recurrence": "* * * * * *",
        "timezone": "Europe/Lisbon", "payload": {"identity_id": "p0", "stage_id": stage}}),
    )
    .await;
    assert_eq!(made["recurrence"], "* * * * * *");
    let ticking = wait_task(&app, &id(&made), |t| t["run_count"].as_i64() >= Some(2)).await;
    assert_eq!(ticking["status"], "scheduled", "{ticking}");
    assert!(ticking["next_run_at"].is_string());
    expect_status(
        app.delete(&format!("/scheduled-tasks/{}", id(&made))).await,
        200,
    )
    .await;
    let after_delete = stage_history(&app).await;
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    assert!(
        stage_history(&app).await <= after_delete + 1,
        "a deleted task stops recurring"
    );
    let _ = channel;
}

/// How many stage changes p0 has had.
async fn stage_history(app: &TestApp) -> usize {
    expect_status(app.get("/identity/p0/stages").await, 200).await["data"]
        .as_array()
        .map_or(0, Vec::len)
}

#[tokio::test]
async fn schedules_are_bounded_an_interval_a_quota_and_the_runs_kept() {
    let app = crate::helpers::spawn_app_with(|s| {
        s.actors.scheduler_min_interval_secs = 60;
        s.actors.scheduler_task_quota = 2;
        s.actors.scheduler_runs_kept = 2;
    })
    .await;
    let _channel = open_window(&app).await;
    let stage = app.stage("Warm").await;
    let every = |cron: &str| {
        json!({"name": "Tick", "task_type": "set_stage", "recurrence": cron,
               "payload": {"identity_id": "p0", "stage_id": stage}})
    };

    // More often than the operator's minimum: refused naming the recurrence.
    for cron in ["* * * * * *", "*/30 * * * * *"] {
        let response = app
            .send_json(Method::POST, "/scheduled-tasks", &every(cron))
            .await;
        let error = expect_error(response, 400, "validation_failed").await;
        assert_eq!(error["details"][0]["path"], json!(["recurrence"]), "{cron}");
    }

    // Two active tasks fill the quota; a third waits until one is deleted.
    let first = task(&app, every("* * * * *")).await;
    task(&app, every("0 9 * * *")).await;
    let third = app
        .send_json(Method::POST, "/scheduled-tasks", &every("0 10 * * *"))
        .await;
    expect_error(third, 409, "task_quota_reached").await;
    expect_status(
        app.delete(&format!("/scheduled-tasks/{}", id(&first)))
            .await,
        200,
    )
    .await;
    task(&app, every("0 10 * * *")).await;
}

#[tokio::test]
async fn only_the_newest_runs_of_a_task_are_kept() {
    let app = crate::helpers::spawn_app_with(|s| {
        s.actors.scheduler_min_interval_secs = 1;
        s.actors.scheduler_runs_kept = 2;
    })
    .await;
    let _channel = open_window(&app).await;
    let stage = app.stage("Warm").await;
    let made = task(
        &app,
        json!({"name": "Tick", "task_type": "set_stage", "recurrence": "* * * * * *",
               "payload": {"identity_id": "p0", "stage_id": stage}}),
    )
    .await;
    let ran = wait_task(&app, &id(&made), |t| t["run_count"].as_i64() >= Some(4)).await;
    assert!(ran["run_count"].as_i64() >= Some(4), "{ran}");
    let kept = runs(&app, &id(&made)).await;
    assert!(kept.len() <= 3, "{} runs kept: {kept:?}", kept.len());
    expect_status(
        app.delete(&format!("/scheduled-tasks/{}", id(&made))).await,
        200,
    )
    .await;
}

#[tokio::test]
async fn a_time_without_offset_is_read_in_the_tasks_timezone_and_a_stage_may_be_named() {
    let app = spawn_app().await;
    let _channel = open_window(&app).await;
    let stage = app.stage("Warm lead").await;
    let payload = json!({"identity_id": "p0", "stage_id": "Warm lead"});
    let made = task(
        &app,
        json!({"name": "Morning", "task_type": "set_stage", "scheduled_at": "2027-12-01T09:00:00",
               "timezone": "America/New_York", "payload": payload}),
    )
    .await;
    // Nine in New York in December is 14:00 UTC; the stage name is stored as its id.
    assert_eq!(made["scheduled_at"], "2027-12-01T14:00:00Z", "{made}");
    assert_eq!(made["payload"]["stage_id"], stage.as_str(), "{made}");

    let unknown = json!({"name": "Morning", "task_type": "set_stage",
                         "scheduled_at": "2027-12-01T09:00:00",
                         "payload": {"identity_id": "p0", "stage_id": "No such stage"}});
    let response = app
        .send_json(Method::POST, "/scheduled-tasks", &unknown)
        .await;
    let error = expect_error(response, 400, "validation_failed").await;
    assert_eq!(
        error["details"][0]["path"],
        json!(["payload", "stage_id"]),
        "{error}"
    );
}

#[tokio::test]
async fn a_task_sends_a_file_by_a_link_the_egress_policy_allows() {
    let app = spawn_app().await;
    let channel = open_window(&app).await;
    let send = |media: Value| {
        json!({"name": "Invoice", "task_type": "send_message", "scheduled_at": in_ms(300),
               "payload": {"identity_id": "p0", "channel_id": channel, "media": media}})
    };
    let refusals = [
        (
            json!({"kind": "document", "link": "http://files.example.com/a.pdf"}),
            ["payload", "media", "link"],
        ),
        (
            json!({"kind": "document", "link": "https://10.0.0.7/a.pdf"}),
            ["payload", "media", "link"],
        ),
        (
            json!({"kind": "gif", "media_id": "1"}),
            ["payload", "media", "kind"],
        ),
    ];
    for (media, field) in refusals {
        let refused = app
            .send_json(Method::POST, "/scheduled-tasks", &send(media))
            .await;
        let body = expect_error(refused, 400, "validation_failed").await;
        assert_eq!(body["details"][0]["path"], json!(field), "{body}");
    }
    let mut both = send(json!({"kind": "image", "media_id": "1"}));
    both["payload"]["message"] = json!("Hi");
    let refused = app.send_json(Method::POST, "/scheduled-tasks", &both).await;
    let body = expect_error(refused, 400, "validation_failed").await;
    assert_eq!(body["details"][0]["path"], json!(["payload", "media"]));

    let file = send(
        json!({"kind": "document", "link": "https://files.example.com/invoice.pdf",
                           "file_name": "invoice.pdf", "caption": "Your invoice"}),
    );
    let made = task(&app, file).await;
    assert_eq!(made["payload"]["media"]["file_name"], "invoice.pdf");
    let done = wait_task(&app, &id(&made), |t| t["status"] == "completed").await;
    assert_eq!(done["run_count"], 1, "{done}");
    let sent = outbox(&app, &channel).await;
    assert!(
        sent.contains(&"[document: invoice.pdf] Your invoice".to_owned()),
        "{sent:?}"
    );
}
