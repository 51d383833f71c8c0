//! How close a campaign flow comes to a number's full Meta throughput without provoking Meta's
//! limits.
//!
//! Starts Parley in-process (SQLite, or `PARLEY_BENCH_DATABASE_URL`) with the testkit fake Graph
//! API enforcing 80 messages per second per number (130429 above it) and the pair rate (131056),
//! and reporting every accepted message delivered after 50 ms through signed status webhooks.
//! A live channel configured for 80 msg/s sends a campaign to N identities (default 5,000) in
//! one flow with `maxConcurrentMessages` 10 and no pause. Reports:
//! - achieved msg/s from the flow's start to its last send, over the 80 msg/s cap (the ratio);
//! - how many 130429 and 131056 answers the flow provoked;
//! - the time until the flow ended `completed` (every delivery report in);
//! - the bench process's peak resident memory (Parley, the fakes and the client share it) and
//!   its growth during the flow.
//!
//! Run: `cargo run --release -p parley-benches --bin flow_send_rate -- [recipients]`

use std::time::{Duration, Instant};

use anyhow::Context;
use futures_util::StreamExt;
use parley_benches::{BenchServer, memory_kib};
use serde_json::{Value, json};

const SECRET: &str = "bench-secret";
const TOKEN: &str = "EAAB-bench-token";
const NUMBER: &str = "106540352242922";
const CAP: u32 = 80;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let recipients: usize = std::env::args()
        .nth(1)
        .map_or(Ok(5_000), |a| a.parse())
        .context("recipients")?;
    let server = BenchServer::start(|settings| {
        settings.whatsapp.app_secret = Some(SECRET.into());
        settings.whatsapp.rate_per_sec = CAP;
    })
    .await?;
    server.graph.limit_per_second(CAP);
    server.graph.limit_pair_spacing(Duration::from_secs(6));
    server.graph.report_statuses(
        &format!("{}/webhooks/waba", server.base),
        SECRET,
        Duration::from_millis(50),
        &["delivered"],
    );
    server.graph.add_template(
        "waba-bench",
        json!({"name": "order_update", "language": "en_US", "status": "APPROVED", "category": "UTILITY",
               "id": "7001", "components": [{"type": "BODY", "text": "Hi {{1}}, your order {{2}} has shipped."}]}),
    );
    let channel = server
        .post(
            "/channels/waba",
            &json!({"name": "Bench line", "accessToken": TOKEN, "phoneNumberId": NUMBER,
                    "businessId": "waba-bench"}),
        )
        .await?;
    let channel = channel["id"].as_str().context("channel id")?.to_owned();
    let campaign = server
        .post(
            "/campaigns",
            &json!({"channelUid": channel, "name": "Bench", "status": "ACTIVE",
                    "templateName": "order_update", "templateParamsStrategy": "USE_CONTACT_ASSOCIATION",
                    "templateParameters": {"1": "name", "2": "external_id"}}),
        )
        .await?;
    let campaign = campaign["uid"].as_str().context("campaign uid")?.to_owned();
    let contacts = identities(&server, recipients).await?;

    let rss_before = memory_kib("VmRSS");
    let started = Instant::now();
    let flow = server
        .post(
            "/flows",
            &json!({"channelUid": channel, "campaignUid": campaign, "contactUids": contacts,
                    "configuration": {"pauseBetweenContactsMs": 0, "maxConcurrentMessages": 10,
                                      "timeoutMs": 60_000}}),
        )
        .await?;
    let created = started.elapsed();
    let uid = flow["uid"].as_str().context("flow uid")?.to_owned();
    let (sends_done, ended, record) = follow(&server, &uid, recipients, started).await?;
    let sent = server.graph.sent_count();
    let rejected = server.graph.rejected();
    let count = |code: i64| rejected.iter().filter(|(_, c)| *c == code).count();
    let sending = sends_done.saturating_sub(created).as_secs_f64();
    let rate = sent as f64 / sending;
    println!(
        "flow_send_rate: {recipients} recipients, maxConcurrentMessages 10, no pause, Meta's cap {CAP} msg/s per number, {}",
        server.database_kind()
    );
    println!(
        "{:<44} {:>12}",
        "flow created (contacts resolved, stored)",
        format!("{:.2} s", created.as_secs_f64())
    );
    println!("{:<44} {:>12}", "sends accepted by Meta", sent);
    println!(
        "{:<44} {:>12}",
        "achieved msg/s (start to last send)",
        format!("{rate:.1}")
    );
    println!(
        "{:<44} {:>12}",
        "ratio over the cap",
        format!("{:.3}", rate / f64::from(CAP))
    );
    println!("{:<44} {:>12}", "130429 answers provoked", count(130_429));
    println!("{:<44} {:>12}", "131056 answers provoked", count(131_056));
    println!(
        "{:<44} {:>12}",
        "flow ended",
        format!(
            "{} after {:.1} s",
            record["status"].as_str().unwrap_or("?"),
            ended.as_secs_f64()
        )
    );
    println!(
        "{:<44} {:>12}",
        "peak RSS of the bench process",
        format!("{} MiB", memory_kib("VmHWM") / 1024)
    );
    println!(
        "{:<44} {:>12}",
        "RSS growth during the flow",
        format!(
            "{} MiB",
            memory_kib("VmHWM").saturating_sub(rss_before) / 1024
        )
    );
    server.stop().await
}

/// `count` identities with distinct phones, made 16 at a time; answers their external ids.
async fn identities(server: &BenchServer, count: usize) -> anyhow::Result<Vec<String>> {
    let made: Vec<anyhow::Result<String>> = futures_util::stream::iter(0..count)
        .map(|i| async move {
            let external = format!("bench-{i}");
            server
                .send(
                    reqwest::Method::PUT,
                    &format!("/identity/{external}"),
                    &json!({"name": format!("Person {i}"), "phone": format!("+35191{i:07}")}),
                )
                .await?;
            Ok(external)
        })
        .buffered(16)
        .collect()
        .await;
    made.into_iter().collect()
}

/// Polls the flow: answers when (since `started`) its last recipient was sent and when it
/// ended, with its record.
async fn follow(
    server: &BenchServer,
    uid: &str,
    recipients: usize,
    started: Instant,
) -> anyhow::Result<(Duration, Duration, Value)> {
    let mut sends_done = None;
    loop {
        let flow = server
            .send(reqwest::Method::GET, &format!("/flows/{uid}"), &json!({}))
            .await?["data"]
            .clone();
        if sends_done.is_none() && server.graph.sent_count() >= recipients {
            sends_done = Some(started.elapsed());
        }
        let status = flow["status"].as_str().unwrap_or_default();
        if !["queued", "running"].contains(&status) {
            return Ok((
                sends_done.unwrap_or_else(|| started.elapsed()),
                started.elapsed(),
                flow,
            ));
        }
        anyhow::ensure!(
            started.elapsed() < Duration::from_secs(900),
            "the flow never ended: {flow}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
