//! What a live identity costs in memory, and how long passivating many of them takes.
//!
//! Starts Parley in-process (SQLite, or `PARLEY_BENCH_DATABASE_URL`) with the fake model, stores
//! `identities` people, gives each one chat turn (32 at a time), and measures in the same run:
//! - Parley: this process's RSS growth per identity it holds, right after every person's turn
//!   (most actors live) and once every actor has rested (its cache kept by the registry, with
//!   no task or mailbox), with the server's default rest times (an actor started past the
//!   warm ones rests sooner);
//! - baseline: in a child process (a clean heap), one bare tokio task per person holding a deep
//!   copy of what a live identity's actor keeps between turns (the identity, its memory, its
//!   current conversation and that conversation's recent messages, read from this run's
//!   database), waiting on a notification;
//! - forgetting: how long after the last identity's idle timeout Parley holds none of them,
//!   and the RSS left afterwards (what the allocator has not given back yet).
//!
//! Beside each RSS figure, the heap per identity ([`heap`]): the bytes allocated and not freed
//! since the start, as asked for. The difference between the two is memory freed but kept by
//! the allocator (pages that still hold a live block, or not purged yet), not held by Parley.
//!
//! The idle timeout must outlast the turns (an identity forgotten before the measurement is
//! not held); the report says how many were held when measured.
//!
//! With `--inbound` each person writes once to the sandbox channel instead (the WhatsApp path:
//! the stored event, the inbound worker, the turn, the outbox), as a new person Parley has not
//! seen before: what a channel's memory grows by per person it ever heard from.
//!
//! Run: `cargo run --release -p parley-benches --bin idle_identities -- [identities] [idle_secs]
//! [--inbound]` (defaults 100000 and 300).

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use futures_util::StreamExt;
use parley_benches::{BenchServer, SpanTimes, heap, memory_kib};
use parley_persistence::identities::{self, NewIdentity};
use parley_persistence::{TransactionTrait, clock, conversations, memory};
use serde_json::json;
use uuid::Uuid;

const CONCURRENCY: usize = 32;
/// Identities stored per transaction while setting up.
const BATCH: usize = 1_000;
/// Recent messages a live actor keeps for a one-turn conversation (the person's and the reply).
const KEPT_MESSAGES: u64 = 2;
/// How long the replies may stop coming before the run gives up.
const STALLED: Duration = Duration::from_secs(120);

fn main() -> anyhow::Result<()> {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let inbound = args.iter().any(|a| a == "--inbound");
    args.retain(|a| a != "--inbound");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    if args.first().map(String::as_str) == Some("--baseline") {
        return runtime.block_on(baseline_child(&args[1..]));
    }
    let identities: usize = args
        .first()
        .map_or(Ok(100_000), |a| a.parse())
        .context("identities")?;
    let idle_secs: u64 = args
        .get(1)
        .map_or(Ok(300), |a| a.parse())
        .context("idle_secs")?;
    runtime.block_on(run(identities, idle_secs, inbound))
}

/// How the people reach Parley.
#[derive(Clone, Copy)]
enum Path {
    /// A chat turn over HTTP, for an identity stored beforehand.
    Chat,
    /// A WhatsApp message to the sandbox channel from a number Parley has not seen.
    Inbound,
}

/// One person of the run.
#[derive(Clone)]
enum Person {
    Stored(Uuid),
    Phone(String),
}

async fn run(identities: usize, idle_secs: u64, inbound: bool) -> anyhow::Result<()> {
    let path = if inbound { Path::Inbound } else { Path::Chat };
    // Where a turn's time goes, with `PARLEY_BENCH_SPANS` (its memory figures then count the
    // spans' bookkeeping too).
    let spans = SpanTimes::install();
    let mut rest = Duration::ZERO;
    let mut warm = (0, 0);
    let server = BenchServer::start(|settings| {
        settings.actors.conversation_actor_idle_secs = idle_secs;
        rest = settings.actors.conversation_actor_rest();
        warm = (
            settings.actors.conversation_actors_warm,
            settings.actors.conversation_actor_busy_rest_ms,
        );
    })
    .await?;
    let (_, channel) = server
        .assistant_channel(
            "You help {{identity.name}}.",
            &json!({"name": "Bench line", "integration": "sandbox"}),
        )
        .await?;
    let channel: Uuid = channel.parse()?;
    let people: Vec<Person> = match path {
        Path::Chat => store_identities(&server, identities)
            .await?
            .into_iter()
            .map(Person::Stored)
            .collect(),
        Path::Inbound => (0..identities)
            .map(|n| Person::Phone(format!("+35191{n:07}")))
            .collect(),
    };

    // One person's turn first, so that what every turn shares (pools, clients, caches of the
    // channel and the workspace) is in the starting figure.
    turn(&server, &people[0], channel).await?;
    replies(&server, path, channel, 1).await?;
    heap::count();
    let rss_before = memory_kib("VmRSS");
    let sqlite_before = heap::sqlite_held();
    let started = Instant::now();
    let results: Vec<anyhow::Result<()>> = futures_util::stream::iter(people[1..].iter())
        .map(|person| turn(&server, person, channel))
        .buffer_unordered(CONCURRENCY)
        .collect()
        .await;
    results.into_iter().collect::<anyhow::Result<()>>()?;
    replies(&server, path, channel, identities).await?;
    let turns_took = started.elapsed();
    if let Some(spans) = &spans {
        spans.print(identities);
    }
    let last_turn = Instant::now();
    let just_after = held(&server).await?;
    let rss_live = memory_kib("VmRSS");
    let heap_live = heap::held();

    // Every actor rests once its identity was quiet for the rest time: it stops, and the
    // registry keeps its cache.
    let rest_deadline = last_turn + rest + Duration::from_secs(5);
    while held(&server).await?.live > 0 {
        anyhow::ensure!(
            Instant::now() < rest_deadline,
            "actors still live after their rest time"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let rested = held(&server).await?;
    let rss_rested = memory_kib("VmRSS");
    let heap_rested = heap::held();
    let sqlite_rested = heap::sqlite_held();

    let first = match &people[0] {
        Person::Stored(id) => *id,
        Person::Phone(phone) => server
            .send(
                reqwest::Method::GET,
                &format!("/identity/{phone}"),
                &json!({}),
            )
            .await?["data"]["id"]
            .as_str()
            .context("the first person's id")?
            .parse()?,
    };
    let baseline = run_baseline_child(&server, first, channel, identities).await?;

    let idle_deadline = last_turn + Duration::from_secs(idle_secs);
    let forgotten = wait_until_forgotten(&server, idle_deadline).await?;
    let rss_after = memory_kib("VmRSS");
    let heap_after = heap::held();

    let grown = |rss: u64, held: &Held| {
        kib_per(
            rss.saturating_sub(rss_before),
            held.total().saturating_sub(1),
        )
    };
    let heap_per = |bytes: isize, held: &Held| {
        kib_per(
            u64::try_from(bytes).unwrap_or(0) / 1024,
            held.total().saturating_sub(1),
        )
    };
    let per_live = grown(rss_live, &just_after);
    let per_rested = grown(rss_rested, &rested);
    println!(
        "idle_identities: {identities} identities, one turn each {} ({CONCURRENCY} at a time, {:.1} s, {:.0} turns/s), rest after {} ms ({} ms past {} live), database {}",
        match path {
            Path::Chat => "over the chat endpoint",
            Path::Inbound => "as new WhatsApp senders to the sandbox channel",
        },
        turns_took.as_secs_f64(),
        identities as f64 / turns_took.as_secs_f64(),
        rest.as_millis(),
        warm.1,
        warm.0,
        server.database_kind()
    );
    println!(
        "{:<44} {:>10} {:>12} {:>14} {:>14}",
        "", "RSS before", "RSS then", "per identity", "heap per id."
    );
    let row = |label: String, before: u64, then: u64, per: f64, heap: f64| {
        println!(
            "{label:<44} {:>10} {:>12} {:>14} {:>14}",
            mib(before),
            mib(then),
            format!("{per:.2} KiB"),
            format!("{heap:.2} KiB")
        );
    };
    row(
        format!(
            "Parley, after the turns ({} live, {} resting)",
            just_after.live, just_after.resting
        ),
        rss_before,
        rss_live,
        per_live,
        heap_per(heap_live, &just_after),
    );
    row(
        format!(
            "Parley, all rested ({} live, {} resting)",
            rested.live, rested.resting
        ),
        rss_before,
        rss_rested,
        per_rested,
        heap_per(heap_rested, &rested),
    );
    row(
        "bare tokio task, same cached state".to_owned(),
        baseline.before_kib,
        baseline.after_kib,
        baseline.per_task_kib(),
        kib_per(baseline.heap_bytes / 1024, baseline.tasks),
    );
    println!(
        "ratio Parley/baseline per identity: {:.2} after the turns, {:.2} rested",
        per_live / baseline.per_task_kib().max(1e-9),
        per_rested / baseline.per_task_kib().max(1e-9)
    );
    println!(
        "SQLite's own memory (page caches, outside the heap): {} then {}, {:.2} KiB per identity",
        mib(u64::try_from(sqlite_before / 1024).unwrap_or(0)),
        mib(u64::try_from(sqlite_rested / 1024).unwrap_or(0)),
        (sqlite_rested - sqlite_before) as f64 / 1024.0 / rested.total().max(1) as f64
    );
    println!(
        "{:<44} {:>10}",
        "all forgotten, after the last idle timeout",
        format!("{:.2} s", forgotten.as_secs_f64())
    );
    println!(
        "{:<44} {:>10} (heap {} above the start: what Parley keeps of people it forgot)",
        "RSS once forgotten",
        mib(rss_after),
        mib(u64::try_from(heap_after / 1024).unwrap_or(0))
    );
    server.stop().await
}

/// Stores `count` identities straight in the database, a batch per transaction.
async fn store_identities(server: &BenchServer, count: usize) -> anyhow::Result<Vec<Uuid>> {
    let db = parley_persistence::connect(server.database_url()).await?;
    let workspace_id = server.workspace_id;
    let mut people = Vec::with_capacity(count);
    for chunk in (0..count).collect::<Vec<_>>().chunks(BATCH) {
        let txn = db.begin().await?;
        for n in chunk {
            let new = NewIdentity {
                id: Uuid::now_v7(),
                name: Some(format!("Person {n}")),
                external_id: Some(format!("idle-{n}")),
                metadata: json!({}),
                opted_out: false,
            };
            people.push(
                identities::create(&txn, workspace_id, new, clock::now())
                    .await?
                    .id,
            );
        }
        txn.commit().await?;
    }
    db.close().await?;
    Ok(people)
}

/// One person's message: a chat turn (answered when it returns), or a WhatsApp message
/// (stored when it returns; answered behind it).
async fn turn(server: &BenchServer, person: &Person, channel: Uuid) -> anyhow::Result<()> {
    match person {
        Person::Stored(id) => server
            .post(
                &format!("/conversation/{id}/chat/{channel}"),
                &json!({"message": "hello"}),
            )
            .await
            .map(drop),
        Person::Phone(phone) => server
            .post(
                &format!("/channels/{channel}/sandbox/inbound"),
                &json!({"from": phone, "name": "New person", "text": "hello"}),
            )
            .await
            .map(drop),
    }
}

/// Waits until the sandbox channel has sent `count` replies (the inbound path answers behind
/// the posts); a chat turn was answered when it returned. Gives up only when no reply went
/// out for [`STALLED`]: on PostgreSQL the posts of a million people are stored long before
/// they are answered. The outbox's total is a count over the channel's messages, so it is
/// asked once a second, not in a tight loop beside the server's own work.
async fn replies(
    server: &BenchServer,
    path: Path,
    channel: Uuid,
    count: usize,
) -> anyhow::Result<()> {
    if matches!(path, Path::Chat) {
        return Ok(());
    }
    let mut last = (0, Instant::now());
    loop {
        let outbox = server
            .send(
                reqwest::Method::GET,
                &format!("/channels/{channel}/sandbox/outbox?limit=1"),
                &json!({}),
            )
            .await?;
        let sent = usize::try_from(outbox["pagination"]["total"].as_u64().unwrap_or(0))?;
        if sent >= count {
            return Ok(());
        }
        if sent > last.0 {
            last = (sent, Instant::now());
        }
        anyhow::ensure!(
            last.1.elapsed() < STALLED,
            "only {sent} of {count} replies sent, none for {} s",
            STALLED.as_secs()
        );
        tokio::time::sleep(if count > 10_000 {
            Duration::from_secs(1)
        } else {
            Duration::from_millis(100)
        })
        .await;
    }
}

/// What Parley holds of the identities: live actors and resting caches.
struct Held {
    live: usize,
    resting: usize,
}

impl Held {
    fn total(&self) -> usize {
        self.live + self.resting
    }
}

/// The counts of `root/conversations`, from `GET /admin/actors`.
async fn held(server: &BenchServer) -> anyhow::Result<Held> {
    let tree = server
        .send(reqwest::Method::GET, "/admin/actors", &json!({}))
        .await?;
    let conversations = tree["data"]["supervisors"]
        .as_array()
        .and_then(|s| s.iter().find(|s| s["path"] == "root/conversations"))
        .context("no root/conversations in the actor tree")?;
    let count = |field: &str| -> anyhow::Result<usize> {
        let n = conversations[field].as_u64().context("no count")?;
        Ok(usize::try_from(n)?)
    };
    Ok(Held {
        live: count("live")?,
        resting: count("resting")?,
    })
}

/// Waits until Parley holds nothing of any identity; answers how long after `idle_deadline`
/// (the moment the last identity's idle timeout ran out) that was.
async fn wait_until_forgotten(
    server: &BenchServer,
    idle_deadline: Instant,
) -> anyhow::Result<Duration> {
    tokio::time::sleep_until(idle_deadline.into()).await;
    let give_up = Instant::now() + Duration::from_secs(600);
    while held(server).await?.total() > 0 {
        anyhow::ensure!(
            Instant::now() < give_up,
            "identities still held after 600 s"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(idle_deadline.elapsed())
}

/// What the baseline child measured.
struct BaselineFigures {
    before_kib: u64,
    after_kib: u64,
    /// Heap the tasks held (bytes).
    heap_bytes: u64,
    tasks: usize,
}

impl BaselineFigures {
    fn per_task_kib(&self) -> f64 {
        kib_per(self.after_kib.saturating_sub(self.before_kib), self.tasks)
    }
}

/// Runs this binary again as the baseline, on the same database and person.
async fn run_baseline_child(
    server: &BenchServer,
    person: Uuid,
    channel: Uuid,
    tasks: usize,
) -> anyhow::Result<BaselineFigures> {
    let me = std::env::current_exe()?;
    let args = [
        "--baseline".to_owned(),
        server.database_url().to_owned(),
        server.workspace_id.to_string(),
        person.to_string(),
        channel.to_string(),
        tasks.to_string(),
    ];
    let output =
        tokio::task::spawn_blocking(move || std::process::Command::new(me).args(args).output())
            .await??;
    anyhow::ensure!(
        output.status.success(),
        "baseline failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let text = String::from_utf8(output.stdout)?;
    let field = |name: &str| -> anyhow::Result<u64> {
        text.split_whitespace()
            .find_map(|w| w.strip_prefix(name))
            .context("baseline output")?
            .parse()
            .map_err(anyhow::Error::from)
    };
    Ok(BaselineFigures {
        before_kib: field("before_kib=")?,
        after_kib: field("after_kib=")?,
        heap_bytes: field("heap_bytes=")?,
        tasks: usize::try_from(field("tasks=")?)?,
    })
}

/// The baseline: `count` tokio tasks, each holding its own copy of one live identity's cached
/// state as read from the database.
async fn baseline_child(args: &[String]) -> anyhow::Result<()> {
    let [url, workspace_id, person, channel, count] = args else {
        anyhow::bail!("--baseline <database url> <workspace> <identity> <channel> <tasks>");
    };
    let workspace_id: i64 = workspace_id.parse()?;
    let person: Uuid = person.parse()?;
    let channel: Uuid = channel.parse()?;
    let count: usize = count.parse()?;
    let db = parley_persistence::connect(url).await?;
    let identity = identities::find(&db, workspace_id, person)
        .await?
        .context("the bench's identity")?;
    let remembered = memory::list(&db, person).await?;
    let conversation = conversations::latest_for(&db, person, channel)
        .await?
        .context("the bench's conversation")?;
    // As the actor keeps them (`history::Kept`): id, time, role, the text, and a tool
    // round's part (none in this bench's one-turn conversations).
    let history: Vec<_> = conversations::recent_messages(&db, conversation.id, KEPT_MESSAGES)
        .await?
        .into_iter()
        .map(|m| {
            let tooling: Option<Box<str>> = m.tool_call_id.map(String::into_boxed_str);
            (
                m.id,
                m.created_at,
                m.role,
                m.content.into_boxed_str(),
                tooling,
            )
        })
        .collect();
    db.close().await?;
    let state = (identity, remembered, conversation, history);

    let release = Arc::new(tokio::sync::Notify::new());
    heap::count();
    let before_kib = memory_kib("VmRSS");
    let mut tasks = Vec::with_capacity(count);
    for _ in 0..count {
        let held = state.clone();
        let release = release.clone();
        tasks.push(tokio::spawn(async move {
            release.notified().await;
            drop(held);
        }));
    }
    // Let every task reach its wait.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let after_kib = memory_kib("VmRSS");
    let heap_bytes = heap::held().max(0);
    release.notify_waiters();
    for task in tasks {
        task.await?;
    }
    println!("before_kib={before_kib} after_kib={after_kib} heap_bytes={heap_bytes} tasks={count}");
    Ok(())
}

fn kib_per(kib: u64, count: usize) -> f64 {
    kib as f64 / count.max(1) as f64
}

fn mib(kib: u64) -> String {
    format!("{:.0} MiB", kib as f64 / 1024.0)
}
