//! What the cluster costs and how fast it recovers (DESIGN §2 "Cluster"), with real `parley
//! serve` processes (the release binary beside this one) on one PostgreSQL database:
//!
//! - `forward [turns]`: a chat turn sent to the node that owns the identity against the same
//!   turn sent to the other node, which forwards it (the added latency of a forward);
//! - `failover [rounds]`: with the default heartbeat and lease, the time from `kill -9` of one of
//!   two nodes to the survivor owning every partition;
//! - `throughput [messages]`: webhooks round-robin over three nodes against one node, each
//!   message answered at the fake Graph API (the coordination's cost), alternating 1 and 3,
//!   from new senders (whose identities are created in the channel's partition), returning
//!   ones (met on WhatsApp in an earlier phase, under the other count of nodes) and imported
//!   ones (identities created through the API beforehand, which lie in any partition, so
//!   that on three nodes two thirds of their turns are forwarded to their identity's owner).
//!
//! Needs `PARLEY_BENCH_DATABASE_URL` (PostgreSQL) and `cargo build --release --bin parley`.
//! Run: `cargo run --release -p parley-benches --bin cluster -- forward 300`

use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use futures_util::StreamExt;
use parley_benches::{BenchServer, ms, print_comparison};
use parley_testkit::graph::text_message;
use parley_testkit::process::Served;
use serde_json::{Value, json};

const SECRET: &str = "the-cluster-secret-of-the-bench";
const OPERATOR: &str = "operator-token-of-the-bench";
const KEY: &str = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=";
const APP_SECRET: &str = "bench-app-secret";
const NUMBER: &str = "100001";

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let what = args.next().unwrap_or_else(|| "forward".to_owned());
    let count: Option<usize> = args.next().map(|a| a.parse()).transpose()?;
    if std::env::var("PARLEY_BENCH_DATABASE_URL").is_err() {
        bail!("a cluster needs PostgreSQL: set PARLEY_BENCH_DATABASE_URL");
    }
    // The in-process server holds the database and the fakes; its own sweeps stay out of the
    // way, so that only the nodes work.
    let server = BenchServer::start(|s| {
        s.secret_key = Some(KEY.into());
        s.whatsapp.app_secret = Some(APP_SECRET.into());
        s.actors.inbound_sweep_ms = 3_600_000;
        s.actors.scheduler_sweep_ms = 3_600_000;
        s.actors.event_delivery_sweep_ms = 3_600_000;
    })
    .await?;
    match what.as_str() {
        "forward" => forward(&server, count.unwrap_or(300)).await?,
        "failover" => failover(&server, count.unwrap_or(3)).await?,
        "throughput" => throughput(&server, count.unwrap_or(1000)).await?,
        other => bail!("unknown measure {other}: forward, failover or throughput"),
    }
    server.stop().await
}

/// A `parley serve` process of the cluster.
type Node = Served;

/// Starts a node on the bench server's database and fakes (the release `parley` beside this
/// binary).
fn start_node(server: &BenchServer) -> anyhow::Result<Node> {
    let binary = std::env::current_exe()?
        .parent()
        .context("the bench's directory")?
        .join("parley");
    anyhow::ensure!(
        binary.exists(),
        "{}: cargo build --release --bin parley",
        binary.display()
    );
    let (model, graph) = (server.model.base_url(), server.graph.base_url());
    let envs = [
        ("PARLEY_DATABASE_URL", server.database_url()),
        ("PARLEY_SECRET_KEY", KEY),
        ("PARLEY_CLUSTER", "true"),
        ("PARLEY_CLUSTER_SECRET", SECRET),
        ("PARLEY_OPERATOR_TOKEN", OPERATOR),
        ("PARLEY_LLM_BASE_URL", model.as_str()),
        ("PARLEY_LLM_MODEL", "fake"),
        ("PARLEY_WHATSAPP_GRAPH_URL", graph.as_str()),
        ("PARLEY_WHATSAPP_APP_SECRET", APP_SECRET),
        ("PARLEY_WHATSAPP_PAIR_BURST", "100000"),
        ("PARLEY_WHATSAPP_RATE_PER_SEC", "100000"),
        ("PARLEY_LOG", "warn,parley::startup=info"),
    ];
    let echo = std::env::var("PARLEY_BENCH_NODE_LOGS")
        .ok()
        .map(|_| "node: ");
    Ok(Served::start(&binary, &envs, echo))
}

/// `(url, partitions)` of every alive node, as `node`'s `/admin/actors` tells.
async fn alive(node: &Node, http: &reqwest::Client) -> anyhow::Result<Vec<(String, Vec<i64>)>> {
    Ok(node
        .cluster_nodes(http, OPERATOR)
        .await?
        .iter()
        .filter(|n| n["alive"] == true)
        .map(|n| {
            let url = n["url"].as_str().unwrap_or_default().to_owned();
            let held = n["partitions"].as_array().into_iter().flatten();
            (url, held.filter_map(Value::as_i64).collect())
        })
        .collect())
}

/// Waits until `count` nodes are alive and every partition has one of them as owner.
async fn settled(
    node: &Node,
    http: &reqwest::Client,
    count: usize,
) -> anyhow::Result<Vec<(String, Vec<i64>)>> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let nodes = alive(node, http).await?;
        let held: usize = nodes.iter().map(|(_, p)| p.len()).sum();
        if nodes.len() == count && held == 64 {
            return Ok(nodes);
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "the nodes never settled: {nodes:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn forward(server: &BenchServer, turns: usize) -> anyhow::Result<()> {
    let (_, channel) = server
        .assistant_channel(
            "You help {{identity.name}}.",
            &json!({"name": "Bench line", "integration": "sandbox"}),
        )
        .await?;
    let identity = server
        .send(
            reqwest::Method::PUT,
            "/identity/bench-0",
            &json!({"name": "Person 0"}),
        )
        .await?;
    let identity: uuid::Uuid = identity["data"]["id"].as_str().context("id")?.parse()?;
    let nodes = [start_node(server)?, start_node(server)?];
    let held = settled(&nodes[0], &server.http, 2).await?;
    let partition = i64::from(parley_actors::cluster::partition_of(identity, 64));
    let owner_url = &held
        .iter()
        .find(|(_, p)| p.contains(&partition))
        .context("owner")?
        .0;
    let (owner, other) = if &nodes[0].url == owner_url {
        (&nodes[0], &nodes[1])
    } else {
        (&nodes[1], &nodes[0])
    };
    let turn = |node: &Node, n: usize| {
        let url = format!("{}/conversation/bench-0/chat/{channel}", node.url);
        let request = server
            .http
            .post(url)
            .bearer_auth(&server.key)
            .json(&json!({"message": format!("hello {n}")}));
        async move {
            let started = Instant::now();
            let answer = request.send().await?;
            anyhow::ensure!(answer.status().is_success(), "{}", answer.status());
            answer.bytes().await?;
            Ok::<_, anyhow::Error>(started.elapsed())
        }
    };
    // Warm both paths (connections, caches), then interleave.
    for n in 0..20 {
        turn(owner, n).await?;
        turn(other, n).await?;
    }
    let (mut local, mut forwarded) = (Vec::new(), Vec::new());
    for n in 0..turns {
        local.push(turn(owner, n).await?);
        forwarded.push(turn(other, n).await?);
    }
    println!("cluster forward, {turns} turns each, PostgreSQL, 2 nodes");
    print_comparison(
        "turn at the identity's owner",
        &local,
        "turn at the other node (forwarded)",
        &forwarded,
    )
}

async fn failover(server: &BenchServer, rounds: usize) -> anyhow::Result<()> {
    let survivor = start_node(server)?;
    let mut times = Vec::new();
    for round in 0..rounds {
        // A new node joins, takes half the partitions, and is killed.
        let mut victim = start_node(server)?;
        settled(&survivor, &server.http, 2).await?;
        let killed = Instant::now();
        victim.child.kill()?;
        victim.child.wait()?;
        settled(&survivor, &server.http, 1).await?;
        let took = killed.elapsed();
        println!(
            "round {round}: kill -9 to every partition owned by the survivor: {:.2} s",
            took.as_secs_f64()
        );
        times.push(took);
    }
    let worst = times.iter().max().copied().unwrap_or_default();
    println!(
        "cluster failover, defaults (heartbeat 2 s, lease 10 s): worst {:.2} s of {rounds}",
        worst.as_secs_f64()
    );
    Ok(())
}

async fn throughput(server: &BenchServer, messages: usize) -> anyhow::Result<()> {
    let (_, channel) = server
        .assistant_channel(
            "You help.",
            &json!({"name": "Live", "accessToken": "bench-token", "phoneNumberId": NUMBER, "businessId": "waba-1"}),
        )
        .await?;
    // (nodes, senders): groups 0 to 3 are new in the first phase that uses them and
    // returning in the second, under the other count of nodes. Groups 4 and 5 are imported:
    // the API created their identities first, in any partition; each has its first turns
    // under one count of nodes and its second under the other, so both counts meet each kind.
    let phases = [
        (1, 0),
        (3, 1),
        (1, 1),
        (3, 0),
        (1, 4),
        (3, 4),
        (1, 2),
        (3, 3),
        (1, 3),
        (3, 2),
        (3, 5),
        (1, 5),
    ];
    const AREAS: [&str; 6] = [
        "1415555", "1650555", "1408555", "1510555", "1212555", "1312555",
    ];
    const IMPORTED: [usize; 2] = [4, 5];
    import(server, &AREAS[4..], messages.min(10_000)).await?;
    let mut rates = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for (phase, (count, senders)) in phases.into_iter().enumerate() {
        let who = if IMPORTED.contains(&senders) {
            Who::Imported
        } else if seen.insert(senders) {
            Who::New
        } else {
            Who::Returning
        };
        let nodes: Vec<Node> = (0..count)
            .map(|_| start_node(server))
            .collect::<anyhow::Result<_>>()?;
        settled(&nodes[0], &server.http, count).await?;
        let before = server.graph.sent_count();
        let started = Instant::now();
        let posts = futures_util::stream::iter(0..messages).map(|i| {
            let node = &nodes[i % count];
            let area = AREAS[senders];
            let from = format!("{area}{:04}", i % 10_000);
            let payload = text_message(
                NUMBER,
                &from,
                "Bench",
                &format!("wamid.B{phase}x{i}"),
                "hello",
            );
            let url = format!("{}/webhooks/waba/{channel}", node.url);
            async move { server.graph.post_webhook(&url, APP_SECRET, &payload).await }
        });
        let statuses: Vec<u16> = posts.buffer_unordered(64).collect().await;
        anyhow::ensure!(statuses.iter().all(|s| *s == 200), "a webhook was refused");
        let deadline = Instant::now() + Duration::from_secs(300);
        while server.graph.sent_count() < before + messages {
            anyhow::ensure!(
                Instant::now() < deadline,
                "only {} answered",
                server.graph.sent_count() - before
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let rate = messages as f64 / started.elapsed().as_secs_f64();
        println!(
            "{count} node(s), {} senders: {messages} messages answered in {} ({rate:.0} msg/s)",
            who.name(),
            ms(started.elapsed())
        );
        rates.push((count, who, rate));
        drop(nodes);
    }
    let mean = |k: usize, who: Who| {
        let of: Vec<f64> = rates
            .iter()
            .filter(|(c, w, _)| *c == k && *w == who)
            .map(|(_, _, rate)| *rate)
            .collect();
        of.iter().sum::<f64>() / of.len().max(1) as f64
    };
    for who in [Who::New, Who::Returning, Who::Imported] {
        println!(
            "cluster throughput, PostgreSQL, {} senders: 3 nodes / 1 node = {:.2}x",
            who.name(),
            mean(3, who) / mean(1, who)
        );
    }
    Ok(())
}

/// Whose messages a phase of `throughput` answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Who {
    /// People Parley has not met: their identities are created in the channel's partition.
    New,
    /// People first met on WhatsApp in an earlier phase.
    Returning,
    /// People whose identities the API created, in any partition.
    Imported,
}

impl Who {
    fn name(self) -> &'static str {
        match self {
            Self::New => "new",
            Self::Returning => "returning",
            Self::Imported => "imported",
        }
    }
}

/// Creates through the in-process server (a single node: any partition) the identities of
/// `count` senders in each of `areas`, as an integrator importing its contacts would.
async fn import(server: &BenchServer, areas: &[&str], count: usize) -> anyhow::Result<()> {
    let people = areas
        .iter()
        .flat_map(|area| (0..count).map(move |i| format!("{area}{i:04}")));
    let made: Vec<anyhow::Result<Value>> = futures_util::stream::iter(people)
        .map(|phone| async move {
            let body = json!({"name": "Imported", "phone": format!("+{phone}")});
            let path = format!("/identity/imported-{phone}");
            server.send(reqwest::Method::PUT, &path, &body).await
        })
        .buffer_unordered(16)
        .collect()
        .await;
    made.into_iter().try_for_each(|made| made.map(drop))
}
