//! What a million-task future costs: memory per stored task, and how punctually due tasks run
//! among many waiting ones.
//!
//! Starts Parley in-process (SQLite, or `PARLEY_BENCH_DATABASE_URL`), notes the process's RSS
//! with no tasks, stores N future tasks (default 100,000, due evenly over the next day; written
//! straight to the database, as creating them one by one over HTTP would only measure the API),
//! then creates 1,000 tasks through the API due within the next 10 seconds (`set_stage`, so that
//! the run itself costs little) and waits for them to run. Reports the RSS growth over the empty
//! server, the live task actors, and the lateness (due time to run start) of the 1,000.
//!
//! A workspace holds at most `actors.scheduler_task_quota` active tasks (1,000 by default), so
//! the future tasks belong to as many other workspaces of the bench's business as they need, as
//! a million tasks would on a real installation: the server runs with its default settings.
//! `--one-workspace` stores them all in the bench's own workspace instead, with the quota raised
//! to hold them (what a quota check costs in a workspace of that size).
//!
//! Run: `cargo run --release -p parley-benches --bin scheduler_scale -- [future tasks]`

use std::time::{Duration, Instant};

use anyhow::Context;
use futures_util::StreamExt;
use parley_benches::{BenchServer, Percentiles, memory_kib, ms};
use parley_persistence::entities::workspace;
use parley_persistence::scheduled_tasks::{self, NewTask};
use parley_persistence::{TaskType, clock};
use sea_orm::{ActiveModelTrait, ActiveValue::Set, ConnectionTrait};
use serde_json::{Value, json};

const DUE_SOON: usize = 1_000;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let one_workspace = std::env::args().any(|a| a == "--one-workspace");
    let future: usize = std::env::args()
        .skip(1)
        .find(|a| !a.starts_with("--"))
        .map_or(Ok(100_000), |a| a.parse())
        .context("future tasks")?;
    let server = BenchServer::start(|settings| {
        if one_workspace {
            settings.actors.scheduler_task_quota = (future + 2 * DUE_SOON) as u64;
        }
    })
    .await?;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let empty = memory_kib("VmRSS");
    let person = server
        .send(
            reqwest::Method::PUT,
            "/identity/bench-person",
            &json!({"name": "Bench", "phone": "+351912345678"}),
        )
        .await?["data"]["id"]
        .as_str()
        .context("identity id")?
        .to_owned();
    let stage = server
        .post("/stages", &json!({"name": "Bench stage"}))
        .await?;
    let stage = stage["id"].as_str().context("stage id")?.to_owned();

    let started = Instant::now();
    let workspace = server
        .send(reqwest::Method::GET, "/workspace", &json!({}))
        .await?["data"][0]["id"]
        .as_i64()
        .context("workspace id")?;
    let per_workspace = if one_workspace { future } else { PER_WORKSPACE };
    store_future(&server, workspace, future, one_workspace, &person, &stage).await?;
    let stored_in = started.elapsed();

    let creating = Instant::now();
    let now = chrono::Utc::now();
    let first_due = now + chrono::Duration::seconds(3);
    let ids: Vec<anyhow::Result<String>> = futures_util::stream::iter(0..DUE_SOON)
        .map(|i| {
            let due = first_due + chrono::Duration::milliseconds(i as i64 * 7);
            let server = &server;
            let body = json!({"name": format!("due-{i}"), "task_type": "set_stage",
                              "scheduled_at": due.to_rfc3339(),
                              "payload": {"identity_id": person, "stage_id": stage}});
            async move {
                let created = server.post("/scheduled-tasks", &body).await?;
                Ok(created["id"].as_str().context("task id")?.to_owned())
            }
        })
        .buffered(16)
        .collect()
        .await;
    let ids: Vec<String> = ids.into_iter().collect::<anyhow::Result<_>>()?;
    let created_in = creating.elapsed();
    let live_while_due = server
        .send(reqwest::Method::GET, "/admin/actors", &json!({}))
        .await
        .ok();

    let lateness = wait_for_runs(&server, &ids).await?;
    let peak = memory_kib("VmHWM");
    let now_rss = memory_kib("VmRSS");
    let late = Percentiles::of(&lateness).context("no runs")?;
    let latest = lateness.iter().max().copied().unwrap_or_default();
    println!(
        "scheduler_scale: {future} future tasks over the next day ({} a workspace) + {DUE_SOON} due within 10 s, {}",
        per_workspace,
        server.database_kind()
    );
    println!(
        "{:<46} {:>14}",
        "future tasks stored in",
        format!("{:.1} s", stored_in.as_secs_f64())
    );
    println!(
        "{:<46} {:>14}",
        "the 1,000 due tasks created (API) in",
        format!("{:.2} s", created_in.as_secs_f64())
    );
    println!(
        "{:<46} {:>14}",
        "RSS, empty server",
        format!("{} MiB", empty / 1024)
    );
    println!(
        "{:<46} {:>14}",
        "RSS after the due tasks ran",
        format!("{} MiB", now_rss / 1024)
    );
    println!(
        "{:<46} {:>14}",
        "RSS growth over the empty server",
        format!("{} MiB", now_rss.saturating_sub(empty) / 1024)
    );
    println!(
        "{:<46} {:>14}",
        "peak RSS of the bench process",
        format!("{} MiB", peak / 1024)
    );
    println!(
        "{:<46} {:>14}",
        "lateness of the due tasks p50 / p99",
        format!("{} / {}", ms(late.p50), ms(late.p99))
    );
    println!("{:<46} {:>14}", "lateness max", ms(latest));
    if let Some(tree) = live_while_due {
        let scheduler = tree["data"]["supervisors"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|s| s["path"] == "root/scheduler")
            .map(|s| s["live"].clone())
            .unwrap_or(Value::Null);
        println!(
            "{:<46} {:>14}",
            "live task actors while the 1,000 were due",
            scheduler.to_string()
        );
    }
    server.stop().await
}

/// Future tasks per workspace (and per transaction): the default quota of active tasks.
const PER_WORKSPACE: usize = 1_000;

/// Stores `count` tasks due evenly over the next day, straight to the database: all in
/// `workspace` when `one_workspace`, else [`PER_WORKSPACE`] to a new workspace of the business
/// that owns it.
async fn store_future(
    server: &BenchServer,
    workspace: i64,
    count: usize,
    one_workspace: bool,
    person: &str,
    stage: &str,
) -> anyhow::Result<()> {
    let db = parley_persistence::connect(server.database_url()).await?;
    let business = parley_persistence::workspaces::find_by_id(&db, workspace)
        .await?
        .context("the bench's workspace")?
        .business_id;
    let start = chrono::Utc::now() + chrono::Duration::minutes(10);
    let step = 86_400_000 / count.max(1) as i64;
    let payload = json!({"identity_id": person, "stage_id": stage, "metadata": {}});
    for (n, chunk) in (0..count)
        .collect::<Vec<_>>()
        .chunks(PER_WORKSPACE)
        .enumerate()
    {
        let txn = parley_persistence::begin_write(&db).await?;
        let now = clock::now();
        let owner = if one_workspace {
            workspace
        } else {
            let new = workspace::ActiveModel {
                business_id: Set(business),
                name: Set(format!("future tasks {n}")),
                created_at: Set(now),
                updated_at: Set(now),
                ..Default::default()
            };
            new.insert(&txn).await?.id
        };
        for i in chunk {
            let new = NewTask {
                name: format!("future-{i}"),
                task_type: TaskType::SetStage,
                payload: payload.clone(),
                scheduled_at: start + chrono::Duration::milliseconds(*i as i64 * step),
                recurrence: None,
                timezone: "UTC".to_owned(),
            };
            scheduled_tasks::create(&txn, owner, new, now).await?;
        }
        txn.commit().await?;
    }
    // A table that grew over months has its planner statistics; one loaded in seconds has none
    // until autovacuum looks, and PostgreSQL then plans the quota's count as a scan of it.
    if db.get_database_backend() == sea_orm::DbBackend::Postgres {
        db.execute_unprepared("ANALYZE scheduled_tasks").await?;
    }
    db.close().await?;
    Ok(())
}

/// Waits until every task of `ids` ran; answers each run's lateness (due to start).
async fn wait_for_runs(server: &BenchServer, ids: &[String]) -> anyhow::Result<Vec<Duration>> {
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut lateness = Vec::with_capacity(ids.len());
    for id in ids {
        loop {
            let runs = server
                .send(
                    reqwest::Method::GET,
                    &format!("/scheduled-tasks/{id}/runs"),
                    &json!({}),
                )
                .await?;
            if let Some(run) = runs["data"].as_array().and_then(|r| r.first()) {
                let due: chrono::DateTime<chrono::Utc> =
                    run["due_at"].as_str().context("due")?.parse()?;
                let start: chrono::DateTime<chrono::Utc> =
                    run["started_at"].as_str().context("started")?.parse()?;
                lateness.push((start - due).to_std().unwrap_or_default());
                break;
            }
            anyhow::ensure!(Instant::now() < deadline, "task {id} never ran");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    Ok(lateness)
}
