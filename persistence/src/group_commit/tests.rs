//! The writer's batches and failures, on a SQLite database of one table.

mod deferred;
mod merged;

use super::*;
use sea_orm::{ConnectionTrait, Statement};

async fn database(dir: &tempfile::TempDir) -> DatabaseConnection {
    let db = crate::connect(&crate::sqlite_url_in(dir.path()))
        .await
        .expect("database");
    db.execute_unprepared("CREATE TABLE t (k INTEGER PRIMARY KEY, v TEXT NOT NULL)")
        .await
        .expect("table");
    db
}

/// A writer on a fresh database with its table; the directory lives as long as it is kept.
async fn fresh() -> (tempfile::TempDir, DatabaseConnection, GroupCommit) {
    let dir = tempfile::tempdir().expect("dir");
    let db = database(&dir).await;
    let writer = GroupCommit::start(db.clone());
    (dir, db, writer)
}

fn insert(k: i64) -> impl for<'e> Fn(&'e DatabaseExecutor<'e>) -> Writes<'e, ()> + Send + 'static {
    move |db| {
        Box::pin(async move {
            let statement = Statement::from_sql_and_values(
                db.get_database_backend(),
                "INSERT INTO t (k, v) VALUES (?, 'x')",
                [k.into()],
            );
            db.execute_raw(statement).await?;
            Ok(())
        })
    }
}

async fn keys(db: &DatabaseConnection) -> Vec<i64> {
    column(db, "SELECT k FROM t ORDER BY k").await
}

/// The first column of what `sql` reads.
async fn column<T: sea_orm::TryGetable>(db: &DatabaseConnection, sql: &str) -> Vec<T> {
    let rows = db
        .query_all_raw(Statement::from_string(db.get_database_backend(), sql))
        .await
        .expect("read");
    rows.iter()
        .map(|r| r.try_get_by_index::<T>(0).expect("value"))
        .collect()
}

/// Inserts `keys` into the table in one multi-row statement: a merged piece's work.
async fn insert_keys(db: &DatabaseExecutor<'_>, keys: &[i64]) -> Result<()> {
    let values = vec!["(?, 'x')"; keys.len()].join(", ");
    let statement = Statement::from_sql_and_values(
        db.get_database_backend(),
        format!("INSERT INTO t (k, v) VALUES {values}"),
        keys.iter().map(|&k| k.into()),
    );
    db.execute_raw(statement).await?;
    Ok(())
}

/// Keeps the writer busy, once it has taken this write alone, until the returned sender
/// is dropped, so that what is handed over meanwhile forms one batch.
async fn hold(writer: &GroupCommit) -> oneshot::Sender<()> {
    let (release, held) = oneshot::channel::<()>();
    let (started, running) = oneshot::channel::<()>();
    let parts = std::sync::Mutex::new(Some((started, held)));
    let writer = writer.clone();
    tokio::spawn(async move {
        writer
            .write(move |_| {
                let parts = parts.lock().expect("lock").take();
                Box::pin(async move {
                    if let Some((started, held)) = parts {
                        let _ = started.send(());
                        let _ = held.await;
                    }
                    Ok(())
                })
            })
            .await
    });
    running.await.expect("the writer took the hold");
    release
}

/// Hands a write per key over while the writer is held, waits until all are queued, then
/// lets the writer take them as one batch; answers each key's result.
async fn one_batch(
    writer: &GroupCommit,
    keys: impl Iterator<Item = i64>,
) -> Vec<(i64, Result<()>)> {
    one_batch_of(writer, keys, |writer, k| async move {
        writer.write(insert(k)).await
    })
    .await
}

/// As [`one_batch`], each key's write handed over by `submit`.
async fn one_batch_of<T, S, F>(
    writer: &GroupCommit,
    keys: impl Iterator<Item = i64>,
    submit: S,
) -> Vec<(i64, Result<T>)>
where
    T: Send + 'static,
    S: Fn(GroupCommit, i64) -> F,
    F: Future<Output = Result<T>> + Send + 'static,
{
    let release = hold(writer).await;
    let writes: Vec<_> = keys
        .map(|k| {
            let write = submit(writer.clone(), k);
            tokio::spawn(async move { (k, write.await) })
        })
        .collect();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while writer.jobs.max_capacity() - writer.jobs.capacity() < writes.len() {
        assert!(
            std::time::Instant::now() < deadline,
            "the writes were not queued"
        );
        tokio::time::sleep(std::time::Duration::from_millis(1)).await;
    }
    drop(release);
    let mut results = Vec::new();
    for write in writes {
        results.push(write.await.expect("write task"));
    }
    results
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_handed_over_together_are_committed_together_and_answered() {
    let (_dir, db, writer) = fresh().await;
    for (_, result) in one_batch(&writer, 1..=MAX_BATCH as i64).await {
        result.expect("committed");
    }
    assert_eq!(keys(&db).await, (1..=MAX_BATCH as i64).collect::<Vec<_>>());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_write_fails_alone_and_the_others_of_its_batch_are_committed() {
    let (_dir, db, writer) = fresh().await;
    writer.write(insert(7)).await.expect("committed");
    // Key 7 again conflicts, in the middle of a batch of new keys.
    for (k, result) in one_batch(&writer, 1..=20).await {
        if k == 7 {
            assert!(
                matches!(result, Err(PersistenceError::Conflict(_))),
                "{result:?}"
            );
        } else {
            result.expect("committed");
        }
    }
    assert_eq!(keys(&db).await, (1..=20).collect::<Vec<_>>());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_sqlite_the_writer_waits_for_a_write_on_another_connection() {
    let (_dir, db, writer) = fresh().await;
    writer.write(insert(1)).await.expect("committed");
    // A pool connection holds the writer lock; the writer's own connection waits for it.
    let txn = crate::begin_write(&db).await.expect("begin");
    insert(2)(&DatabaseExecutor::Transaction(&txn))
        .await
        .expect("inserted");
    let waiting = tokio::spawn({
        let writer = writer.clone();
        async move { writer.write(insert(3)).await }
    });
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    txn.commit().await.expect("commit");
    waiting
        .await
        .expect("task")
        .expect("committed after the lock");
    assert_eq!(keys(&db).await, vec![1, 2, 3]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_that_panics_fails_and_the_writer_goes_on() {
    let (_dir, db, writer) = fresh().await;
    let panicked: Result<()> = writer
        .write(|_| Box::pin(async { panic!("a bug in a write") }))
        .await;
    assert!(
        matches!(panicked, Err(PersistenceError::Database(_))),
        "{panicked:?}"
    );
    writer.write(insert(1)).await.expect("committed");
    assert_eq!(keys(&db).await, vec![1]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn atomic_work_that_fails_halfway_leaves_nothing() {
    let (_dir, db, writer) = fresh().await;
    writer.write(insert(2)).await.expect("committed");
    let result = writer
        .write_atomic(|db| {
            Box::pin(async move {
                insert(1)(db).await?;
                insert(2)(db).await
            })
        })
        .await;
    assert!(
        matches!(result, Err(PersistenceError::Conflict(_))),
        "{result:?}"
    );
    assert_eq!(keys(&db).await, vec![2]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_adds_what_its_writes_counted_once_before_its_commit_and_a_failed_write_nothing() {
    let dir = tempfile::tempdir().expect("dir");
    let db = database(&dir).await;
    crate::migrate(&db).await.expect("migrate");
    let writer = GroupCommit::start(db.clone());
    writer.write(insert(7)).await.expect("committed");
    let at = chrono::Utc::now();
    // Each write counts its key, then inserts it; key 7 conflicts after counting.
    let counted = one_batch_of(&writer, 1..=10, move |writer, k| async move {
        writer
            .write_atomic(move |db| {
                Box::pin(async move {
                    let count = crate::usage::Count::new(1, at, crate::usage::Metric::McpCalls, k);
                    crate::usage::add(db, &[count]).await?;
                    insert(k)(db).await
                })
            })
            .await
    })
    .await;
    for (k, result) in counted {
        assert_eq!(result.is_ok(), k != 7, "key {k}: {result:?}");
    }
    assert_eq!(keys(&db).await, (1..=10).collect::<Vec<_>>());
    // One row for the key, holding what the committed writes counted (55 less the 7).
    let values: Vec<i64> = column(
        &db,
        "SELECT value FROM usage_daily WHERE metric = 'mcp_calls'",
    )
    .await;
    assert_eq!(values, vec![48]);
}
