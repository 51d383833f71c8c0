//! Media a person sends, fetched from the fake Graph API into the media store, in three
//! figures, each beside its goal or a baseline measured in the same run:
//!
//! - `memory`: RSS over idle while 20 × 50 MB documents are fetched and stored at once
//!   (`media.concurrency` 20); the fake produces each file as it sends it, so what grows is
//!   Parley's. Goal: under 64 MiB (streamed in parts, never held whole).
//! - `latency`: from the webhook's post to the 5 MB picture stored (its attachment `stored`),
//!   against the same lookup, download, SHA-256 and file write made directly; 20 rounds, one
//!   at a time. Goal: Parley's median within 50 ms of the direct one.
//! - `throughput`: webhook → reply for N messages from distinct senders, every tenth a
//!   100 KB picture (the clock stops when every reply is sent and every file stored), against
//!   the same number of text messages, each on a fresh server, three pairs alternating.
//!   Goal: ≥ 0.9×.
//!
//! Run: `cargo run --release -p parley-benches --bin media_fetch -- [messages 1000]`

use std::time::{Duration, Instant};

use anyhow::Context;
use futures_util::StreamExt;
use parley_actors::whatsapp::signature;
use parley_benches::{BenchServer, Percentiles, memory_kib, ms};
use parley_persistence::{ConnectionTrait, DatabaseConnection};
use parley_testkit::graph::{messages_payload, text_message};
use sea_orm::Statement;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use tokio::io::AsyncWriteExt;

const SECRET: &str = "bench-secret";
const NUMBER: &str = "106540352242922";
const MIB: u64 = 1024 * 1024;
/// Text-only and mixed runs, alternating.
const PAIRS: usize = 3;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let messages: usize = std::env::args()
        .nth(1)
        .map(|n| n.parse())
        .transpose()
        .context("messages")?
        .unwrap_or(1000);
    parley_actors::llm::install_crypto_provider();
    let memory = memory().await?;
    let latency = latency().await?;
    // Alternating, so that neither side always runs on a colder machine.
    let mut pairs = Vec::new();
    for _ in 0..PAIRS {
        pairs.push((
            throughput(messages, 0).await?,
            throughput(messages, 10).await?,
        ));
    }

    println!("media_fetch: instant fakes, release build");
    println!(
        "memory: 20 x 50 MB documents at once: RSS {} MiB idle, {} MiB at most while fetching: \
         +{:.1} MiB (goal < 64 MiB); {} stored in {:.2} s",
        memory.idle_kib / 1024,
        memory.peak_kib / 1024,
        (memory.peak_kib.saturating_sub(memory.idle_kib)) as f64 / 1024.0,
        memory.stored,
        memory.took.as_secs_f64(),
    );
    println!(
        "latency: 5 MB picture, webhook -> stored: Parley p50 {} p99 {}; direct lookup + \
         download + sha256 + write p50 {} p99 {}; Parley adds {} at the median (goal <= 50 ms)",
        ms(latency.parley.p50),
        ms(latency.parley.p99),
        ms(latency.direct.p50),
        ms(latency.direct.p99),
        ms(latency.parley.p50.saturating_sub(latency.direct.p50)),
    );
    for (text, mixed) in pairs {
        println!(
            "throughput: {messages} messages: text only {text:.0} msg/s, every tenth a 100 KB \
             picture {mixed:.0} msg/s; ratio {:.2} (goal >= 0.9)",
            mixed / text
        );
    }
    Ok(())
}

/// A server whose channel takes signed webhooks and answers with an echoing assistant.
async fn server(concurrency: usize) -> anyhow::Result<(BenchServer, String)> {
    let server = BenchServer::start(|settings| {
        settings.whatsapp.app_secret = Some(SECRET.into());
        settings.whatsapp.pair_burst = 1000;
        settings.whatsapp.rate_per_sec = 100_000;
        settings.media.concurrency = concurrency;
    })
    .await?;
    let (_, channel) = server
        .assistant_channel(
            "Echo.",
            &json!({"name": "Bench line", "accessToken": "t", "phoneNumberId": NUMBER, "businessId": "w"}),
        )
        .await?;
    Ok((server, channel))
}

/// A person's media message of `kind` (the fake's media `id`, its digest).
fn media_payload(from: &str, wamid: &str, kind: &str, id: &str, mime: &str, sha256: &str) -> Value {
    let mut message = json!({"from": from, "id": wamid, "timestamp": "1749416383", "type": kind});
    message[kind] = json!({"id": id, "mime_type": mime, "sha256": sha256, "filename": "file.pdf"});
    messages_payload(NUMBER, from, "Bench", message)
}

async fn post(http: &reqwest::Client, url: &str, body: &Value) -> anyhow::Result<()> {
    let body = body.to_string();
    let status = http
        .post(url)
        .header("content-type", "application/json")
        .header(
            "x-hub-signature-256",
            signature::sign(SECRET.as_bytes(), body.as_bytes()),
        )
        .body(body)
        .send()
        .await?
        .status();
    anyhow::ensure!(status.is_success(), "webhook answered {status}");
    Ok(())
}

/// How many attachments are stored.
async fn stored(db: &DatabaseConnection) -> anyhow::Result<u64> {
    let row = db
        .query_one_raw(Statement::from_string(
            db.get_database_backend(),
            "SELECT COUNT(*) AS n FROM attachments WHERE status = 'stored'",
        ))
        .await?
        .context("a count")?;
    Ok(u64::try_from(row.try_get::<i64>("", "n")?).unwrap_or(0))
}

async fn wait_stored(db: &DatabaseConnection, count: u64, poll: Duration) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(600);
    while stored(db).await? < count {
        anyhow::ensure!(Instant::now() < deadline, "files never stored");
        tokio::time::sleep(poll).await;
    }
    Ok(())
}

struct Memory {
    idle_kib: u64,
    peak_kib: u64,
    stored: u64,
    took: Duration,
}

async fn memory() -> anyhow::Result<Memory> {
    let (server, channel) = server(20).await?;
    let db = parley_persistence::connect(server.database_url()).await?;
    let url = format!("{}/webhooks/waba/{channel}", server.base);
    let http = reqwest::Client::new();
    let mut payloads = Vec::new();
    for n in 0..20_u8 {
        let id = format!("media-doc-{n}");
        let sha256 = server
            .graph
            .add_generated_media(&id, 50 * MIB, n, "application/pdf");
        let from = format!("14155550{n:03}");
        payloads.push(media_payload(
            &from,
            &format!("wamid.doc{n}"),
            "document",
            &id,
            "application/pdf",
            &sha256,
        ));
    }
    // Warm: one text turn so that the pools and actors exist before idle is read.
    post(
        &http,
        &url,
        &text_message(NUMBER, "14155559999", "Warm", "wamid.warm", "hi"),
    )
    .await?;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let idle_kib = memory_kib("VmRSS");
    let started = Instant::now();
    for payload in &payloads {
        post(&http, &url, payload).await?;
    }
    let mut peak_kib = idle_kib;
    while stored(&db).await? < 20 {
        anyhow::ensure!(started.elapsed() < Duration::from_secs(600), "never stored");
        peak_kib = peak_kib.max(memory_kib("VmRSS"));
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let took = started.elapsed();
    peak_kib = peak_kib.max(memory_kib("VmRSS"));
    let stored = stored(&db).await?;
    db.close().await?;
    server.stop().await?;
    Ok(Memory {
        idle_kib,
        peak_kib,
        stored,
        took,
    })
}

struct Latency {
    parley: Percentiles,
    direct: Percentiles,
}

async fn latency() -> anyhow::Result<Latency> {
    let (server, channel) = server(4).await?;
    let db = parley_persistence::connect(server.database_url()).await?;
    let url = format!("{}/webhooks/waba/{channel}", server.base);
    let http = reqwest::Client::new();
    let dir = tempfile::tempdir()?;
    let (mut parley, mut direct) = (Vec::new(), Vec::new());
    for n in 0..20_u8 {
        let id = format!("media-img-{n}");
        let sha256 = server
            .graph
            .add_generated_media(&id, 5 * MIB, n, "image/jpeg");
        // Direct: what the work itself takes through the same fake.
        let started = Instant::now();
        direct_fetch(&http, &server.graph.base_url(), &id, &dir.path().join(&id)).await?;
        direct.push(started.elapsed());
        let payload = media_payload(
            "14155550100",
            &format!("wamid.img{n}"),
            "image",
            &id,
            "image/jpeg",
            &sha256,
        );
        let started = Instant::now();
        post(&http, &url, &payload).await?;
        wait_stored(&db, u64::from(n) + 1, Duration::from_millis(1)).await?;
        parley.push(started.elapsed());
    }
    db.close().await?;
    server.stop().await?;
    Ok(Latency {
        parley: Percentiles::of(&parley).context("rounds")?,
        direct: Percentiles::of(&direct).context("rounds")?,
    })
}

/// Meta's two steps made directly: the lookup for the URL, then the file streamed to disk
/// while its SHA-256 is computed.
async fn direct_fetch(
    http: &reqwest::Client,
    graph: &str,
    id: &str,
    path: &std::path::Path,
) -> anyhow::Result<()> {
    let info: Value = http
        .get(format!("{graph}/{id}"))
        .bearer_auth("t")
        .send()
        .await?
        .json()
        .await?;
    let link = info["url"].as_str().context("a url")?;
    let mut body = http.get(link).bearer_auth("t").send().await?.bytes_stream();
    let mut file = tokio::fs::File::create(path).await?;
    let mut digest = Sha256::new();
    while let Some(chunk) = body.next().await {
        let chunk = chunk?;
        digest.update(&chunk);
        file.write_all(&chunk).await?;
    }
    file.sync_all().await?;
    anyhow::ensure!(hex::encode(digest.finalize()) == info["sha256"].as_str().unwrap_or(""));
    Ok(())
}

/// Messages per second from the first post to the last reply and the last file stored; every
/// `every`-th message a 100 KB picture (0: none).
async fn throughput(messages: usize, every: usize) -> anyhow::Result<f64> {
    let (server, channel) = server(4).await?;
    let db = parley_persistence::connect(server.database_url()).await?;
    let url = format!("{}/webhooks/waba/{channel}", server.base);
    let mut payloads = Vec::with_capacity(messages);
    let mut files = 0;
    for n in 0..messages {
        let from = format!("1415555{:04}", n % 10_000);
        let wamid = format!("wamid.bench{n}");
        if every > 0 && n % every == 0 {
            let id = format!("media-pic-{n}");
            let seed = u8::try_from(n % 251).unwrap_or(0);
            let sha256 = server
                .graph
                .add_generated_media(&id, 100 * 1024, seed, "image/jpeg");
            payloads.push(media_payload(
                &from,
                &wamid,
                "image",
                &id,
                "image/jpeg",
                &sha256,
            ));
            files += 1;
        } else {
            payloads.push(text_message(NUMBER, &from, "Bench", &wamid, "hello"));
        }
    }
    let http = reqwest::Client::new();
    let started = Instant::now();
    let posted: Vec<anyhow::Result<()>> = futures_util::stream::iter(&payloads)
        .map(|payload| post(&http, &url, payload))
        .buffer_unordered(16)
        .collect()
        .await;
    posted.into_iter().collect::<anyhow::Result<()>>()?;
    let deadline = Instant::now() + Duration::from_secs(600);
    while server.graph.sent_count() < messages {
        anyhow::ensure!(Instant::now() < deadline, "replies never sent");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    wait_stored(&db, files, Duration::from_millis(5)).await?;
    let rate = messages as f64 / started.elapsed().as_secs_f64();
    db.close().await?;
    server.stop().await?;
    Ok(rate)
}
