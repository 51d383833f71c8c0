//! What a statement costs a write through the database's writer, on SQLite: the writer's own
//! hop with no statement, one `INSERT`, the usage counts' `UPSERT` (raw, and as `usage::add`
//! builds it), and two statements in autocommit against the same two in a transaction. Each
//! write waits for the one before, as a turn's writes do.
//!
//! Every figure is also given against one `INSERT` of the same run, because these machines are
//! noisy. A write of two statements costs about two `INSERT`s, in a transaction or not: the
//! cost is per statement, not per commit.
//!
//! Run: `cargo run --release -p parley-benches --bin write_statements -- [writes]`

use std::time::Instant;

use anyhow::Context;
use chrono::Utc;
use parley_persistence::usage::{self, Count, Metric};
use parley_persistence::{GroupCommit, Writes};
use sea_orm::{ConnectionTrait, DatabaseExecutor, Statement};

/// A write of the bench: its work, and whether it runs as a transaction.
struct Case<F> {
    name: &'static str,
    atomic: bool,
    work: F,
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let writes: u32 = std::env::args()
        .nth(1)
        .map(|n| n.parse())
        .transpose()
        .context("writes")?
        .unwrap_or(3_000);
    let dir = tempfile::tempdir()?;
    let db = parley_persistence::connect(&parley_persistence::sqlite_url_in(dir.path())).await?;
    parley_persistence::migrate(&db).await?;
    db.execute_unprepared("CREATE TABLE scratch (k INTEGER PRIMARY KEY, v TEXT NOT NULL)")
        .await?;
    let writer = GroupCommit::start(db.clone());
    println!("write_statements: {writes} writes of each kind, one after another, SQLite");
    for round in 1..=2 {
        println!("round {round}{:>32}{:>16}", "per write", "/ one INSERT");
        let mut one_insert = None;
        let mut report = |name: &str, micros: f64| {
            let base = *one_insert.get_or_insert(micros);
            println!("{name:<38} {micros:>8.1} µs {:>12.2}", micros / base);
        };
        report(
            "one INSERT",
            time(
                &writer,
                writes,
                &Case {
                    name: "insert",
                    atomic: false,
                    work: insert,
                },
            )
            .await?,
        );
        report(
            "nothing (the writer's own hop)",
            time(
                &writer,
                writes,
                &Case {
                    name: "nothing",
                    atomic: false,
                    work: nothing,
                },
            )
            .await?,
        );
        report(
            "the counts' UPSERT, raw",
            time(
                &writer,
                writes,
                &Case {
                    name: "upsert",
                    atomic: false,
                    work: upsert,
                },
            )
            .await?,
        );
        report(
            "usage::add of one count",
            time(
                &writer,
                writes,
                &Case {
                    name: "add",
                    atomic: false,
                    work: add_one,
                },
            )
            .await?,
        );
        report(
            "INSERT and UPSERT, autocommit",
            time(
                &writer,
                writes,
                &Case {
                    name: "two",
                    atomic: false,
                    work: insert_and_upsert,
                },
            )
            .await?,
        );
        report(
            "INSERT and UPSERT, one transaction",
            time(
                &writer,
                writes,
                &Case {
                    name: "txn",
                    atomic: true,
                    work: insert_and_upsert,
                },
            )
            .await?,
        );
        report(
            "INSERT; UPSERT in one call, autocommit",
            time(
                &writer,
                writes,
                &Case {
                    name: "one call",
                    atomic: false,
                    work: one_call,
                },
            )
            .await?,
        );
        report(
            "INSERT; UPSERT in one call, transaction",
            time(
                &writer,
                writes,
                &Case {
                    name: "one call in a transaction",
                    atomic: true,
                    work: one_call,
                },
            )
            .await?,
        );
        report(
            "BEGIN; INSERT; UPSERT; COMMIT, one call",
            time(
                &writer,
                writes,
                &Case {
                    name: "one call with its transaction",
                    atomic: false,
                    work: one_call_with_transaction,
                },
            )
            .await?,
        );
    }
    Ok(())
}

/// The mean time of `writes` writes of `case`, in µs.
async fn time<F>(writer: &GroupCommit, writes: u32, case: &Case<F>) -> anyhow::Result<f64>
where
    F: for<'e> Fn(&'e DatabaseExecutor<'e>) -> Writes<'e, ()> + Send + Sync + Copy + 'static,
{
    let started = Instant::now();
    for _ in 0..writes {
        if case.atomic {
            writer.write_atomic(case.work).await
        } else {
            writer.write(case.work).await
        }
        .context(case.name)?;
    }
    Ok(started.elapsed().as_secs_f64() * 1e6 / f64::from(writes))
}

fn nothing<'e>(_db: &'e DatabaseExecutor<'e>) -> Writes<'e, ()> {
    Box::pin(async { Ok(()) })
}

fn insert<'e>(db: &'e DatabaseExecutor<'e>) -> Writes<'e, ()> {
    Box::pin(async move {
        let statement = Statement::from_sql_and_values(
            db.get_database_backend(),
            "INSERT INTO scratch (v) VALUES (?)",
            ["x".into()],
        );
        db.execute_raw(statement).await?;
        Ok(())
    })
}

/// The counts' `UPSERT` of one row, as `usage::add` writes it.
const UPSERT: &str = "INSERT INTO usage_daily \
     (workspace_id, day, assistant_id, channel_id, metric, value) \
     VALUES (?, ?, ?, ?, ?, ?) \
     ON CONFLICT (workspace_id, day, assistant_id, channel_id, metric) \
     DO UPDATE SET value = usage_daily.value + excluded.value";

/// The `UPSERT`'s values.
fn upsert_values() -> [sea_orm::Value; 6] {
    [
        1i64.into(),
        Utc::now().date_naive().into(),
        uuid::Uuid::nil().into(),
        uuid::Uuid::nil().into(),
        "mcp_calls".into(),
        1i64.into(),
    ]
}

fn upsert<'e>(db: &'e DatabaseExecutor<'e>) -> Writes<'e, ()> {
    Box::pin(async move {
        let statement =
            Statement::from_sql_and_values(db.get_database_backend(), UPSERT, upsert_values());
        db.execute_raw(statement).await?;
        Ok(())
    })
}

/// The `INSERT` and the `UPSERT` as one string of two statements: one call to the
/// connection's thread, which binds the values across both.
fn one_call<'e>(db: &'e DatabaseExecutor<'e>) -> Writes<'e, ()> {
    Box::pin(async move {
        let mut values = vec!["x".into()];
        values.extend(upsert_values());
        let sql = format!("INSERT INTO scratch (v) VALUES (?); {UPSERT}");
        let statement = Statement::from_sql_and_values(db.get_database_backend(), sql, values);
        db.execute_raw(statement).await?;
        Ok(())
    })
}

/// As [`one_call`], with its transaction's `BEGIN` and `COMMIT` in the same string.
fn one_call_with_transaction<'e>(db: &'e DatabaseExecutor<'e>) -> Writes<'e, ()> {
    Box::pin(async move {
        let mut values = vec!["x".into()];
        values.extend(upsert_values());
        let sql = format!("BEGIN IMMEDIATE; INSERT INTO scratch (v) VALUES (?); {UPSERT}; COMMIT");
        let statement = Statement::from_sql_and_values(db.get_database_backend(), sql, values);
        db.execute_raw(statement).await?;
        Ok(())
    })
}

fn add_one<'e>(db: &'e DatabaseExecutor<'e>) -> Writes<'e, ()> {
    Box::pin(async move {
        let count = Count::new(1, Utc::now(), Metric::McpCalls, 1);
        usage::add(db, &[count]).await
    })
}

fn insert_and_upsert<'e>(db: &'e DatabaseExecutor<'e>) -> Writes<'e, ()> {
    Box::pin(async move {
        insert(db).await?;
        upsert(db).await
    })
}
