//! Webhook-to-reply throughput with instant fakes, next to a baseline in the same run.
//!
//! - Parley: signed webhooks from distinct senders are posted to `/webhooks/waba/{channel}`
//!   (16 at a time); the clock stops when the fake Graph API has received every reply.
//! - Baseline: a bare axum handler on a fresh database of the same kind that verifies the
//!   signature, makes the same database writes as Parley's pipeline (event, identity and
//!   contact, conversation, message in, reply, send claim and result, event done), asks the
//!   same fake model for the reply (one Chat Completions call, as Parley's turn makes) and
//!   posts it to the same fake Graph API, inline: work for work.
//!
//! Each run reports its throughput and the webhook-to-reply latency of its messages (from the
//! webhook's post to the fake Graph API accepting the reply to that sender).
//!
//! With `--rate R` the load is steady instead of a burst (open loop): one webhook every 1/R s,
//! each posted on time whatever the answers before it, and the report is what a person feels at
//! that load: `at R msg/s: p50 … p99 …` from the webhook's post to the reply at the fake Graph
//! API, for each side.
//!
//! With `--events` Parley's workspace has an event webhook endpoint taking every event (a
//! receiver in the bench answering 200 at once): the pipeline then writes each fact's events
//! and delivers them while it works, and the ratio shows what that costs. The same run also
//! measures Parley with no endpoint, and as many signed posts made straight to a receiver:
//! each side's CPU per message, what a post costs, and so what the events cost Parley beyond
//! their posts.
//!
//! With `--events --pairs N` it weighs the events alone, with no baseline: N pairs of Parley
//! without and with the endpoint, each pair in the other order from the last (without then
//! with, with then without, …), so that a machine that slows or quickens through the runs
//! weighs on both sides alike. It reports each pair's ratio, their median and range, and what
//! the posts alone would leave (the median run without against the posts' CPU). On a shared
//! two-core machine the runs' speed drifts by a third within minutes; one pair says little.
//!
//! With `--metering` it weighs usage metering instead: Parley with metering off, then on, twice
//! over (`usage.metering`), and reports each pair's ratio on/off.
//!
//! With `--only` it runs Parley's side alone (with `--events`, with its endpoint), so that a
//! profiler (`perf record`) or PostgreSQL's statistics (`pg_stat_statements`, `pg_stat_activity`)
//! see that side apart from the baseline's.
//!
//! Run: `cargo run --release -p parley-benches --bin webhook_throughput -- [messages] [--rate R] [--events] [--pairs N] [--only] [--metering]`
//! With `PARLEY_BENCH_SPANS=1` it also prints the mean wall time of Parley's stage spans per
//! message (waits included: under load a span's time is mostly its wait for a connection or
//! the writer lock).

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use futures_util::StreamExt;
use parley::config::{Overrides, Settings};
use parley::tenancy::{BootstrapRequest, bootstrap};
use parley_actors::whatsapp::signature;

use parley_benches::{
    BenchDatabase, BenchServer, CountingReceiver, DirectPosts, Percentiles, Posting, SpanTimes,
    cpu_time, ms, post_directly,
};
use parley_persistence::conversations::{self, NewMessage};
use parley_persistence::identities::{self, NewIdentity};
use parley_persistence::{DatabaseConnection, MessageStatus, clock, deliveries, webhook_events};
use parley_testkit::graph::text_message;
use parley_testkit::{FakeGraph, FakeModel};
use serde_json::{Value, json};
use uuid::Uuid;

const SECRET: &str = "bench-secret";
const NUMBER: &str = "106540352242922";
const CONCURRENCY: usize = 16;

/// How the webhooks are posted.
#[derive(Clone, Copy)]
enum Pace {
    /// All at once, `CONCURRENCY` in flight.
    Burst,
    /// This many per second, evenly spaced, each on time (open loop).
    Steady(f64),
}

impl Pace {
    fn describe(self) -> String {
        match self {
            Self::Burst => format!("{CONCURRENCY} webhooks in flight"),
            Self::Steady(rate) => format!("open loop at {rate:.0} webhooks/s"),
        }
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let (mut messages, mut rate, mut events, mut metering) = (1000_usize, None, false, false);
    let (mut only, mut pairs) = (false, None);
    while let Some(arg) = args.next() {
        if arg == "--pairs" {
            let value = args.next().context("--pairs needs a number")?;
            pairs = Some(value.parse::<usize>().context("--pairs")?.max(1));
        } else if arg == "--events" {
            events = true;
        } else if arg == "--only" {
            only = true;
        } else if arg == "--metering" {
            metering = true;
        } else if arg == "--rate" {
            let value = args.next().context("--rate needs a number")?;
            rate = Some(value.parse::<f64>().context("--rate")?);
        } else {
            messages = arg.parse().context("messages")?;
        }
    }
    let pace = rate.filter(|r| *r > 0.0).map_or(Pace::Burst, Pace::Steady);
    parley_actors::llm::install_crypto_provider();
    let spans = SpanTimes::install();
    if metering {
        return weigh_metering(messages, pace).await;
    }
    if let Some(pairs) = pairs.filter(|_| events) {
        return weigh_events_in_pairs(messages, pace, pairs).await;
    }

    if only {
        // Parley's side alone, for a profiler or the database's statistics to see it apart.
        let run = run_parley(messages, pace, events, true, spans.as_ref()).await?;
        println!(
            "Parley alone{}: {:.0} msg/s, to reply p50 {} p99 {}, CPU/message {}",
            if events {
                ", every event to an endpoint"
            } else {
                ""
            },
            run.rate,
            ms(run.latency.p50),
            ms(run.latency.p99),
            micros(run.cpu_per_message)
        );
        return Ok(());
    }
    let baseline = run_baseline(messages, pace).await?;
    // With events, the same run also weighs Parley with no endpoint and the posts alone.
    let quiet = if events {
        Some(run_parley(messages, pace, false, true, None).await?)
    } else {
        None
    };
    let parley = run_parley(messages, pace, events, true, spans.as_ref()).await?;

    println!(
        "webhook_throughput: {messages} messages from distinct senders, {}, {}, instant fakes{}",
        pace.describe(),
        database_kind(),
        if events {
            ", every event to a webhook endpoint"
        } else {
            ""
        }
    );
    println!(
        "{:<40} {:>12} {:>18} {:>18} {:>14}",
        "", "throughput", "to reply p50", "to reply p99", "CPU/message"
    );
    let sides = [
        ("bare axum handler, same writes + reply", Some(&baseline)),
        ("Parley, no event endpoint", quiet.as_ref()),
        ("Parley webhook -> assistant -> reply", Some(&parley)),
    ];
    for (label, run) in sides
        .iter()
        .filter_map(|(label, run)| Some((label, (*run)?)))
    {
        println!(
            "{label:<40} {:>12} {:>18} {:>18} {:>14}",
            format!("{:.0} msg/s", run.rate),
            ms(run.latency.p50),
            ms(run.latency.p99),
            micros(run.cpu_per_message)
        );
    }
    println!("ratio Parley/baseline: {:.2}", parley.rate / baseline.rate);
    if let Some(quiet) = &quiet {
        weigh_events(messages, quiet, &parley).await?;
    }
    if let Pace::Steady(rate) = pace {
        for (label, run) in [("bare axum handler", &baseline), ("Parley", &parley)] {
            println!(
                "{label}: at {rate:.0} msg/s: p50 {} p99 {}",
                ms(run.latency.p50),
                ms(run.latency.p99)
            );
        }
        for (label, run) in [("bare axum handler", &baseline), ("Parley", &parley)] {
            let slowest: Vec<String> = run
                .slowest
                .iter()
                .map(|(at, took)| format!("{:.2} s {}", at.as_secs_f64(), ms(*took)))
                .collect();
            println!("{label}: the slowest, by post time: {}", slowest.join(", "));
        }
    }
    if let Some(spans) = spans {
        spans.print(messages);
        if let Pace::Steady(_) = pace {
            spans.print_long();
        }
    }
    Ok(())
}

/// What one run measured.
struct Run {
    /// Messages answered per second, first post to last reply.
    rate: f64,
    /// From each webhook's post to the fake Graph API accepting its reply.
    latency: Percentiles,
    /// The ten slowest messages, when each was posted (from the run's start) and how long its
    /// reply took, in the order they were posted: a stall makes a cluster.
    slowest: Vec<(Duration, Duration)>,
    /// The process's CPU time per message, from the first post to the last reply: this side
    /// and the fakes it talks to (the other side is not running).
    cpu_per_message: Duration,
}

impl Run {
    /// Matches each sender's post time with the reply the fake Graph API accepted for it.
    fn of(
        messages: usize,
        (started, cpu): (Instant, Duration),
        posted: &[(String, Instant)],
        graph: &FakeGraph,
    ) -> anyhow::Result<Self> {
        let elapsed = started.elapsed();
        let cpu = cpu_time().saturating_sub(cpu);
        let answered: std::collections::HashMap<String, Instant> = graph
            .sent()
            .into_iter()
            .map(|sent| (sent.to().to_owned(), sent.at))
            .collect();
        let latencies: Vec<Duration> = posted
            .iter()
            .map(|(from, at)| {
                answered
                    .get(from)
                    .map(|replied| replied.saturating_duration_since(*at))
                    .with_context(|| format!("no reply to {from}"))
            })
            .collect::<anyhow::Result<_>>()?;
        let mut slowest: Vec<(Duration, Duration)> = posted
            .iter()
            .zip(&latencies)
            .map(|((_, at), took)| (at.saturating_duration_since(started), *took))
            .collect();
        slowest.sort_by_key(|(_, took)| std::cmp::Reverse(*took));
        slowest.truncate(10);
        slowest.sort();
        Ok(Self {
            rate: messages as f64 / elapsed.as_secs_f64(),
            latency: Percentiles::of(&latencies).context("no messages")?,
            slowest,
            cpu_per_message: cpu / u32::try_from(messages.max(1)).unwrap_or(u32::MAX),
        })
    }
}

/// Each message's sender and its signed webhook body.
fn payloads(messages: usize) -> Vec<(String, String)> {
    (0..messages)
        .map(|n| {
            let from = format!("1415555{:04}", n % 10_000);
            let body = text_message(NUMBER, &from, "Bench", &format!("wamid.bench{n}"), "hello");
            (from, body.to_string())
        })
        .collect()
}

/// Posts every webhook at `pace`; returns when each sender's was posted.
async fn post_all(
    url: &str,
    bodies: Vec<(String, String)>,
    pace: Pace,
) -> anyhow::Result<Vec<(String, Instant)>> {
    let http = reqwest::Client::new();
    let post = |(from, body): (String, String)| {
        let request = http
            .post(url)
            .header("content-type", "application/json")
            .header(
                "x-hub-signature-256",
                signature::sign(SECRET.as_bytes(), body.as_bytes()),
            )
            .body(body);
        async move {
            let posted = Instant::now();
            let status = request.send().await?.status();
            anyhow::ensure!(status.is_success(), "webhook answered {status}");
            Ok((from, posted))
        }
    };
    let results: Vec<anyhow::Result<(String, Instant)>> = match pace {
        Pace::Burst => {
            futures_util::stream::iter(bodies)
                .map(post)
                .buffer_unordered(CONCURRENCY)
                .collect()
                .await
        }
        Pace::Steady(rate) => {
            // Each post is its own task, started on its time: a slow answer delays nothing.
            let start = tokio::time::Instant::now();
            let spacing = Duration::from_secs_f64(1.0 / rate);
            let mut posts = Vec::with_capacity(bodies.len());
            for (n, body) in bodies.into_iter().enumerate() {
                let due = start + spacing.mul_f64(n as f64);
                let posting = post(body);
                posts.push(tokio::spawn(async move {
                    tokio::time::sleep_until(due).await;
                    posting.await
                }));
            }
            let mut results = Vec::with_capacity(posts.len());
            for posted in posts {
                results.push(posted.await.context("a post task")?);
            }
            results
        }
    };
    results.into_iter().collect()
}

async fn wait_for(graph: &FakeGraph, count: usize) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(600);
    while graph.sent_count() < count {
        anyhow::ensure!(
            Instant::now() < deadline,
            "only {} of {count} replies",
            graph.sent_count()
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    Ok(())
}

/// Parley with usage metering off, then on, twice over: what metering costs.
async fn weigh_metering(messages: usize, pace: Pace) -> anyhow::Result<()> {
    println!(
        "webhook_throughput --metering: {messages} messages, {}, {}, instant fakes",
        pace.describe(),
        database_kind()
    );
    for pair in 1..=2 {
        let off = run_parley(messages, pace, false, false, None).await?;
        let on = run_parley(messages, pace, false, true, None).await?;
        println!(
            "pair {pair}: metering off {:.0} msg/s (p99 {}), on {:.0} msg/s (p99 {}); ratio on/off: {:.2}",
            off.rate,
            ms(off.latency.p99),
            on.rate,
            ms(on.latency.p99),
            on.rate / off.rate
        );
    }
    Ok(())
}

/// `--events --pairs N`: N pairs of Parley without and with the endpoint, in alternating
/// order; each pair's ratio, their median and range, and the posts' share.
async fn weigh_events_in_pairs(messages: usize, pace: Pace, pairs: usize) -> anyhow::Result<()> {
    println!(
        "webhook_throughput --events --pairs {pairs}: {messages} messages, {}, {}, instant fakes",
        pace.describe(),
        database_kind()
    );
    let (mut ratios, mut quiet_cpu) = (Vec::new(), Vec::new());
    for pair in 1..=pairs {
        let with_first = pair % 2 == 0;
        let first = run_parley(messages, pace, with_first, true, None).await?;
        let second = run_parley(messages, pace, !with_first, true, None).await?;
        let (quiet, parley) = if with_first {
            (second, first)
        } else {
            (first, second)
        };
        let ratio = parley.rate / quiet.rate;
        println!(
            "pair {pair} ({}): without {:.0} msg/s ({} CPU/message), with {:.0} msg/s ({}); ratio {ratio:.2}",
            if with_first {
                "with first"
            } else {
                "without first"
            },
            quiet.rate,
            micros(quiet.cpu_per_message),
            parley.rate,
            micros(parley.cpu_per_message),
        );
        ratios.push(ratio);
        quiet_cpu.push(quiet.cpu_per_message);
    }
    ratios.sort_by(f64::total_cmp);
    quiet_cpu.sort();
    let median = |sorted: &[f64]| {
        let n = sorted.len();
        if n % 2 == 1 {
            sorted[n / 2]
        } else {
            f64::midpoint(sorted[n / 2 - 1], sorted[n / 2])
        }
    };
    let direct = posts_alone(messages).await?;
    let quiet = quiet_cpu[quiet_cpu.len() / 2];
    println!(
        "with events / without over {pairs} pairs: median {:.2} (from {:.2} to {:.2}); {:.2} if the events cost only their posts ({} of CPU a post)",
        median(&ratios),
        ratios[0],
        ratios[ratios.len() - 1],
        posts_leave(quiet, &direct),
        micros(direct.cpu_per_post)
    );
    Ok(())
}

async fn run_parley(
    messages: usize,
    pace: Pace,
    events: bool,
    metering: bool,
    spans: Option<&SpanTimes>,
) -> anyhow::Result<Run> {
    let server = BenchServer::start(|settings| {
        settings.usage.metering = metering;
        settings.whatsapp.app_secret = Some(SECRET.into());
        settings.whatsapp.pair_burst = 1000;
        settings.whatsapp.rate_per_sec = 100_000;
    })
    .await?;
    let receiver = if events {
        let receiver = CountingReceiver::start().await?;
        let endpoint = json!({"url": receiver.url, "events": ["*"]});
        server.post("/workspace/webhooks", &endpoint).await?;
        Some(receiver)
    } else {
        None
    };
    let (_, channel) = server
        .assistant_channel(
            "Echo.",
            &json!({"name": "Bench line", "accessToken": "t", "phoneNumberId": NUMBER, "businessId": "w"}),
        )
        .await?;
    let bodies = payloads(messages);
    if let Some(spans) = spans {
        // From the first post, as the run's own times.
        spans.reset();
    }
    let started = (Instant::now(), cpu_time());
    let url = format!("{}/webhooks/waba/{channel}", server.base);
    let posted = post_all(&url, bodies, pace).await?;
    wait_for(&server.graph, messages).await?;
    let run = Run::of(messages, started, &posted, &server.graph)?;
    if let Some(receiver) = receiver {
        println!(
            "event webhook requests received by the reply of the last message: {}",
            receiver.count()
        );
        // Each event goes out once: all of them arrive, and a moment later no second copy.
        let expected = messages * EVENTS_PER_MESSAGE as usize;
        receiver.wait_for(expected).await?;
        tokio::time::sleep(Duration::from_millis(300)).await;
        anyhow::ensure!(
            receiver.count() == expected,
            "{} event webhook requests for {expected} events: some went out twice",
            receiver.count()
        );
    }
    server.stop().await?;
    Ok(run)
}

#[derive(Clone)]
struct Baseline {
    db: DatabaseConnection,
    http: reqwest::Client,
    graph_url: String,
    model_url: String,
    workspace_id: i64,
    channel_id: Uuid,
}

async fn run_baseline(messages: usize, pace: Pace) -> anyhow::Result<Run> {
    let dir = tempfile::tempdir()?;
    let graph = FakeGraph::start().await;
    let model = FakeModel::start().await;
    let database = BenchDatabase::create(dir.path()).await?;
    let db = parley_persistence::connect(&database.url).await?;
    parley_persistence::migrate(&db).await?;
    let owner = bootstrap(
        &db,
        &BootstrapRequest {
            workspace: "Base".into(),
            business: "Base".into(),
            email: None,
        },
    )
    .await?;
    let channel = parley_persistence::channels::create(
        &db,
        owner.workspace_id,
        parley_persistence::channels::NewChannel {
            name: "Base line".into(),
            integration: parley_persistence::Integration::CloudApi,
            active: true,
            settings: json!({}),
            phone_number_id: Some(NUMBER.into()),
            business_account_id: Some("w".into()),
            access_token_encrypted: None,
            verify_token: "v".into(),
            verified: None,
        },
        clock::now(),
    )
    .await?;
    let state_db = db.clone();
    let state = Arc::new(Baseline {
        db,
        http: reqwest::Client::new(),
        graph_url: format!("{}/{NUMBER}/messages", graph.base_url()),
        model_url: format!("{}/chat/completions", model.base_url()),
        workspace_id: owner.workspace_id,
        channel_id: channel.id,
    });
    let app = axum::Router::new()
        .route("/hook", axum::routing::post(baseline_hook))
        .with_state(state);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let server = tokio::spawn(async move { axum::serve(listener, app).await });

    let started = (Instant::now(), cpu_time());
    let posted = post_all(&format!("http://{addr}/hook"), payloads(messages), pace).await?;
    wait_for(&graph, messages).await?;
    let run = Run::of(messages, started, &posted, &graph)?;
    server.abort();
    state_db.close().await?;
    database.drop_database().await?;
    Ok(run)
}

async fn baseline_hook(
    State(state): State<Arc<Baseline>>,
    headers: HeaderMap,
    body: Bytes,
) -> StatusCode {
    let signed = headers
        .get("x-hub-signature-256")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    if !signature::verify(SECRET.as_bytes(), &body, signed) {
        return StatusCode::UNAUTHORIZED;
    }
    match baseline_writes(&state, &body).await {
        Ok(()) => StatusCode::OK,
        Err(error) => {
            eprintln!("baseline: {error:#}");
            StatusCode::INTERNAL_SERVER_ERROR
        }
    }
}

async fn baseline_writes(state: &Baseline, body: &[u8]) -> anyhow::Result<()> {
    let payload: Value = serde_json::from_slice(body)?;
    let value = &payload["entry"][0]["changes"][0]["value"];
    let msg = &value["messages"][0];
    let wamid = msg["id"].as_str().context("id")?.to_owned();
    let from = msg["from"].as_str().context("from")?.to_owned();
    let db = &state.db;
    let now = clock::now();
    let event = webhook_events::insert_if_new(
        db,
        state.workspace_id,
        state.channel_id,
        &wamid,
        json!({"message": msg}),
        now,
    )
    .await?
    .context("new event")?;
    let person = baseline_identity(state, &from, now).await?;
    let conversation = conversations::start(
        db,
        state.workspace_id,
        person.id,
        state.channel_id,
        None,
        now,
    )
    .await?
    .conversation();
    let text = msg["text"]["body"].as_str().unwrap_or_default();
    conversations::append_message(
        db,
        &conversation,
        NewMessage {
            platform_message_id: Some(wamid),
            ..NewMessage::from_person(text.to_owned())
        },
        now,
    )
    .await?;
    let answer: Value = state
        .http
        .post(&state.model_url)
        .json(&json!({"model": "fake", "stream": false, "messages": [
            {"role": "system", "content": "You help the person."},
            {"role": "user", "content": text}]}))
        .send()
        .await?
        .json()
        .await?;
    let reply = answer["choices"][0]["message"]["content"]
        .as_str()
        .context("model reply")?
        .to_owned();
    let stored = conversations::append_message(
        db,
        &conversation,
        NewMessage::to_person(reply.clone(), MessageStatus::Pending),
        now,
    )
    .await?;
    deliveries::claim(db, stored.id, None).await?;
    let sent: Value = state
        .http
        .post(&state.graph_url)
        .bearer_auth("t")
        .json(&json!({"messaging_product": "whatsapp", "to": from, "type": "text", "text": {"body": reply}}))
        .send()
        .await?
        .json()
        .await?;
    let platform_id = sent["messages"][0]["id"].as_str().map(str::to_owned);
    deliveries::record_send(
        db,
        stored.id,
        MessageStatus::Sent,
        platform_id.as_deref(),
        None,
    )
    .await?;
    webhook_events::finish(db, event.id, None, clock::now()).await?;
    Ok(())
}

/// Events a message makes here: received and sent.
const EVENTS_PER_MESSAGE: u32 = 2;

/// What the events cost Parley, against the posts alone: the same number of signed posts
/// straight to a receiver, as many in flight as a lane keeps, timed and weighed in CPU in the
/// same run. With the receiver on the same cores, a pipeline whose events cost nothing but
/// their posts would keep `cpu / (cpu + posts)` of its throughput (a CPU-bound run); what
/// Parley spends beyond that is its own per event (the rows, the lanes, the settles).
async fn weigh_events(messages: usize, quiet: &Run, parley: &Run) -> anyhow::Result<()> {
    let direct = posts_alone(messages).await?;
    let posts_cost = direct.cpu_per_post * EVENTS_PER_MESSAGE;
    let own = parley
        .cpu_per_message
        .saturating_sub(quiet.cpu_per_message + posts_cost);
    println!(
        "with events / without, this run: Parley {:.2}; {:.2} if the events cost only their posts",
        parley.rate / quiet.rate,
        posts_leave(quiet.cpu_per_message, &direct)
    );
    println!(
        "a signed post straight to the receiver: {} of CPU ({:.0} posts/s); Parley's own cost beyond the posts: {} per event",
        micros(direct.cpu_per_post),
        direct.rate,
        micros(own / EVENTS_PER_MESSAGE)
    );
    Ok(())
}

/// The share of its throughput a CPU-bound run spending `quiet` per message without events
/// would keep if its events cost only their posts (`direct`'s CPU, two a message).
fn posts_leave(quiet: Duration, direct: &DirectPosts) -> f64 {
    let posts = direct.cpu_per_post * EVENTS_PER_MESSAGE;
    quiet.as_secs_f64() / (quiet + posts).as_secs_f64()
}

/// As many signed posts as `messages` make events, straight to a receiver, as many in flight
/// as a lane keeps to its endpoint (the server's setting, which a run may change:
/// `PARLEY_EVENT_DELIVERY_PER_ENDPOINT=16`), each the size of a `message.received` event.
async fn posts_alone(messages: usize) -> anyhow::Result<DirectPosts> {
    let settings = Settings::load(None, &Overrides::default())
        .map_err(|e| anyhow::anyhow!("PARLEY_ settings: {e}"))?;
    let in_flight = settings.actors.event_delivery_per_endpoint.max(1);
    let posts = messages * EVENTS_PER_MESSAGE as usize;
    let body = json!({"type": "message.received", "timestamp": clock::now(), "data": {
        "message_id": Uuid::now_v7(), "conversation_id": Uuid::now_v7(),
        "identity_id": Uuid::now_v7(), "channel_id": Uuid::now_v7(),
        "content": "Hello there, message 1234", "platform_message_id": "wamid.bench-000001234",
        "attachments": []}})
    .to_string();
    post_directly(posts, &body, in_flight, Posting::Driven).await
}

fn micros(d: Duration) -> String {
    format!("{:.0} µs", d.as_secs_f64() * 1e6)
}

fn database_kind() -> &'static str {
    if std::env::var_os("PARLEY_BENCH_DATABASE_URL").is_some() {
        "PostgreSQL"
    } else {
        "SQLite"
    }
}

/// The sender's identity, created with its phone on first contact.
async fn baseline_identity(
    state: &Baseline,
    from: &str,
    now: chrono::DateTime<chrono::Utc>,
) -> anyhow::Result<parley_persistence::entities::identity::Model> {
    let db = &state.db;
    let phone = format!("+{from}");
    if let Some(found) = identities::find_by_contact(
        db,
        state.workspace_id,
        parley_persistence::ContactKind::Phone,
        &phone,
    )
    .await?
    {
        return Ok(found);
    }
    let new = NewIdentity {
        id: Uuid::now_v7(),
        name: Some("Bench".into()),
        external_id: None,
        metadata: json!({}),
        opted_out: false,
    };
    let created = identities::create(db, state.workspace_id, new, now).await?;
    identities::attach_contact(
        db,
        state.workspace_id,
        created.id,
        parley_persistence::ContactKind::Phone,
        &phone,
        now,
    )
    .await?;
    Ok(created)
}
