//! Fairness between workspaces on one node: a quiet workspace's webhook-to-reply latency at a
//! steady rate, alone and then while another workspace floods the node with a burst.
//!
//! - Alone: workspace B's people write at `rate` messages per second (open loop: each webhook
//!   posted on time whatever the answers before it) for `quiet` messages.
//! - Beside a burst: the same, while workspace A posts `burst` webhooks as fast as 64 posts in
//!   flight allow.
//!
//! Each phase reports B's latency from the webhook's post to the fake Graph API accepting the
//! reply; the ratio of the p99s is the figure (goal ≤ 1.5×). Both workspaces are on one
//! server with instant fakes; their people and numbers are distinct.
//!
//! Run: `cargo run --release -p parley-benches --bin tenant_fairness -- [burst] [--rate R] [--quiet N] [--in-flight N]`

use std::collections::HashMap;
use std::time::{Duration, Instant};

use anyhow::Context;
use futures_util::StreamExt;
use parley::tenancy::{BootstrapRequest, bootstrap};
use parley_actors::whatsapp::signature;
use parley_benches::{BenchServer, Percentiles, ms};
use parley_testkit::graph::text_message;
use serde_json::json;

const SECRET: &str = "bench-secret";
const BUSY_NUMBER: &str = "106540352242001";
const QUIET_NUMBER: &str = "106540352242002";
/// Posts in flight of the busy workspace's burst, unless `--in-flight` says otherwise.
const BURST_IN_FLIGHT: usize = 64;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let (mut burst, mut rate, mut quiet) = (5000_usize, 20.0_f64, 200_usize);
    let mut in_flight = BURST_IN_FLIGHT;
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--in-flight" => in_flight = args.next().context("--in-flight N")?.parse()?,
            "--rate" => rate = args.next().context("--rate R")?.parse()?,
            "--quiet" => quiet = args.next().context("--quiet N")?.parse()?,
            other => burst = other.parse().context("burst")?,
        }
    }
    let server = BenchServer::start(|settings| {
        settings.whatsapp.app_secret = Some(SECRET.into());
        settings.whatsapp.pair_burst = 1000;
        settings.whatsapp.rate_per_sec = 100_000;
    })
    .await?;
    let channel = |number: &str| json!({"name": "Bench line", "accessToken": "t", "phoneNumberId": number, "businessId": "w"});
    let (_, busy) = server
        .assistant_channel("Echo.", &channel(BUSY_NUMBER))
        .await?;
    let db = parley_persistence::connect(server.database_url()).await?;
    let other = bootstrap(
        &db,
        &BootstrapRequest {
            workspace: "Quiet".to_owned(),
            business: "Quiet".to_owned(),
            email: None,
        },
    )
    .await?;
    db.close().await?;
    let (_, quiet_channel) = server
        .assistant_channel_as(&other.api_key, "Echo.", &channel(QUIET_NUMBER))
        .await?;
    let busy_url = format!("{}/webhooks/waba/{busy}", server.base);
    let quiet_url = format!("{}/webhooks/waba/{quiet_channel}", server.base);

    // Alone.
    let alone = steady(&quiet_url, QUIET_NUMBER, "1415500", quiet, rate).await?;
    wait_for(&server, quiet).await?;
    let alone = latencies(&server, &alone)?;

    // Beside the burst: both start together.
    let sent_before = server.graph.sent_count();
    let burst_bodies: Vec<String> = (0..burst)
        .map(|n| {
            let from = format!("1415600{n:04}");
            text_message(
                BUSY_NUMBER,
                &from,
                "Busy",
                &format!("wamid.busy{n}"),
                "hello",
            )
            .to_string()
        })
        .collect();
    let flood = tokio::spawn(post_burst(busy_url, burst_bodies, in_flight));
    let beside = steady(&quiet_url, QUIET_NUMBER, "1415700", quiet, rate).await?;
    flood.await.context("the burst's task")??;
    wait_for(&server, sent_before + burst + quiet).await?;
    let beside = latencies(&server, &beside)?;

    println!(
        "tenant_fairness: workspace B at {rate:.0} msg/s ({quiet} messages), alone and beside workspace A's burst of {burst} ({in_flight} posts in flight), {}, instant fakes",
        server.database_kind()
    );
    println!("{:<30} {:>14} {:>14}", "B's webhook -> reply", "p50", "p99");
    for (label, figures) in [("alone", &alone), ("beside the burst", &beside)] {
        println!(
            "{label:<30} {:>14} {:>14}",
            ms(figures.p50),
            ms(figures.p99)
        );
    }
    println!(
        "ratio p99 beside/alone: {:.2}",
        beside.p99.as_secs_f64() / alone.p99.as_secs_f64()
    );
    server.stop().await?;
    Ok(())
}

/// Posts `count` webhooks from distinct people (`prefix` and a number) to `url` at `rate` per
/// second, each on its time; answers each sender with its post time.
async fn steady(
    url: &str,
    number: &str,
    prefix: &str,
    count: usize,
    rate: f64,
) -> anyhow::Result<Vec<(String, Instant)>> {
    let http = reqwest::Client::new();
    let start = tokio::time::Instant::now();
    let spacing = Duration::from_secs_f64(1.0 / rate);
    let mut posts = Vec::with_capacity(count);
    for n in 0..count {
        let from = format!("{prefix}{n:04}");
        let body = text_message(number, &from, "Quiet", &format!("wamid.{from}"), "hello");
        let request = signed(&http, url, body.to_string());
        let due = start + spacing.mul_f64(n as f64);
        posts.push(tokio::spawn(async move {
            tokio::time::sleep_until(due).await;
            let posted = Instant::now();
            let status = request.send().await?.status();
            anyhow::ensure!(status.is_success(), "webhook answered {status}");
            anyhow::Ok((from, posted))
        }));
    }
    let mut posted = Vec::with_capacity(count);
    for post in posts {
        posted.push(post.await.context("a post")??);
    }
    Ok(posted)
}

/// Posts every body to `url`, `in_flight` at a time.
async fn post_burst(url: String, bodies: Vec<String>, in_flight: usize) -> anyhow::Result<()> {
    let http = reqwest::Client::new();
    let results: Vec<anyhow::Result<()>> = futures_util::stream::iter(bodies)
        .map(|body| {
            let request = signed(&http, &url, body);
            async move {
                let status = request.send().await?.status();
                anyhow::ensure!(status.is_success(), "webhook answered {status}");
                Ok(())
            }
        })
        .buffer_unordered(in_flight)
        .collect()
        .await;
    results.into_iter().collect()
}

fn signed(http: &reqwest::Client, url: &str, body: String) -> reqwest::RequestBuilder {
    http.post(url)
        .header("content-type", "application/json")
        .header(
            "x-hub-signature-256",
            signature::sign(SECRET.as_bytes(), body.as_bytes()),
        )
        .body(body)
}

/// Waits until the fake Graph API has accepted `count` replies in all.
async fn wait_for(server: &BenchServer, count: usize) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(900);
    while server.graph.sent_count() < count {
        anyhow::ensure!(
            Instant::now() < deadline,
            "only {} of {count} replies",
            server.graph.sent_count()
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    Ok(())
}

/// Each sender's webhook-to-reply time, from the replies the fake Graph API accepted.
fn latencies(server: &BenchServer, posted: &[(String, Instant)]) -> anyhow::Result<Percentiles> {
    let replied: HashMap<String, Instant> = server
        .graph
        .sent()
        .into_iter()
        .map(|sent| (sent.to().to_owned(), sent.at))
        .collect();
    let took: Vec<Duration> = posted
        .iter()
        .map(|(from, at)| {
            replied
                .get(from)
                .map(|r| r.saturating_duration_since(*at))
                .with_context(|| format!("no reply to {from}"))
        })
        .collect::<anyhow::Result<_>>()?;
    Percentiles::of(&took).context("no messages")
}
