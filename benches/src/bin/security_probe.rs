//! The hostile-client probe: what a client can do to a running Parley, counted.
//!
//! - held connections: `HELD` sockets from one address that never finish their headers, and
//!   how long `/health` takes meanwhile for a client at another address; how many of them the
//!   server closed;
//! - NUL characters in bodies, paths and queries of many endpoints: answers by status class;
//! - page numbers too large for the database on every list: answers by status class;
//! - races: concurrent deletes against creates and updates, and concurrent merges of one
//!   source: server errors and how many merges happened.
//!
//! Run: `cargo run --release -p parley-benches --bin security_probe -- [held] [rounds]`
//! (`PARLEY_BENCH_DATABASE_URL=postgres://…` for PostgreSQL).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::Context;
use futures_util::future::join_all;
use parley_benches::{BenchServer, Percentiles, ms};
use reqwest::Method;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let held: usize = args
        .next()
        .map_or(Ok(5_000), |a| a.parse())
        .context("held")?;
    let rounds: usize = args
        .next()
        .map_or(Ok(50), |a| a.parse())
        .context("rounds")?;
    let server = BenchServer::start(|s| {
        s.server.header_read_timeout_secs = 2;
        s.server.max_connections = 1_024;
        s.server.auth_failures_per_minute = 0;
    })
    .await?;
    println!(
        "security_probe on {} (header read timeout 2 s, at most 1024 connections)",
        server.database_kind()
    );
    held_connections(&server, held).await?;
    nul_inputs(&server).await?;
    page_overflow(&server).await?;
    tenant_inputs(&server).await?;
    races(&server, rounds).await?;
    server.stop().await
}

/// Counts answers by status class.
#[derive(Default)]
struct Tally(BTreeMap<String, usize>);

impl Tally {
    fn add(&mut self, status: u16) {
        *self.0.entry(format!("{}xx", status / 100)).or_default() += 1;
    }

    fn server_errors(&self) -> usize {
        self.0.get("5xx").copied().unwrap_or(0)
    }
}

impl std::fmt::Display for Tally {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let parts: Vec<String> = self.0.iter().map(|(k, v)| format!("{k}: {v}")).collect();
        f.write_str(&parts.join(", "))
    }
}

async fn held_connections(server: &BenchServer, held: usize) -> anyhow::Result<()> {
    let host = server.base.trim_start_matches("http://").to_owned();
    let mut sockets = Vec::with_capacity(held);
    for _ in 0..held {
        // Connections beyond the bound wait in the backlog; each costs one descriptor here.
        let Ok(Ok(mut socket)) = tokio::time::timeout(
            Duration::from_secs(1),
            tokio::net::TcpStream::connect(&host),
        )
        .await
        else {
            continue;
        };
        let _ = socket
            .write_all(b"GET /health HTTP/1.1\r\nHost: probe\r\nX-Slow: ")
            .await;
        sockets.push(socket);
    }
    // Another client: another address (the held ones all come from 127.0.0.1).
    let other = reqwest::Client::builder()
        .local_address(std::net::IpAddr::from([127, 0, 0, 2]))
        .build()?;
    let mut health = Vec::new();
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(6) {
        let asked = Instant::now();
        let answered = tokio::time::timeout(
            Duration::from_secs(30),
            other.get(format!("{}/health", server.base)).send(),
        )
        .await;
        if matches!(answered, Ok(Ok(ref r)) if r.status().is_success()) {
            health.push(asked.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let closed = join_all(sockets.iter_mut().map(|socket| async move {
        let mut buffer = [0u8; 256];
        matches!(
            tokio::time::timeout(Duration::from_secs(15), socket.read(&mut buffer)).await,
            Ok(Ok(0) | Err(_))
        )
    }))
    .await
    .into_iter()
    .filter(|closed| *closed)
    .count();
    let p = Percentiles::of(&health).context("no /health answered while connections were held")?;
    println!(
        "held connections: {} opened with half-sent headers from one address; another address's /health answered {} times in 6 s, p50 {} p99 {}; {closed} closed by the server within 15 s",
        sockets.len(),
        health.len(),
        ms(p.p50),
        ms(p.p99)
    );
    Ok(())
}

async fn nul_inputs(server: &BenchServer) -> anyhow::Result<()> {
    server
        .send(Method::PUT, "/identity/probe-1", &json!({"name": "Ana"}))
        .await?;
    let (_, channel) = server
        .assistant_channel(
            "Echo.",
            &json!({"name": "Probe line", "integration": "sandbox"}),
        )
        .await?;
    let nul = "a\u{0}b";
    let bodies: Vec<(Method, String, Value)> = vec![
        (Method::POST, "/workers".into(), json!({"name": nul})),
        (
            Method::POST,
            "/workers".into(),
            json!({"name": "W", "description": nul}),
        ),
        (Method::POST, "/stages".into(), json!({"name": nul})),
        (
            Method::POST,
            "/stages".into(),
            json!({"name": "Lead", "metadata": {"k": nul}}),
        ),
        (
            Method::PUT,
            "/identity/probe-1".into(),
            json!({"name": nul}),
        ),
        (
            Method::PUT,
            "/identity/probe-1".into(),
            json!({"metadata": {nul: 1}}),
        ),
        (
            Method::PUT,
            "/identity/probe-2".into(),
            json!({"external_id": nul}),
        ),
        (
            Method::PUT,
            "/memory/from/probe-1".into(),
            json!({"key": "a.b", "value": nul}),
        ),
        (
            Method::PUT,
            "/memory/from/probe-1".into(),
            json!({"key": "a.b", "value": [nul]}),
        ),
        (Method::POST, "/workspace".into(), json!({"name": nul})),
        (
            Method::POST,
            "/channels/waba".into(),
            json!({"name": nul, "integration": "sandbox"}),
        ),
        (
            Method::POST,
            format!("/conversation/probe-1/chat/{channel}"),
            json!({"message": nul}),
        ),
        (
            Method::POST,
            format!("/conversation/probe-1/chat/{channel}"),
            json!({"message": "hi", "metadata": {"x": nul}}),
        ),
        (
            Method::POST,
            format!("/channels/{channel}/sandbox/inbound"),
            json!({"from": "+351912345678", "text": nul}),
        ),
        (
            Method::POST,
            format!("/channels/{channel}/sandbox/inbound"),
            json!({"from": "+351912345678", "name": nul, "text": "hi"}),
        ),
        (
            Method::POST,
            "/identity/probe-1/stage".into(),
            json!({"stage_id": nul}),
        ),
    ];
    let mut tally = Tally::default();
    let total = bodies.len();
    for (method, path, body) in bodies {
        let status = server
            .http
            .request(method, format!("{}{path}", server.base))
            .bearer_auth(&server.key)
            .json(&body)
            .send()
            .await?
            .status()
            .as_u16();
        tally.add(status);
    }
    for path in [
        "/identity/probe%00-1".to_owned(),
        "/memory/from/probe%00".to_owned(),
        format!("/conversation/probe-1/streaming?channel_id={channel}&message=a%00b"),
        "/conversations?identity_id=%00".to_owned(),
        "/workers/%00".to_owned(),
    ] {
        let status = server
            .http
            .get(format!("{}{path}", server.base))
            .bearer_auth(&server.key)
            .send()
            .await?
            .status()
            .as_u16();
        tally.add(status);
    }
    println!(
        "NUL inputs: {} requests ({total} bodies, 5 paths and queries): {tally}",
        total + 5
    );
    Ok(())
}

/// What a tenant may not do with its inputs: speak for Parley in an MCP server's headers, put
/// credentials in its URL, point it inside the machine, store megabytes of metadata, read the
/// installation's metrics with its admin key. Every attempt should be a 4xx.
async fn tenant_inputs(server: &BenchServer) -> anyhow::Result<()> {
    let big = "v".repeat(1_000_000);
    let attempts: Vec<(Method, &str, Value)> = vec![
        (
            Method::POST,
            "/workspace/mcps",
            json!({"name": "a", "transport": "http",
            "url": "https://mcp.example.com/m",
            "headers": [{"key": "X-Parley-Workspace-Id", "value": "999"}]}),
        ),
        (
            Method::POST,
            "/workspace/mcps",
            json!({"name": "a", "transport": "http",
            "url": "https://mcp.example.com/m", "headers": [{"key": "Content-Length", "value": "0"}]}),
        ),
        (
            Method::POST,
            "/workspace/mcps",
            json!({"name": "a", "transport": "http",
            "url": "http://user:pass@mcp.example.com/m"}),
        ),
        (
            Method::POST,
            "/workspace/mcps",
            json!({"name": "a", "transport": "http",
            "url": "http://0x0a000001:8080/m"}),
        ),
        (
            Method::POST,
            "/workspace/mcps",
            json!({"name": "a", "transport": "http",
            "url": "http://169.254.169.254/latest"}),
        ),
        (
            Method::POST,
            "/stages",
            json!({"name": "Probe", "metadata": {"note": big}}),
        ),
        (
            Method::PUT,
            "/identity/probe-big",
            json!({"name": "Ana", "metadata": {"note": big}}),
        ),
        (
            Method::POST,
            "/scheduled-tasks",
            json!({"name": "Often", "task_type": "set_stage",
            "recurrence": "* * * * * *", "payload": {"identity_id": "probe-1", "stage_id": "x"}}),
        ),
        (Method::GET, "/metrics", Value::Null),
    ];
    let mut tally = Tally::default();
    let mut longest = 0usize;
    let mut accepted = Vec::new();
    for (method, path, body) in attempts {
        let mut request = server
            .http
            .request(method, format!("{}{path}", server.base))
            .bearer_auth(&server.key);
        if !body.is_null() {
            request = request.json(&body);
        }
        let response = request.send().await?;
        let status = response.status();
        tally.add(status.as_u16());
        if status.is_success() {
            accepted.push(
                format!("{path} {body}")
                    .chars()
                    .take(160)
                    .collect::<String>(),
            );
        }
        longest = longest.max(response.bytes().await?.len());
    }
    println!(
        "tenant inputs: {tally} (the longest refusal {longest} bytes; accepted: {accepted:?})"
    );
    Ok(())
}

async fn page_overflow(server: &BenchServer) -> anyhow::Result<()> {
    let mut tally = Tally::default();
    let lists = [
        "/workers",
        "/identity",
        "/channels",
        "/stages",
        "/conversations",
        "/workspace",
        "/workspace/api-keys",
        "/identity/probe-1/stages",
    ];
    for list in lists {
        for page in [
            "18446744073709551615",
            "9223372036854775807",
            "184467440737095516",
        ] {
            let status = server
                .http
                .get(format!("{}{list}?page={page}&limit=100", server.base))
                .bearer_auth(&server.key)
                .send()
                .await?
                .status()
                .as_u16();
            tally.add(status);
        }
    }
    println!(
        "page overflow: {} requests on {} lists: {tally}",
        lists.len() * 3,
        lists.len()
    );
    Ok(())
}

async fn races(server: &BenchServer, rounds: usize) -> anyhow::Result<()> {
    let mut tally = Tally::default();
    let mut merges = 0;
    for round in 0..rounds {
        let worker = server.post("/workers", &json!({"name": "W"})).await?;
        let worker = worker["worker_id"].as_str().context("worker")?.to_owned();
        let person = format!("race-{round}");
        server
            .send(
                Method::PUT,
                &format!("/identity/{person}"),
                &json!({"name": "Ana"}),
            )
            .await?;
        server
            .send(
                Method::PUT,
                &format!("/identity/{person}-src"),
                &json!({"email": format!("r{round}@x.test")}),
            )
            .await?;
        let mut requests: Vec<(Method, String, Value)> = (0..6)
            .map(|n| {
                (
                    Method::POST,
                    format!("/workers/{worker}/assistants"),
                    json!({"name": format!("A{n}"), "instructions": "Help."}),
                )
            })
            .collect();
        requests.push((Method::DELETE, format!("/workers/{worker}"), Value::Null));
        requests.push((
            Method::PUT,
            format!("/identity/{person}"),
            json!({"phone": format!("+3519123{round:05}")}),
        ));
        requests.push((Method::DELETE, format!("/identity/{person}"), Value::Null));
        for _ in 0..5 {
            requests.push((
                Method::POST,
                format!("/identity/{person}-target/merge"),
                json!({"source_id": format!("{person}-src")}),
            ));
        }
        server
            .send(
                Method::PUT,
                &format!("/identity/{person}-target"),
                &json!({"name": "T"}),
            )
            .await?;
        let answers = join_all(requests.into_iter().map(|(method, path, body)| async move {
            let request = server
                .http
                .request(method, format!("{}{path}", server.base))
                .bearer_auth(&server.key);
            let request = if body.is_null() {
                request
            } else {
                request.json(&body)
            };
            (
                path,
                request
                    .send()
                    .await
                    .map(|r| r.status().as_u16())
                    .unwrap_or(0),
            )
        }))
        .await;
        for (path, status) in answers {
            tally.add(status);
            if path.ends_with("/merge") && status == 200 {
                merges += 1;
            }
        }
    }
    println!(
        "races: {rounds} rounds of 15 concurrent requests: {tally}; merges that happened: {merges} of {rounds} sources"
    );
    anyhow::ensure!(tally.server_errors() == 0, "server errors in races");
    Ok(())
}
