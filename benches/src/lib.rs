//! Parley's load harness. Every benchmark reports its result next to a baseline measured in
//! the same run, because shared machines are noisy: read the ratios and differences, not the
//! absolute numbers.
//!
//! - `chat_latency`: the latency a chat turn adds over the fake model's own time.
//! - `webhook_throughput`: webhook-to-reply messages per second against a bare axum handler
//!   doing the same database writes.
//!
//! [`BenchServer`] starts Parley in-process on a fresh database with the testkit fakes, the
//! same way for every bench.

use std::path::Path;
use std::time::Duration;

use anyhow::Context;
use parley::config::Settings;
use parley::startup::Application;
use parley::tenancy::{BootstrapRequest, bootstrap};
use parley_persistence::ConnectionTrait;
use parley_testkit::{FakeGraph, FakeModel};
use sea_orm::Statement;
use serde_json::Value;
use tokio::sync::oneshot;

/// The `parley` binary's allocator (`src/main.rs`), so that every bench measures what the
/// server runs, its baselines included; it counts the heap a bench holds once asked to
/// ([`heap::count`]).
#[global_allocator]
static ALLOCATOR: heap::Counted = heap::Counted;

pub mod heap;
pub mod spans;

pub use spans::{SpanTimes, Timeline};

/// Parley running in-process on a fresh database, with the testkit fakes and one
/// bootstrapped workspace.
pub struct BenchServer {
    /// `http://127.0.0.1:<port>`
    pub base: String,
    /// A key with every permission.
    pub key: String,
    /// The bootstrapped workspace.
    pub workspace_id: i64,
    /// The fake model Parley talks to.
    pub model: FakeModel,
    /// The fake Graph API Parley talks to.
    pub graph: FakeGraph,
    /// An HTTP client for the bench's requests.
    pub http: reqwest::Client,
    database: BenchDatabase,
    stop: oneshot::Sender<()>,
    server: tokio::task::JoinHandle<anyhow::Result<()>>,
    _dir: tempfile::TempDir,
}

impl BenchServer {
    /// Starts Parley after `configure` adjusts its settings (bind, database, fakes are set).
    ///
    /// # Errors
    /// Fails when the database or the server cannot start.
    pub async fn start(configure: impl FnOnce(&mut Settings)) -> anyhow::Result<Self> {
        // As `parley serve` does.
        parley::huge_pages::turn_off();
        parley_actors::llm::install_crypto_provider();
        let dir = tempfile::tempdir()?;
        let model = FakeModel::start().await;
        // No bench reads the requests back, and keeping them would count as the server's memory.
        model.stop_recording();
        let graph = FakeGraph::start().await;
        let database = BenchDatabase::create(dir.path()).await?;
        // The defaults with the server's own `PARLEY_*` variables over them (no file), so
        // that a run can try a setting: `PARLEY_CONVERSATION_ACTOR_REST_MS=1000`.
        let mut settings = Settings::load(
            Some(&dir.path().join("parley.toml")),
            &parley::config::Overrides::default(),
        )
        .map_err(|e| anyhow::anyhow!("PARLEY_ settings: {e}"))?;
        settings.data_dir = dir.path().to_path_buf();
        settings.server.bind = "127.0.0.1:0".parse()?;
        settings.database.url = Some(database.url.clone());
        settings.llm.base_url = Some(model.base_url());
        settings.llm.model = Some("fake".to_owned());
        settings.whatsapp.graph_url = graph.base_url();
        // The fake MCP servers listen on loopback.
        settings.egress.allow = "127.0.0.0/8".to_owned();
        configure(&mut settings);
        let app = Application::build(settings).await?;
        let base = format!("http://{}", app.local_addr()?);
        let db = parley_persistence::connect(&database.url).await?;
        let owner = bootstrap(
            &db,
            &BootstrapRequest {
                workspace: "Bench".to_owned(),
                business: "Bench".to_owned(),
                email: None,
            },
        )
        .await?;
        db.close().await?;
        let (stop, stopped) = oneshot::channel::<()>();
        let server = tokio::spawn(app.run_until(async {
            let _ = stopped.await;
        }));
        Ok(Self {
            base,
            key: owner.api_key,
            workspace_id: owner.workspace_id,
            model,
            graph,
            http: reqwest::Client::new(),
            database,
            stop,
            server,
            _dir: dir,
        })
    }

    /// `method` `path` with the key and a JSON body; fails unless the answer is a success.
    ///
    /// # Errors
    /// Fails on a transport error or a non-success status.
    pub async fn send(
        &self,
        method: reqwest::Method,
        path: &str,
        body: &Value,
    ) -> anyhow::Result<Value> {
        self.send_as(&self.key, method, path, body).await
    }

    /// As [`BenchServer::send`], with `key`.
    ///
    /// # Errors
    /// Fails on a transport error or a non-success status.
    pub async fn send_as(
        &self,
        key: &str,
        method: reqwest::Method,
        path: &str,
        body: &Value,
    ) -> anyhow::Result<Value> {
        let response = self
            .http
            .request(method, format!("{}{path}", self.base))
            .bearer_auth(key)
            .json(body)
            .send()
            .await?;
        let status = response.status();
        let body: Value = response.json().await?;
        anyhow::ensure!(status.is_success(), "{path}: {status}: {body}");
        Ok(body)
    }

    /// POST with the key; answers the body's `data`.
    ///
    /// # Errors
    /// Fails on a transport error or a non-success status.
    pub async fn post(&self, path: &str, body: &Value) -> anyhow::Result<Value> {
        Ok(self.send(reqwest::Method::POST, path, body).await?["data"].clone())
    }

    /// A worker with one assistant of `instructions`, synced to a new channel made from
    /// `channel` (a `POST /channels/waba` body); answers the assistant's and the channel's
    /// ids.
    ///
    /// # Errors
    /// Fails when a request fails.
    pub async fn assistant_channel(
        &self,
        instructions: &str,
        channel: &Value,
    ) -> anyhow::Result<(String, String)> {
        self.assistant_channel_as(&self.key, instructions, channel)
            .await
    }

    /// As [`BenchServer::assistant_channel`], in the workspace of `key`.
    ///
    /// # Errors
    /// Fails when a request fails.
    pub async fn assistant_channel_as(
        &self,
        key: &str,
        instructions: &str,
        channel: &Value,
    ) -> anyhow::Result<(String, String)> {
        let post = |path: String, body: Value| async move {
            let answer = self
                .send_as(key, reqwest::Method::POST, &path, &body)
                .await?;
            anyhow::Ok(answer["data"].clone())
        };
        let worker = post("/workers".to_owned(), serde_json::json!({"name": "Bench"})).await?;
        let worker = worker["worker_id"]
            .as_str()
            .context("worker id")?
            .to_owned();
        let assistant = post(
            format!("/workers/{worker}/assistants"),
            serde_json::json!({"name": "Bench", "instructions": instructions}),
        )
        .await?;
        let assistant = assistant["assistant_id"]
            .as_str()
            .context("assistant id")?
            .to_owned();
        let channel = post("/channels/waba".to_owned(), channel.clone()).await?;
        let channel = channel["id"].as_str().context("channel id")?.to_owned();
        post(
            format!("/channels/{channel}/worker/{worker}"),
            serde_json::json!({}),
        )
        .await?;
        Ok((assistant, channel))
    }

    /// The URL of the run's database, for benches that write to it directly.
    pub fn database_url(&self) -> &str {
        &self.database.url
    }

    /// `SQLite` or `PostgreSQL`.
    pub fn database_kind(&self) -> &'static str {
        self.database.kind()
    }

    /// Stops the server and drops a PostgreSQL database made for the run.
    ///
    /// # Errors
    /// Fails when the server failed or the database cannot be dropped.
    pub async fn stop(self) -> anyhow::Result<()> {
        let _ = self.stop.send(());
        self.server.await??;
        self.database.drop_database().await
    }
}

/// A fresh database for one bench run: SQLite in a directory, or, when
/// `PARLEY_BENCH_DATABASE_URL` names a PostgreSQL server, a database created on it for the run
/// and dropped afterwards (the URL's role needs `CREATEDB`).
#[derive(Debug)]
pub struct BenchDatabase {
    /// The URL the run uses.
    pub url: String,
    postgres: Option<(String, String)>,
    /// Analyzes the run's PostgreSQL database while the server's autovacuum is off.
    analyzer: Option<tokio::task::JoinHandle<()>>,
}

/// How often a run analyzes its PostgreSQL database when the server's autovacuum is off.
const ANALYZE_EVERY: Duration = Duration::from_secs(60);

impl BenchDatabase {
    /// Creates the database; `dir` holds a SQLite file.
    ///
    /// # Errors
    /// Fails when PostgreSQL cannot be reached or the database cannot be created.
    pub async fn create(dir: &Path) -> anyhow::Result<Self> {
        let Ok(admin_url) = std::env::var("PARLEY_BENCH_DATABASE_URL") else {
            return Ok(Self {
                url: parley_persistence::sqlite_url_in(dir),
                postgres: None,
                analyzer: None,
            });
        };
        let name = format!("parley_bench_{}", uuid::Uuid::now_v7().simple());
        let admin = parley_persistence::connect(&admin_url).await?;
        admin
            .execute_unprepared(&format!("CREATE DATABASE \"{name}\""))
            .await?;
        let autovacuum = admin
            .query_one_raw(Statement::from_string(
                admin.get_database_backend(),
                "SHOW autovacuum",
            ))
            .await?
            .context("SHOW autovacuum answered no row")?
            .try_get_by_index::<String>(0)?;
        admin.close().await?;
        let base = admin_url
            .rsplit_once('/')
            .map_or(admin_url.as_str(), |(b, _)| b);
        let url = format!("{base}/{name}");
        let analyzer = if autovacuum == "on" {
            None
        } else {
            eprintln!(
                "autovacuum is off on this server: the run analyzes its database every {} s, as autovacuum would",
                ANALYZE_EVERY.as_secs()
            );
            Some(tokio::spawn(analyze_every(url.clone(), ANALYZE_EVERY)))
        };
        Ok(Self {
            url,
            postgres: Some((admin_url.clone(), name)),
            analyzer,
        })
    }

    /// `SQLite` or `PostgreSQL`, for reports.
    pub fn kind(&self) -> &'static str {
        if self.postgres.is_some() {
            "PostgreSQL"
        } else {
            "SQLite"
        }
    }

    /// Drops a PostgreSQL database made for the run.
    ///
    /// # Errors
    /// Fails when PostgreSQL cannot be reached.
    pub async fn drop_database(self) -> anyhow::Result<()> {
        if let Some(analyzer) = self.analyzer {
            analyzer.abort();
        }
        if let Some((admin_url, name)) = self.postgres {
            let admin = parley_persistence::connect(&admin_url).await?;
            admin
                .execute_unprepared(&format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)"))
                .await?;
            admin.close().await?;
        }
        Ok(())
    }
}

/// Runs `ANALYZE` on the database at `url` every `period`. PostgreSQL's planner picks plans
/// from the tables' statistics, which autovacuum keeps (README.md, "PostgreSQL's
/// statistics"): on a server with it off, a bench whose tables grow would measure plans made
/// for empty tables, which no production server runs (at 130,000 senders the phone lookup
/// read every contact point of the workspace, and turns ran at a third of their speed).
async fn analyze_every(url: String, period: Duration) {
    let db = match parley_persistence::connect(&url).await {
        Ok(db) => db,
        Err(error) => {
            eprintln!("the run's database cannot be analyzed: {error}");
            return;
        }
    };
    let mut ticks = tokio::time::interval(period);
    ticks.tick().await;
    loop {
        ticks.tick().await;
        if let Err(error) = db.execute_unprepared("ANALYZE").await {
            eprintln!("ANALYZE of the run's database failed: {error}");
        }
    }
}

/// Latency percentiles of a sample.
#[derive(Clone, Copy, Debug)]
pub struct Percentiles {
    /// Median.
    pub p50: Duration,
    /// 99th percentile.
    pub p99: Duration,
    /// Mean.
    pub mean: Duration,
}

impl Percentiles {
    /// Percentiles of `samples` (nearest rank); `None` when empty.
    pub fn of(samples: &[Duration]) -> Option<Self> {
        if samples.is_empty() {
            return None;
        }
        let mut sorted = samples.to_vec();
        sorted.sort();
        let rank = |p: f64| {
            let index = ((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len()) - 1;
            sorted[index]
        };
        let total: Duration = sorted.iter().sum();
        Some(Self {
            p50: rank(0.50),
            p99: rank(0.99),
            mean: total / u32::try_from(sorted.len()).unwrap_or(u32::MAX),
        })
    }
}

/// Prints p50, p99 and mean of `baseline` and `measured`, what `measured` adds, and their
/// ratio: the report of every latency bench.
///
/// # Errors
/// Fails when a sample is empty.
pub fn print_comparison(
    baseline_label: &str,
    baseline: &[Duration],
    measured_label: &str,
    measured: &[Duration],
) -> anyhow::Result<()> {
    let base_p = Percentiles::of(baseline).context("no baseline samples")?;
    let measured_p = Percentiles::of(measured).context("no samples")?;
    let added = |a: Duration, b: Duration| a.saturating_sub(b);
    println!("{:<36} {:>12} {:>12} {:>12}", "", "p50", "p99", "mean");
    for (label, p) in [(baseline_label, base_p), (measured_label, measured_p)] {
        println!(
            "{label:<36} {:>12} {:>12} {:>12}",
            ms(p.p50),
            ms(p.p99),
            ms(p.mean)
        );
    }
    println!(
        "{:<36} {:>12} {:>12} {:>12}",
        "added by Parley",
        ms(added(measured_p.p50, base_p.p50)),
        ms(added(measured_p.p99, base_p.p99)),
        ms(added(measured_p.mean, base_p.mean))
    );
    println!(
        "ratio: p50 {:.1}x, p99 {:.1}x",
        measured_p.p50.as_secs_f64() / base_p.p50.as_secs_f64().max(1e-9),
        measured_p.p99.as_secs_f64() / base_p.p99.as_secs_f64().max(1e-9)
    );
    Ok(())
}

/// Milliseconds with two decimals, for reports.
pub fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1000.0)
}

/// A line of this process's `/proc/self/status` in KiB (`VmRSS`, `VmHWM`; 0 where there is no
/// such file).
pub fn memory_kib(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find(|l| l.starts_with(field))
                .and_then(|l| l.split_whitespace().nth(1).and_then(|v| v.parse().ok()))
        })
        .unwrap_or(0)
}

/// The CPU time this process has used so far, all its threads together, dead ones included
/// (`/proc/self/stat`, in the kernel's ticks of 10 ms; zero where there is no such file).
pub fn cpu_time() -> Duration {
    const TICKS_PER_SECOND: u64 = 100;
    let ticks = std::fs::read_to_string("/proc/self/stat")
        .ok()
        .and_then(|stat| {
            // The command's name, in parentheses, may hold spaces: the fields follow its end.
            let (_, fields) = stat.rsplit_once(')')?;
            let mut fields = fields.split_whitespace().skip(11);
            let user: u64 = fields.next()?.parse().ok()?;
            let system: u64 = fields.next()?.parse().ok()?;
            Some(user + system)
        })
        .unwrap_or(0);
    Duration::from_millis(ticks * 1000 / TICKS_PER_SECOND)
}

/// What posting signed events straight to a receiver measured.
pub struct DirectPosts {
    /// Posts per second.
    pub rate: f64,
    /// The process's CPU time per post: the client's signing and request and the receiver's
    /// answer, on the same cores.
    pub cpu_per_post: Duration,
}

/// How the direct posts are made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Posting {
    /// Each slot on a connection of its own that the posting task drives, as a lane posts
    /// (`parley_actors::egress::Dialer`, since the forty-seventh session).
    Driven,
    /// Through a pooled client whose connections are tasks of their own (reqwest), as lanes
    /// posted before and as the baseline was measured.
    Pooled,
}

/// Posts `events` copies of `body` to a fresh [`CountingReceiver`], signed as Parley signs
/// them (Standard Webhooks headers), `in_flight` at a time, made as `posting` says: what a
/// delivery costs with no queue, no row and no retry behind it.
///
/// # Errors
/// When the receiver cannot start or the posts do not all arrive.
pub async fn post_directly(
    events: usize,
    body: &str,
    in_flight: usize,
    posting: Posting,
) -> anyhow::Result<DirectPosts> {
    let receiver = CountingReceiver::start().await?;
    let in_flight = in_flight.max(1);
    let (started, cpu) = (std::time::Instant::now(), cpu_time());
    match posting {
        Posting::Driven => post_driven(&receiver.url, events, body, in_flight).await?,
        Posting::Pooled => post_pooled(&receiver.url, events, body, in_flight).await,
    }
    receiver.wait_for(events).await?;
    let cpu = cpu_time().saturating_sub(cpu);
    Ok(DirectPosts {
        rate: events as f64 / started.elapsed().as_secs_f64(),
        cpu_per_post: cpu / u32::try_from(events.max(1)).unwrap_or(u32::MAX),
    })
}

/// The Standard Webhooks headers of one post of `body`, signed with `secret`.
fn signed_headers(secret: &str, body: &str) -> anyhow::Result<reqwest::header::HeaderMap> {
    use parley_actors::events::sign;
    use reqwest::header::{CONTENT_TYPE, HeaderMap, HeaderValue};
    let id = uuid::Uuid::now_v7().to_string();
    let timestamp = parley_persistence::clock::now().timestamp();
    let signature = sign::signature(&[secret], &id, timestamp, body);
    let mut headers = HeaderMap::with_capacity(4);
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    headers.insert("webhook-id", HeaderValue::try_from(id)?);
    headers.insert("webhook-timestamp", HeaderValue::from(timestamp));
    headers.insert("webhook-signature", HeaderValue::try_from(signature)?);
    Ok(headers)
}

/// [`Posting::Driven`]: `in_flight` slots polled by this task, each posting every
/// `in_flight`-th event on its own connection.
async fn post_driven(url: &str, events: usize, body: &str, in_flight: usize) -> anyhow::Result<()> {
    use parley_actors::egress::Egress;
    let url = reqwest::Url::parse(url)?;
    let dialer =
        std::sync::Arc::new(Egress::parse("127.0.0.1")?).dialer(std::time::Duration::from_secs(15));
    let secret = parley_actors::events::sign::new_secret();
    let bytes = bytes::Bytes::from(body.to_owned());
    let slots = (0..in_flight).map(|slot| {
        let (dialer, url, secret, bytes) = (&dialer, &url, &secret, &bytes);
        async move {
            let mut connection = dialer.connect(url).await?;
            for _ in (slot..events).step_by(in_flight) {
                let headers = signed_headers(secret, body)?;
                connection.post(url.path(), headers, bytes.clone()).await?;
            }
            anyhow::Ok(())
        }
    });
    for posted in futures_util::future::join_all(slots).await {
        posted?;
    }
    Ok(())
}

/// [`Posting::Pooled`]: through reqwest, `in_flight` requests at a time.
async fn post_pooled(url: &str, events: usize, body: &str, in_flight: usize) {
    use futures_util::StreamExt;
    let http = reqwest::Client::new();
    let secret = parley_actors::events::sign::new_secret();
    futures_util::stream::iter(0..events)
        .map(|_| {
            let headers = signed_headers(&secret, body).unwrap_or_default();
            http.post(url).headers(headers).body(body.to_owned()).send()
        })
        .buffer_unordered(in_flight)
        .for_each(|_| async {})
        .await;
}

/// An event webhook receiver that answers 200 at once and counts what it took.
pub struct CountingReceiver {
    /// Where it listens: `http://127.0.0.1:<port>/hook`.
    pub url: String,
    count: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

impl CountingReceiver {
    /// Listens on a port of its own.
    ///
    /// # Errors
    /// Fails when it cannot bind.
    pub async fn start() -> anyhow::Result<Self> {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let count = std::sync::Arc::new(AtomicUsize::new(0));
        let counted = count.clone();
        let app = axum::Router::new().route(
            "/hook",
            axum::routing::post(move |_body: axum::body::Bytes| {
                let counted = counted.clone();
                async move {
                    counted.fetch_add(1, Ordering::Relaxed);
                    axum::http::StatusCode::OK
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let url = format!("http://{}/hook", listener.local_addr()?);
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(Self { url, count })
    }

    /// Requests taken so far.
    pub fn count(&self) -> usize {
        self.count.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Waits until it took `count` requests (a minute at most).
    ///
    /// # Errors
    /// Fails when they do not arrive in time.
    pub async fn wait_for(&self, count: usize) -> anyhow::Result<()> {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while self.count() < count {
            anyhow::ensure!(
                std::time::Instant::now() < deadline,
                "only {} of {count} events arrived",
                self.count()
            );
            tokio::time::sleep(std::time::Duration::from_millis(1)).await;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_use_the_nearest_rank() {
        let samples: Vec<Duration> = (1..=100).map(Duration::from_millis).collect();
        let p = Percentiles::of(&samples).expect("some");
        assert_eq!(p.p50, Duration::from_millis(50));
        assert_eq!(p.p99, Duration::from_millis(99));
        assert!(Percentiles::of(&[]).is_none());
    }
}
