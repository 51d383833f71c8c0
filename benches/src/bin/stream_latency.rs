//! How much Parley adds to a streamed reply's first and last token.
//!
//! Starts Parley in-process on SQLite (or `PARLEY_BENCH_DATABASE_URL`) with the testkit fake
//! model streaming like a real one (200 ms to the first token, then 20 tokens 10 ms apart),
//! and measures in the same run, interleaved:
//! - baseline: the same streamed Chat Completions request posted straight to the fake model,
//!   timed to its first and last content chunks and to its end (`[DONE]`);
//! - Parley: `GET /conversation/{id}/streaming`, timed to its first and last `token` events
//!   and to its `complete` event, which comes once the reply is stored.
//!
//! Run: `cargo run --release -p parley-benches --bin stream_latency -- [turns] [identities]`
//! With `PARLEY_BENCH_SPANS=1` it also prints the mean wall time of Parley's stage spans per
//! streamed turn.

use std::time::{Duration, Instant};

use anyhow::Context;
use futures_util::StreamExt;
use parley_benches::spans::Operation;
use parley_benches::{BenchServer, SpanTimes, Timeline, ms, print_comparison};
use parley_testkit::{FakeModel, Reply};
use serde_json::json;

const TIME_TO_FIRST_TOKEN: Duration = Duration::from_millis(200);
const BETWEEN_TOKENS: Duration = Duration::from_millis(10);
const TOKENS: usize = 20;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let turns: usize = args
        .next()
        .map_or(Ok(100), |a| a.parse())
        .context("turns")?;
    let identities: usize = args
        .next()
        .map_or(Ok(10), |a| a.parse())
        .context("identities")?;

    let spans = SpanTimes::install();
    let server = BenchServer::start(|_| {}).await?;
    let (_, channel) = server
        .assistant_channel(
            "You help {{identity.name}}.",
            &json!({"name": "Bench line", "integration": "sandbox"}),
        )
        .await?;
    for n in 0..identities {
        let body = json!({"name": format!("Person {n}")});
        server
            .send(
                reqwest::Method::PUT,
                &format!("/identity/stream-{n}"),
                &body,
            )
            .await?;
    }
    server
        .model
        .set_latency(TIME_TO_FIRST_TOKEN, BETWEEN_TOKENS);
    let reply = (0..TOKENS)
        .map(|i| format!("word{i}"))
        .collect::<Vec<_>>()
        .join(" ");

    let direct_url = format!("{}/chat/completions", server.model.base_url());
    let direct_body = json!({"model": "fake", "stream": true, "messages": [
        {"role": "system", "content": "You help Person 0."}, {"role": "user", "content": "hello"}]});
    let mut samples = Samples::default();
    let mut timeline = Timeline::default();
    // Each measured turn's spans (with `PARLEY_BENCH_SPANS=1`), for the worst turns' timelines.
    let mut operations: Vec<(Instant, Operation)> = Vec::new();
    let mut measured: Option<Instant> = None;
    for n in 0..turns + WARM_UP {
        server.model.push([Reply::Text(reply.clone())]);
        let started = Instant::now();
        let direct = server
            .http
            .post(&direct_url)
            .json(&direct_body)
            .send()
            .await?;
        let baseline = timed(started, direct, "\"content\"", "[DONE]").await?;
        let baseline_lag = Lag::since(&server.model, started, &baseline)?;

        server.model.push([Reply::Text(reply.clone())]);
        let path = format!(
            "{}/conversation/stream-{}/streaming?channel_id={channel}&message=hello%20{n}",
            server.base,
            n % identities
        );
        if let Some(spans) = &spans {
            // The previous measured turn's spans, its stream's end included.
            let previous = spans.take_operation();
            if let Some(at) = measured.take() {
                timeline.add(at, &previous);
                operations.push((at, previous));
            }
        }
        let started = Instant::now();
        let through = server
            .http
            .get(&path)
            .bearer_auth(&server.key)
            .send()
            .await?;
        anyhow::ensure!(through.status().is_success(), "{}", through.status());
        let parley = timed(
            started,
            through,
            "\"type\":\"token\"",
            "\"type\":\"complete\"",
        )
        .await?;
        let parley_lag = Lag::since(&server.model, started, &parley)?;
        if n + 1 == WARM_UP
            && let Some(spans) = &spans
        {
            spans.reset();
        }
        if n >= WARM_UP {
            measured = Some(started);
            samples.push(baseline, parley);
            samples.lags.push((baseline_lag, parley_lag));
        }
    }

    println!(
        "stream_latency: {turns} streamed turns over {identities} identities, database {}; \
         model: {} ms to the first token, {TOKENS} tokens {} ms apart",
        server.database_kind(),
        TIME_TO_FIRST_TOKEN.as_millis(),
        BETWEEN_TOKENS.as_millis()
    );
    println!("\nfirst token");
    print_comparison(
        "model alone (baseline)",
        &samples.model_first,
        "through Parley's SSE stream",
        &samples.parley_first,
    )?;
    println!("\nlast token");
    print_comparison(
        "model alone (baseline)",
        &samples.model_last,
        "through Parley's SSE stream",
        &samples.parley_last,
    )?;
    println!("\nend of the stream ([DONE]; complete, after the reply is stored)");
    print_comparison(
        "model alone (baseline)",
        &samples.model_end,
        "through Parley's SSE stream",
        &samples.parley_end,
    )?;
    // The figures above carry the fake model's timer jitter (its sleeps end on the timer's
    // next millisecond tick) in both columns; these take the model's own time out of each
    // stream (from the request's arrival at the fake to its handing the token over), so what
    // is left is the way to the model and back: direct, or through Parley. The first token's
    // is also shown in its two halves: the request's way to the model (Parley: the request,
    // the actor's wake-up, the prompt, the call) and the token's way back.
    let lags: [(&str, LagPart); 4] = [
        ("first token, less the model's own time", |lag| lag.first),
        (
            "first token, less the model's own time: the way to the model",
            |lag| lag.there,
        ),
        (
            "first token, less the model's own time: the way back",
            Lag::back,
        ),
        ("last token, less the model's own time", |lag| lag.last),
    ];
    for (title, pick) in lags {
        // One part of every turn's lag, direct (`side` picks the first of each pair) or through
        // Parley (the second).
        let column = |side: fn(&(Lag, Lag)) -> &Lag| -> Vec<Duration> {
            samples.lags.iter().map(|pair| pick(side(pair))).collect()
        };
        println!("\n{title}");
        print_comparison(
            "model alone (baseline)",
            &column(|pair| &pair.0),
            "through Parley's SSE stream",
            &column(|pair| &pair.1),
        )?;
    }
    // The last measured turn's spans, its stream's end included.
    if let Some(spans) = &spans
        && let Some(at) = measured.take()
    {
        let last = spans.take_operation();
        timeline.add(at, &last);
        operations.push((at, last));
    }
    // Where the worst turns lost their time: on the way to the model, or back from it.
    let mut worst: Vec<(usize, &Lag)> = samples
        .lags
        .iter()
        .map(|(_, parley)| parley)
        .enumerate()
        .collect();
    worst.sort_by_key(|(_, lag)| std::cmp::Reverse(lag.first));
    println!("\nthe worst turns through Parley, first token less the model's own time");
    for (turn, lag) in worst.iter().take(WORST) {
        println!(
            "  {}: {} to the model, {} back (measured turn {turn})",
            ms(lag.first),
            ms(lag.there),
            ms(lag.back())
        );
        if let Some((started, operation)) = operations.get(*turn) {
            println!("      {}", operation.timeline_line(*started));
        }
    }
    if let Some(spans) = spans {
        spans.print(turns);
        println!();
        let mean = |pick: fn(&Lag) -> Duration| {
            let all: Vec<Duration> = samples.lags.iter().map(|(_, lag)| pick(lag)).collect();
            all.iter().sum::<Duration>() / u32::try_from(all.len().max(1)).unwrap_or(u32::MAX)
        };
        timeline.print(&[
            ("(the model has the request)", mean(|lag| lag.there)),
            ("(the model hands the first token)", mean(|lag| lag.handed)),
            ("(the client has the first token)", mean(|lag| lag.arrived)),
        ]);
    }
    server.stop().await
}

/// Worst turns printed with their lag's two halves.
const WORST: usize = 5;

/// Turns before measuring (connections, caches, the identities' actors).
const WARM_UP: usize = 10;

#[derive(Default)]
struct Samples {
    model_first: Vec<Duration>,
    model_last: Vec<Duration>,
    model_end: Vec<Duration>,
    parley_first: Vec<Duration>,
    parley_last: Vec<Duration>,
    parley_end: Vec<Duration>,
    /// Each turn's lags from the model's hand-over, direct and through Parley.
    lags: Vec<(Lag, Lag)>,
}

/// One part of a [`Lag`].
type LagPart = fn(&Lag) -> Duration;

/// A stream's first and last tokens' time at the client less the model's own time (from the
/// request's arrival at the fake to its handing each token to the response): the way to the
/// model and back, through Parley or direct.
struct Lag {
    /// From sending the request to its arrival at the fake.
    there: Duration,
    first: Duration,
    last: Duration,
    /// From sending the request to the fake's handing the first token over, and to the
    /// first token's arrival.
    handed: Duration,
    arrived: Duration,
}

impl Lag {
    /// The first token's way back, from the fake's handing it over to its arrival.
    fn back(&self) -> Duration {
        self.first.saturating_sub(self.there)
    }

    /// The lags of the stream just read (started at `started`, timed as `timing`), from the
    /// fake's record of that stream.
    fn since(model: &FakeModel, started: Instant, timing: &Timing) -> anyhow::Result<Self> {
        let model = model
            .last_stream()
            .context("the fake model recorded no stream")?;
        let there = model.received.saturating_duration_since(started);
        Ok(Self {
            there,
            first: there + (started + timing.first).saturating_duration_since(model.first),
            last: there + (started + timing.last).saturating_duration_since(model.last),
            handed: model.first.saturating_duration_since(started),
            arrived: timing.first,
        })
    }
}

impl Samples {
    fn push(&mut self, model: Timing, parley: Timing) {
        self.model_first.push(model.first);
        self.model_last.push(model.last);
        self.model_end.push(model.end);
        self.parley_first.push(parley.first);
        self.parley_last.push(parley.last);
        self.parley_end.push(parley.end);
    }
}

/// When a stream's first and last tokens and its end arrived.
struct Timing {
    first: Duration,
    last: Duration,
    end: Duration,
}

/// Reads a streamed body, answering the time from `started` (just before the request was
/// sent) to the first and the last chunk holding `token`, and to the chunk holding `end`.
async fn timed(
    started: Instant,
    response: reqwest::Response,
    token: &str,
    end: &str,
) -> anyhow::Result<Timing> {
    let mut body = response.bytes_stream();
    let mut seen = String::new();
    let mut first = None;
    let mut last = None;
    while let Some(chunk) = body.next().await {
        let chunk = String::from_utf8_lossy(&chunk?).into_owned();
        let at = started.elapsed();
        // A token split across two chunks is seen once the second arrives.
        let before = seen.matches(token).count();
        seen.push_str(&chunk);
        if seen.matches(token).count() > before {
            first.get_or_insert(at);
            last = Some(at);
        }
        if seen.contains(end) {
            return Ok(Timing {
                first: first.context("no first token")?,
                last: last.context("no last token")?,
                end: at,
            });
        }
    }
    anyhow::bail!("the stream ended without {end}: {seen}")
}
