//! Read throughput of the API next to raw sqlx doing the same SQL behind a bare axum handler.
//!
//! Starts Parley in-process on SQLite (or `PARLEY_BENCH_DATABASE_URL`) with one identity (with
//! a phone) and 20 workers, and a bare axum server on the same database and pool size whose
//! handlers run the statements Parley's do, through sqlx with no ORM: the key joined with its
//! workspace (remembered for 10 s, as Parley remembers it), then the identity and its contact
//! points (`GET /identity/{id}`), or the count and the first page of workers (`GET /workers`),
//! answered as JSON. 32 clients at a time; the
//! two servers take turns, endpoint by endpoint, so both see the same machine weather.
//!
//! With `PARLEY_BENCH_SPANS` set (a tracing filter, e.g. `parley=debug,sqlx::query=debug`) it
//! also prints the mean wall time of Parley's spans, and its statements, per request.
//!
//! Run: `cargo run --release -p parley-benches --bin crud_reads -- [requests per endpoint]`

use std::collections::HashMap;
use std::sync::{Arc, PoisonError, RwLock};
use std::time::{Duration, Instant};

use anyhow::Context;
use axum::Json;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use futures_util::StreamExt;
use parley_benches::{BenchServer, Percentiles, SpanTimes, ms};
use sea_orm::sqlx::{self, Row};
use serde_json::{Value, json};

const CLIENTS: usize = 32;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let requests: usize = std::env::args()
        .nth(1)
        .map_or(Ok(5000), |a| a.parse())
        .context("requests")?;
    let spans = SpanTimes::install();
    let server = BenchServer::start(|_| {}).await?;
    let identity = server
        .send(
            reqwest::Method::PUT,
            "/identity/crm-1",
            &json!({"name": "Maria", "phone": "+351912345678"}),
        )
        .await?["data"]["id"]
        .as_str()
        .context("identity id")?
        .to_owned();
    for n in 0..20 {
        server
            .post("/workers", &json!({"name": format!("Worker {n}")}))
            .await?;
    }
    let baseline = Baseline::start(server.database_url()).await?;

    println!(
        "crud_reads: {requests} requests per endpoint, {CLIENTS} clients, database {}",
        server.database_kind()
    );
    println!("{:<48} {:>12} {:>10} {:>10}", "", "req/s", "p50", "p99");
    let endpoints = [format!("/identity/{identity}"), "/workers".to_owned()];
    for path in &endpoints {
        let bare = load(
            &server.http,
            &format!("{}{path}", baseline.base),
            &server.key,
            requests,
        )
        .await?;
        if let Some(spans) = &spans {
            spans.reset();
        }
        let parley = load(
            &server.http,
            &format!("{}{path}", server.base),
            &server.key,
            requests,
        )
        .await?;
        if let Some(spans) = &spans {
            println!("spans of Parley's GET {}:", short(path));
            spans.print(requests);
        }
        for (label, run) in [("raw sqlx + bare axum", &bare), ("Parley", &parley)] {
            let p = Percentiles::of(&run.latencies).context("samples")?;
            println!(
                "{:<48} {:>12.0} {:>10} {:>10}",
                format!("GET {} ({label})", short(path)),
                run.rate,
                ms(p.p50),
                ms(p.p99)
            );
        }
        println!(
            "{:<48} {:>12.2}",
            format!("ratio Parley/raw, GET {}", short(path)),
            parley.rate / bare.rate
        );
    }
    server.stop().await
}

fn short(path: &str) -> &str {
    if path.starts_with("/identity/") {
        "/identity/{id}"
    } else {
        path
    }
}

struct Run {
    rate: f64,
    latencies: Vec<Duration>,
}

/// `requests` GETs of `url` with `key`, `CLIENTS` at a time; every answer must be a 200.
async fn load(
    http: &reqwest::Client,
    url: &str,
    key: &str,
    requests: usize,
) -> anyhow::Result<Run> {
    // Warm-up: connections, caches, prepared statements.
    for _ in 0..CLIENTS {
        get(http, url, key).await?;
    }
    let started = Instant::now();
    let latencies: Vec<Duration> = futures_util::stream::iter(0..requests)
        .map(|_| async {
            let sent = Instant::now();
            get(http, url, key).await.map(|()| sent.elapsed())
        })
        .buffer_unordered(CLIENTS)
        .collect::<Vec<_>>()
        .await
        .into_iter()
        .collect::<anyhow::Result<_>>()?;
    Ok(Run {
        rate: requests as f64 / started.elapsed().as_secs_f64(),
        latencies,
    })
}

async fn get(http: &reqwest::Client, url: &str, key: &str) -> anyhow::Result<()> {
    let response = http.get(url).bearer_auth(key).send().await?;
    let status = response.status();
    let body = response.bytes().await?;
    anyhow::ensure!(status == 200, "{url}: {status}: {body:?}");
    Ok(())
}

/// The bare server: sqlx pools of the same size as Parley's, statements written by hand.
#[derive(Clone)]
enum Pool {
    Sqlite(sqlx::SqlitePool),
    Postgres(sqlx::PgPool),
}

struct Baseline {
    base: String,
}

/// The bare server's state: its pool, and the keys it authenticated recently, remembered for
/// as long as Parley remembers them (so both run the same statements per request).
struct Bare {
    pool: Pool,
    keys: RwLock<HashMap<String, (i64, Instant)>>,
}

/// How long Parley remembers an authenticated key (`src/http/auth.rs`).
const KEY_TTL: Duration = Duration::from_secs(10);

impl Baseline {
    async fn start(url: &str) -> anyhow::Result<Self> {
        let pool = if url.starts_with("sqlite:") {
            Pool::Sqlite(
                sqlx::sqlite::SqlitePoolOptions::new()
                    .max_connections(8)
                    .connect(url)
                    .await?,
            )
        } else {
            Pool::Postgres(
                sqlx::postgres::PgPoolOptions::new()
                    .max_connections(16)
                    .connect(url)
                    .await?,
            )
        };
        let app = axum::Router::new()
            .route("/identity/{id}", axum::routing::get(identity))
            .route("/workers", axum::routing::get(workers))
            .with_state(Arc::new(Bare {
                pool,
                keys: RwLock::new(HashMap::new()),
            }));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let base = format!("http://{}", listener.local_addr()?);
        tokio::spawn(async move { axum::serve(listener, app).await });
        Ok(Self { base })
    }
}

/// Runs `$sql` with the binds on whichever pool and turns each row into JSON with `$to_json`
/// (expanded once per backend, so the column types resolve for each).
macro_rules! query_json {
    ($pool:expr, $sql:expr, [$($bind:expr),*], |$row:ident| $to_json:expr) => {
        match $pool {
            Pool::Sqlite(pool) => sqlx::query($sql)$(.bind($bind))*
                .fetch_all(pool).await
                .map(|rows| rows.iter().map(|$row| $to_json).collect::<Vec<Value>>()),
            Pool::Postgres(pool) => sqlx::query($sql)$(.bind($bind))*
                .fetch_all(pool).await
                .map(|rows| rows.iter().map(|$row| $to_json).collect::<Vec<Value>>()),
        }
        .map_err(|_| StatusCode::INTERNAL_SERVER_ERROR)
    };
}

/// Column `$i` of `$row` as `Option<$type>` (NULL and decoding failures alike are `None`).
macro_rules! col {
    ($row:ident, $i:expr, $type:ty) => {
        $row.try_get::<Option<$type>, _>($i).ok().flatten()
    };
}

type Time = chrono::DateTime<chrono::Utc>;

/// The key's workspace, as Parley's authentication finds it: from memory when it authenticated
/// in the last [`KEY_TTL`], else with one joined statement.
async fn authenticate(bare: &Bare, headers: &HeaderMap) -> Result<i64, StatusCode> {
    let token = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .ok_or(StatusCode::UNAUTHORIZED)?;
    let hash = parley::domain::hash_api_key(token);
    let remembered = bare
        .keys
        .read()
        .unwrap_or_else(PoisonError::into_inner)
        .get(&hash)
        .filter(|(_, at)| at.elapsed() < KEY_TTL)
        .map(|(workspace, _)| *workspace);
    if let Some(workspace) = remembered {
        return Ok(workspace);
    }
    let found = query_json!(
        &bare.pool,
        "SELECT k.id, k.workspace_id, k.user_id, k.permissions, k.revoked_at, k.expires_at, \
         k.last_used_at, w.id, w.business_id, w.name FROM api_keys k \
         JOIN workspaces w ON w.id = k.workspace_id WHERE k.key_hash = $1",
        [hash.clone()],
        |row| json!({"workspace": col!(row, 1, i64), "permissions": col!(row, 3, String),
                     "revoked": col!(row, 4, Time).is_some()})
    )?;
    let row = found.first().ok_or(StatusCode::UNAUTHORIZED)?;
    if row["revoked"] == true {
        return Err(StatusCode::UNAUTHORIZED);
    }
    let workspace = row["workspace"].as_i64().ok_or(StatusCode::UNAUTHORIZED)?;
    bare.keys
        .write()
        .unwrap_or_else(PoisonError::into_inner)
        .insert(hash, (workspace, Instant::now()));
    Ok(workspace)
}

async fn identity(
    State(bare): State<Arc<Bare>>,
    headers: HeaderMap,
    Path(id): Path<uuid::Uuid>,
) -> Result<Json<Value>, StatusCode> {
    let workspace = authenticate(&bare, &headers).await?;
    let found = query_json!(
        &bare.pool,
        "SELECT id, workspace_id, name, external_id, metadata, stage_id, opted_out, created_at, \
         updated_at FROM identities WHERE id = $1 AND workspace_id = $2",
        [id, workspace],
        |row| json!({"id": col!(row, 0, uuid::Uuid), "name": col!(row, 2, String),
            "external_id": col!(row, 3, String),
            "metadata": col!(row, 4, sqlx::types::Json<Value>).map(|j| j.0),
            "stage_id": col!(row, 5, uuid::Uuid), "opted_out": col!(row, 6, bool),
            "created_at": col!(row, 7, Time), "updated_at": col!(row, 8, Time)})
    )?;
    let mut record = found.into_iter().next().ok_or(StatusCode::NOT_FOUND)?;
    let contacts = query_json!(
        &bare.pool,
        "SELECT id, workspace_id, identity_id, kind, value, is_primary, created_at \
         FROM contact_points WHERE identity_id IN ($1) ORDER BY created_at, id",
        [id],
        |row| json!({"kind": col!(row, 3, String), "value": col!(row, 4, String)})
    )?;
    record["contacts"] = Value::Array(contacts);
    Ok(Json(
        json!({"message": "Identity retrieved successfully", "data": record}),
    ))
}

async fn workers(
    State(bare): State<Arc<Bare>>,
    headers: HeaderMap,
) -> Result<Json<Value>, StatusCode> {
    let workspace = authenticate(&bare, &headers).await?;
    let total = query_json!(
        &bare.pool,
        "SELECT COUNT(*) FROM workers WHERE workspace_id = $1",
        [workspace],
        |row| json!(col!(row, 0, i64))
    )?;
    let page = query_json!(
        &bare.pool,
        "SELECT id, workspace_id, name, description, timezone, created_at, updated_at \
         FROM workers WHERE workspace_id = $1 ORDER BY id LIMIT 20 OFFSET 0",
        [workspace],
        |row| json!({"id": col!(row, 0, uuid::Uuid), "name": col!(row, 2, String),
            "description": col!(row, 3, String), "timezone": col!(row, 4, String),
            "created_at": col!(row, 5, Time), "updated_at": col!(row, 6, Time)})
    )?;
    Ok(Json(
        json!({"message": "Workers retrieved successfully", "data": page,
        "pagination": {"page": 1, "limit": 20, "total": total.first()}}),
    ))
}
