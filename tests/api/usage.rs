//! Usage and quotas: what a workspace used (counted with each fact, read by day, assistant,
//! channel and worker), the operator's quotas and what happens past them (429 with the quota
//! named, a WhatsApp message handed to a person, a flow paused until the quota is raised), and
//! requests per second per key with the IETF `RateLimit` headers.

use std::time::Duration;

use parley_testkit::graph::text_message;
use reqwest::Method;
use serde_json::{Value, json};

use crate::console::Tab;
use crate::event_webhooks::{Receiver, endpoint};
use crate::flows::{campaign, people, sandbox_with_template, wait_flow};
use crate::helpers::{TestApp, expect_error, expect_status, order_update_send, spawn_app_with};

const OPERATOR: &str = "usage-operator-token";
const NUMBER: &str = "106540352242933";
const SHEENA: &str = "16505551234";

async fn app() -> TestApp {
    spawn_app_with(|s| s.server.operator_token = Some(OPERATOR.into())).await
}

/// `PUT /admin/workspaces/{id}/quotas` with `key`.
async fn put_quotas(app: &TestApp, key: &str, workspace: i64, body: &Value) -> reqwest::Response {
    let path = format!("/admin/workspaces/{workspace}/quotas");
    app.send_json_with(Method::PUT, &path, key, body).await
}

/// Sets the owner's workspace's quotas as the operator.
async fn set_quotas(app: &TestApp, body: Value) -> Value {
    let workspace = app.owner.workspace_id;
    expect_status(put_quotas(app, OPERATOR, workspace, &body).await, 200).await
}

/// `GET /usage` with `query`, as the owner.
async fn usage(app: &TestApp, query: &str) -> Value {
    expect_status(app.get(&format!("/usage{query}")).await, 200).await["data"].clone()
}

/// The owner's conversations, as listed.
async fn conversations(app: &TestApp) -> Vec<Value> {
    let listed = expect_status(app.get("/conversations").await, 200).await;
    listed["data"].as_array().expect("list").clone()
}

/// Polls `GET /usage` until `check` holds for its totals.
async fn wait_usage(app: &TestApp, check: impl Fn(&Value) -> bool) -> Value {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    loop {
        let read = usage(app, "").await;
        if check(&read["totals"]) {
            return read;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "usage never matched: {read:#}"
        );
        tokio::time::sleep(Duration::from_millis(30)).await;
    }
}

#[tokio::test]
async fn usage_is_counted_with_each_fact_and_read_by_day_assistant_channel_and_worker() {
    let app = app().await;
    let (assistant, channel) = app.chat_channel("Echo.", json!({})).await;
    app.put_identity("ana", json!({"name": "Ana"})).await;
    let (mut prompt, mut completion) = (0, 0);
    for text in ["Hello", "Where is my order?"] {
        let answer = expect_status(app.chat("ana", &channel, text).await, 200).await;
        prompt += answer["data"]["usage"]["prompt_tokens"]
            .as_i64()
            .expect("prompt");
        completion += answer["data"]["usage"]["completion_tokens"]
            .as_i64()
            .expect("completion");
    }
    assert!(prompt > 0 && completion > 0);

    let read = usage(&app, "").await;
    assert_eq!(read["group_by"], "day");
    assert_eq!(read["totals"]["model_prompt_tokens"], prompt, "{read:#}");
    assert_eq!(read["totals"]["model_completion_tokens"], completion);
    // A chat's reply goes to its caller, not through WhatsApp: no message sent is counted.
    assert_eq!(read["totals"]["messages_sent_service"], 0);
    assert_eq!(read["buckets"].as_array().map(Vec::len), Some(1));
    assert_eq!(read["buckets"][0]["metrics"]["model_prompt_tokens"], prompt);
    assert!(read["buckets"][0]["day"].is_string());
    assert!(read["quotas"]["model_tokens_per_month"].is_null());

    let by_assistant = usage(&app, "?group_by=assistant").await;
    assert_eq!(
        by_assistant["buckets"][0]["assistant_id"],
        assistant.as_str()
    );
    let by_channel = usage(&app, "?group_by=channel").await;
    assert_eq!(by_channel["buckets"][0]["channel_id"], channel.as_str());
    let by_worker = usage(&app, "?group_by=worker").await;
    let assistant_record =
        expect_status(app.get(&format!("/assistant/{assistant}")).await, 200).await;
    assert_eq!(
        by_worker["buckets"][0]["worker_id"], assistant_record["data"]["worker_id"],
        "{by_worker:#}"
    );

    // The conversation carries its own totals.
    let listed = conversations(&app).await;
    assert_eq!(listed[0]["prompt_tokens"], prompt, "{listed:#?}");
    assert_eq!(listed[0]["completion_tokens"], completion);

    // A template sent through a channel counts under its category at Meta.
    let promos = sandbox_with_template(&app, "Promos").await;
    expect_status(
        app.send_template(&promos, &order_update_send("+351912300009"))
            .await,
        200,
    )
    .await;
    wait_usage(&app, |totals| totals["messages_sent_utility"] == 1).await;

    // Another workspace sees none of it.
    let other = app
        .bootstrap_another("Other", "Other", "o@other.test")
        .await;
    let theirs = expect_status(app.get_with("/usage", &other.api_key).await, 200).await;
    assert_eq!(theirs["data"]["totals"]["model_prompt_tokens"], 0);
    assert_eq!(theirs["data"]["buckets"], json!([]));

    // The operator reads the installation's, and Prometheus has its totals by metric only.
    let refused = app.get("/admin/usage").await;
    expect_error(refused, 403, "forbidden").await;
    let all = expect_status(app.get_with("/admin/usage", OPERATOR).await, 200).await;
    assert_eq!(all["data"]["totals"]["model_prompt_tokens"], prompt);
    let metrics = app.metrics(OPERATOR).await;
    let line = format!("parley_usage_total{{metric=\"model_prompt_tokens\"}} {prompt}");
    assert!(metrics.lines().any(|l| l == line), "{line} in the metrics");
}

#[tokio::test]
async fn usage_reads_that_cannot_be_answered_are_refused_naming_the_field() {
    let app = app().await;
    for (query, field) in [
        ("?group_by=week", "group_by"),
        ("?from=2026-13-01", "from"),
        ("?from=2026-11-20&to=2026-11-01", "from"),
        ("?from=2024-01-01&to=2026-01-01", "to"),
    ] {
        let refused = app.get(&format!("/usage{query}")).await;
        let body = expect_error(refused, 400, "validation_failed").await;
        assert_eq!(
            body["details"][0]["path"],
            json!([field]),
            "{query}: {body}"
        );
    }
}

#[tokio::test]
async fn only_the_operator_sets_quotas_and_bad_ones_are_refused_naming_the_field() {
    let app = app().await;
    let workspace = app.owner.workspace_id;
    // A workspace's admin cannot raise its own quota.
    let own = put_quotas(&app, &app.owner.api_key, workspace, &json!({})).await;
    let body = expect_error(own, 403, "forbidden").await;
    assert!(
        body["message"]
            .as_str()
            .is_some_and(|m| m.contains("operator")),
        "{body}"
    );
    for (quota, path) in [
        (
            json!({"model_tokens_per_month": -1}),
            json!(["model_tokens_per_month"]),
        ),
        (
            json!({"messages_per_day": 1.5}),
            json!(["messages_per_day"]),
        ),
        (
            json!({"messages_per_day": 10_000_000_000_i64}),
            json!(["messages_per_day"]),
        ),
        (
            json!({"requests_per_second_per_key": 0}),
            json!(["requests_per_second_per_key"]),
        ),
        (
            json!({"messages_per_day_by_category": {"promotions": 5}}),
            json!(["messages_per_day_by_category", "promotions"]),
        ),
        (
            json!({"messages_per_day_by_category": {"marketing": -5}}),
            json!(["messages_per_day_by_category", "marketing"]),
        ),
    ] {
        let refused = put_quotas(&app, OPERATOR, workspace, &quota).await;
        let body = expect_error(refused, 400, "validation_failed").await;
        assert_eq!(body["details"][0]["path"], path, "{quota}: {body}");
    }
    let missing = put_quotas(&app, OPERATOR, 999_999, &json!({})).await;
    expect_error(missing, 404, "not_found").await;

    let set = set_quotas(
        &app,
        json!({"model_tokens_per_month": 5000, "messages_per_day_by_category": {"marketing": 10}}),
    )
    .await;
    assert_eq!(set["data"]["model_tokens_per_month"], 5000);
    assert_eq!(set["data"]["messages_per_day_by_category"]["marketing"], 10);
    assert!(set["data"]["messages_per_day"].is_null());
    let read = expect_status(
        app.get_with(&format!("/admin/workspaces/{workspace}/quotas"), OPERATOR)
            .await,
        200,
    )
    .await;
    assert_eq!(read["data"], set["data"]);
    assert_eq!(usage(&app, "").await["quotas"], set["data"]);
}

#[tokio::test]
async fn past_the_token_quota_the_api_hears_429_and_whatsapp_goes_to_a_person() {
    let app = app().await;
    let channel = app.live_channel(NUMBER).await;
    let receiver = Receiver::start().await;
    endpoint(&app, &receiver.url, json!(["usage.quota_reached"])).await;
    set_quotas(&app, json!({"model_tokens_per_month": 1})).await;

    // Under the quota: answered.
    let first = text_message(NUMBER, SHEENA, "Sheena", "wamid.Q1", "Hello");
    assert_eq!(app.webhook(Some(&channel), &first).await, 200);
    app.wait_for_sends(1).await;
    let asked = app.model.requests().len();
    // The person's message and the reply Meta accepted are counted (a reply is `service`).
    wait_usage(&app, |totals| {
        totals["messages_received"] == 1 && totals["messages_sent_service"] == 1
    })
    .await;

    // Past it: an API caller hears the quota and when it resets.
    app.put_identity("ana", json!({})).await;
    let refused = app.chat("ana", &channel, "Hi").await;
    let retry_after: u64 = refused.headers()["retry-after"]
        .to_str()
        .expect("text")
        .parse()
        .expect("seconds");
    assert!(retry_after >= 1);
    let body = expect_error(refused, 429, "quota_exceeded").await;
    assert_eq!(
        body["details"][0]["path"],
        json!(["model_tokens_per_month"])
    );

    // A person on WhatsApp is never dropped: stored and handed to a person, with the reason.
    let second = text_message(NUMBER, SHEENA, "Sheena", "wamid.Q2", "Are you there?");
    assert_eq!(app.webhook(Some(&channel), &second).await, 200);
    app.wait_for_messages("+16505551234", |all| {
        all.iter().any(|m| m["content"] == "Are you there?")
    })
    .await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let handed = loop {
        let listed = conversations(&app).await;
        if let Some(c) = listed.iter().find(|c| c["mode"] == "human") {
            break c.clone();
        }
        assert!(tokio::time::Instant::now() < deadline, "{listed:#?}");
        tokio::time::sleep(Duration::from_millis(30)).await;
    };
    let reason = handed["handoff_reason"].as_str().expect("reason");
    assert!(reason.starts_with("quota_exceeded"), "{reason}");
    assert_eq!(app.graph.sent().len(), 1, "nothing answered past the quota");
    assert_eq!(app.model.requests().len(), asked, "the model was not asked");

    // The workspace heard of it once.
    let told = receiver.wait_for(1).await;
    let event = told[0].json();
    assert_eq!(event["type"], "usage.quota_reached");
    assert_eq!(event["data"]["quota"], "model_tokens_per_month");
    assert_eq!(event["data"]["limit"], 1);
    // The endpoint took it: a delivery counted.
    wait_usage(&app, |totals| totals["event_deliveries"] == 1).await;

    // Lifted: the model answers again.
    set_quotas(&app, json!({})).await;
    expect_status(app.chat("ana", &channel, "Hi again").await, 200).await;
}

#[tokio::test]
async fn the_daily_message_quota_refuses_sends_and_pauses_a_flow_until_it_is_raised() {
    let app = app().await;
    let sandbox = sandbox_with_template(&app, "Sandbox").await;
    set_quotas(&app, json!({"messages_per_day": 2})).await;
    let send = order_update_send("+351912399999");
    expect_status(app.send_template(&sandbox, &send).await, 200).await;

    let campaign = campaign(&app, &sandbox, "Welcome", json!({})).await;
    let people = people(&app, 3).await;
    let flow = app
        .created(
            "/flows",
            json!({"channelUid": sandbox, "campaignUid": campaign, "contactUids": people,
                   "configuration": {"pauseBetweenContactsMs": 0, "maxConcurrentMessages": 1}}),
        )
        .await;
    let uid = flow["uid"].as_str().expect("uid").to_owned();
    let paused = wait_flow(&app, &uid, |f| f["status"] == "paused").await;
    let reason = paused["metadata"]["reason"].as_str().expect("reason");
    assert!(reason.starts_with("quota_exceeded"), "{paused:#}");
    assert!(reason.contains("messages_per_day"), "{reason}");
    assert_eq!(paused["statistics"]["delivered"], 1, "{paused:#}");

    // The send endpoint is refused too, naming the quota.
    let refused = app.send_template(&sandbox, &send).await;
    assert!(refused.headers().contains_key("retry-after"));
    let body = expect_error(refused, 429, "quota_exceeded").await;
    assert_eq!(body["details"][0]["path"], json!(["messages_per_day"]));

    // Raised: the flow goes on by itself and reaches everyone.
    set_quotas(&app, json!({"messages_per_day": 100})).await;
    let done = wait_flow(&app, &uid, |f| f["status"] == "completed").await;
    assert_eq!(done["statistics"]["delivered"], 3, "{done:#}");
    assert!(done["metadata"]["reason"].is_null(), "{done:#}");
    let read = usage(&app, "").await;
    assert_eq!(read["totals"]["messages_sent_utility"], 4);
}

#[tokio::test]
async fn a_keys_requests_per_second_are_capped_and_told_in_ratelimit_headers() {
    let app = app().await;
    let other = app
        .bootstrap_another("Other", "Other", "o@other.test")
        .await;
    set_quotas(&app, json!({"requests_per_second_per_key": 2})).await;

    let first = app.get("/workers").await;
    assert_eq!(first.status(), 200);
    assert_eq!(first.headers()["ratelimit-policy"], "\"per-key\";q=2;w=1");
    let standing = first.headers()["ratelimit"]
        .to_str()
        .expect("text")
        .to_owned();
    assert!(standing.starts_with("\"per-key\";r="), "{standing}");

    // Two a second: a quick burst meets the cap.
    let mut refused = None;
    for _ in 0..10 {
        let response = app.get("/workers").await;
        if response.status() == 429 {
            refused = Some(response);
            break;
        }
    }
    let refused = refused.expect("a request past the cap");
    assert!(refused.headers().contains_key("retry-after"));
    assert!(
        refused.headers()["ratelimit"]
            .to_str()
            .expect("text")
            .contains("r=0")
    );
    let body = expect_error(refused, 429, "quota_exceeded").await;
    assert_eq!(
        body["details"][0]["path"],
        json!(["requests_per_second_per_key"])
    );

    // Another workspace's key is not limited, nor told of limits.
    let theirs = app.get_with("/workers", &other.api_key).await;
    assert_eq!(theirs.status(), 200);
    assert!(!theirs.headers().contains_key("ratelimit-policy"));
}

#[tokio::test]
async fn the_console_shows_the_months_usage_against_the_quotas() {
    let app = app().await;
    let (_, channel) = app.chat_channel("Echo.", json!({})).await;
    app.put_identity("ana", json!({})).await;
    let answer = expect_status(app.chat("ana", &channel, "Hello").await, 200).await;
    let usage = &answer["data"]["usage"];
    let tokens = usage["prompt_tokens"].as_i64().expect("prompt")
        + usage["completion_tokens"].as_i64().expect("completion");
    set_quotas(
        &app,
        json!({"model_tokens_per_month": tokens, "messages_per_day_by_category": {"marketing": 50}}),
    )
    .await;

    let mut tab = Tab::new(&app);
    tab.sign_in(&app.owner.api_key).await;
    let page = tab.get("/console/usage").await;
    assert_eq!(page.status, reqwest::StatusCode::OK);
    let row = |name: &str| {
        let start = page
            .body
            .find(&format!("data-quota=\"{name}\""))
            .unwrap_or_else(|| panic!("a row of {name}: {}", page.body));
        let end = page.body[start..].find("</tr>").expect("row end") + start;
        page.body[start..end].to_owned()
    };
    let tokens_row = row("Model tokens");
    assert!(
        tokens_row.contains(&format!("<td>{tokens} ")),
        "{tokens_row}"
    );
    assert!(
        tokens_row.contains("reached"),
        "the quota is used up: {tokens_row}"
    );
    let marketing = row("marketing");
    assert!(marketing.contains("<td>50"), "{marketing}");
    assert!(!marketing.contains("reached"));
    assert!(page.body.contains("data-metric=\"model_prompt_tokens\""));
}

/// Runs `parley admin` with `args` against the app, with the operator's token; answers its
/// exit status and what it printed.
async fn parley_admin(app: &TestApp, args: &[&str]) -> (bool, String, String) {
    let mut all: Vec<String> = vec!["admin".to_owned()];
    all.extend(args.iter().map(|a| (*a).to_owned()));
    all.extend(["--url".to_owned(), app.address.clone()]);
    // The test's runtime serves the app: wait for the command off it.
    let output = tokio::task::spawn_blocking(move || {
        std::process::Command::new(env!("CARGO_BIN_EXE_parley"))
            .args(&all)
            .env("PARLEY_OPERATOR_TOKEN", OPERATOR)
            .env("PARLEY_LOG", "warn")
            .output()
            .expect("run parley admin")
    })
    .await
    .expect("joined");
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[tokio::test]
async fn the_operator_sets_quotas_and_reads_usage_with_the_cli() {
    let app = app().await;
    let workspace = app.owner.workspace_id.to_string();
    let (ok, printed, errors) = parley_admin(
        &app,
        &[
            "quota",
            "--workspace",
            &workspace,
            "--messages-per-day",
            "40",
            "--messages-per-day-of",
            "marketing=7",
        ],
    )
    .await;
    assert!(ok, "{printed} {errors}");
    let set: Value = serde_json::from_str(&printed).expect("JSON");
    assert_eq!(set["messages_per_day"], 40);
    assert_eq!(set["messages_per_day_by_category"]["marketing"], 7);
    assert_eq!(usage(&app, "").await["quotas"], set);

    // A bad value is the server's refusal, said.
    let (ok, _, errors) = parley_admin(
        &app,
        &[
            "quota",
            "--workspace",
            &workspace,
            "--messages-per-day-of",
            "promo=7",
        ],
    )
    .await;
    assert!(!ok);
    assert!(errors.contains("400"), "{errors}");

    let (ok, printed, errors) = parley_admin(
        &app,
        &["usage", "--workspace", &workspace, "--group-by", "channel"],
    )
    .await;
    assert!(ok, "{printed} {errors}");
    let read: Value = serde_json::from_str(&printed).expect("JSON");
    assert_eq!(read["group_by"], "channel");
    assert_eq!(read["totals"]["messages_received"], 0);
}
