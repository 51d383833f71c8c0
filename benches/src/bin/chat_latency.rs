//! How much latency a chat turn adds over the model's own time.
//!
//! Starts Parley in-process on SQLite (or `PARLEY_BENCH_DATABASE_URL`) with the testkit fake
//! model answering instantly, then measures in the same run:
//! - baseline: the same Chat Completions request posted straight to the fake model;
//! - chat: `POST /conversation/{id}/chat/{channel}` through Parley, round-robin over identities.
//!
//! Run: `cargo run --release -p parley-benches --bin chat_latency -- [turns] [identities]`
//! With `PARLEY_BENCH_SPANS=1` it also prints the mean wall time of each stage's span per turn,
//! and the spans of the five slowest turns (what the tail is made of).

use std::time::{Duration, Instant};

use anyhow::Context;
use parley_benches::spans::{Sample, print_slowest};
use parley_benches::{BenchServer, SpanTimes, print_comparison};
use serde_json::json;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let turns: usize = args
        .next()
        .map_or(Ok(500), |a| a.parse())
        .context("turns")?;
    let identities: usize = args
        .next()
        .map_or(Ok(20), |a| a.parse())
        .context("identities")?;

    let spans = SpanTimes::install();
    let server = BenchServer::start(|_| {}).await?;
    let (_, channel) = server
        .assistant_channel(
            "You help {{identity.name}}. {{#if memory.profile.name}}Name: {{memory.profile.name}}{{/if}}",
            &json!({"name": "Bench line", "integration": "sandbox"}),
        )
        .await?;
    for n in 0..identities {
        let body = json!({"name": format!("Person {n}")});
        server
            .send(reqwest::Method::PUT, &format!("/identity/bench-{n}"), &body)
            .await?;
    }
    let (baseline, turn_times, samples) =
        measure(&server, &channel, turns, identities, spans.as_ref()).await?;
    report(&server, turns, identities, &baseline, &turn_times)?;
    if let Some(spans) = spans {
        spans.print(turns);
        print_slowest(&samples, 5);
    }
    server.stop().await
}

/// Chat turns through Parley and the same request straight to the model, interleaved so that
/// both see the same machine weather.
async fn measure(
    server: &BenchServer,
    channel: &str,
    turns: usize,
    identities: usize,
    spans: Option<&SpanTimes>,
) -> anyhow::Result<(Vec<Duration>, Vec<Duration>, Vec<Sample>)> {
    // Baseline: the request a turn makes, straight to the model.
    let direct_body = json!({"model": "fake", "stream": false, "messages": [
        {"role": "system", "content": "You help Person 0."}, {"role": "user", "content": "hello"}]});
    let direct_url = format!("{}/chat/completions", server.model.base_url());
    let direct = || async {
        server
            .http
            .post(&direct_url)
            .json(&direct_body)
            .send()
            .await?
            .bytes()
            .await
            .map_err(anyhow::Error::from)
    };
    let chat = |n: usize| {
        let path = format!("/conversation/bench-{}/chat/{channel}", n % identities);
        async move {
            server
                .post(&path, &json!({"message": format!("hello {n}")}))
                .await
        }
    };
    for n in 0..identities.max(20) {
        direct().await?;
        chat(n).await?;
    }
    if let Some(spans) = spans {
        spans.reset();
    }
    let mut baseline = Vec::with_capacity(turns);
    let mut turn_times = Vec::with_capacity(turns);
    let mut samples = Vec::new();
    for n in 0..turns {
        let started = Instant::now();
        direct().await?;
        let direct_took = started.elapsed();
        baseline.push(direct_took);
        if let Some(spans) = spans {
            // What closed since the turn before ended is not this turn's.
            spans.take_operation();
        }
        let started = Instant::now();
        chat(n).await?;
        let took = started.elapsed();
        turn_times.push(took);
        if let Some(spans) = spans {
            samples.push(Sample {
                index: n,
                took,
                baseline: direct_took,
                operation: spans.take_operation(),
            });
        }
    }
    Ok((baseline, turn_times, samples))
}

fn report(
    server: &BenchServer,
    turns: usize,
    identities: usize,
    baseline: &[Duration],
    turn_times: &[Duration],
) -> anyhow::Result<()> {
    println!(
        "chat_latency: {turns} turns over {identities} identities, database {}",
        server.database_kind()
    );
    print_comparison(
        "model alone (baseline)",
        baseline,
        "chat turn through Parley",
        turn_times,
    )
}
