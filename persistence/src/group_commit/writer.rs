//! The writer tasks: each takes what has queued, up to [`MAX_BATCH`], and commits it together
//! (see the parent module for what callers are promised).

use std::sync::Arc;

use sea_orm::{DatabaseConnection, DatabaseExecutor, DbBackend};
use tokio::sync::{Mutex, mpsc};
use tracing::Instrument;

use super::{Job, MAX_BATCH, POSTGRES_WRITERS, WRITE_BATCH, deferred};

/// How many writers take batches from the queue. SQLite has one writer at a time, so a second
/// would only wait for the lock. PostgreSQL writes in parallel and already flushes concurrent
/// commits together, so one writer would serialize what it runs in parallel: a few writers
/// keep both its parallelism and the batches.
pub(super) fn writers(db: &DatabaseConnection) -> u32 {
    match db.get_database_backend() {
        DbBackend::Sqlite => 1,
        _ => POSTGRES_WRITERS,
    }
}

/// Runs a writer, and a new one if it panics: the writes of the batch it was running are
/// answered with an error (their callers see the writer fail), and the queue goes on.
pub(super) async fn keep_writing(db: DatabaseConnection, queue: Queue) {
    loop {
        match tokio::spawn(run(db.clone(), queue.clone())).await {
            Ok(()) => return,
            Err(failure) => {
                tracing::error!(%failure, "the database writer failed; a new one takes the queue");
            }
        }
    }
}

/// What the writers take their batches from.
pub(super) type Queue = Arc<Mutex<mpsc::Receiver<Box<dyn Job>>>>;

/// A writer: takes what has queued, up to [`MAX_BATCH`], and commits it together.
async fn run(db: DatabaseConnection, queue: Queue) {
    let mut batch = Vec::with_capacity(MAX_BATCH);
    loop {
        let taken = queue.lock().await.recv_many(&mut batch, MAX_BATCH).await;
        if taken == 0 {
            return;
        }
        metrics::histogram!(WRITE_BATCH)
            .record(f64::from(u32::try_from(taken).unwrap_or(u32::MAX)));
        // The writer's own time per batch, beside its callers' (a bench's span report tells
        // a write that waited for the writer from one the database kept waiting).
        let span = tracing::debug_span!("write_batch", writes = taken);
        async {
            let one_statement_batch = match batch.split_first() {
                Some((head, others)) => {
                    !others.is_empty() && head.one_statement_with(others, db.get_database_backend())
                }
                None => false,
            };
            if batch.len() == 1 {
                if let Some(job) = batch.pop() {
                    alone(&db, job).await;
                }
            } else if one_statement_batch {
                one_statement(&db, &mut batch).await;
            } else {
                together(&db, &mut batch).await;
            }
        }
        .instrument(span)
        .await;
    }
}

/// Runs `batch`, pieces of one [`Merged`] kind that make one statement, as that statement
/// without a transaction (it commits alone, atomically); when it fails, nothing was written,
/// and each piece runs again alone.
async fn one_statement(db: &DatabaseConnection, batch: &mut Vec<Box<dyn Job>>) {
    if let Some((head, others)) = batch.split_first_mut()
        && head.run(others, &DatabaseExecutor::Connection(db)).await
    {
        for job in batch.drain(..) {
            job.answer();
        }
        return;
    }
    each_alone(db, batch).await;
}

/// Runs `batch` in one transaction, the [`Merged`] pieces of each kind together; when
/// anything fails, runs each write again alone.
async fn together(db: &DatabaseConnection, batch: &mut Vec<Box<dyn Job>>) {
    // Pieces of one kind side by side (ordinary work first, in the order it came).
    batch.sort_by_key(|job| job.kind());
    if let Ok(txn) = crate::begin_write(db).await {
        // What the writes count and the event deliveries they write are written last, all
        // of the batch's at once (see `deferred`).
        let (mut succeeded, deferred) =
            deferred::kept_back(run_in(&DatabaseExecutor::Transaction(&txn), batch)).await;
        if succeeded && !deferred.is_empty() {
            succeeded = deferred.write(&txn).await.is_ok();
        }
        if succeeded && txn.commit().await.is_ok() {
            for job in batch.drain(..) {
                job.answer();
            }
            return;
        }
        // Dropping an uncommitted transaction rolls it back.
    }
    each_alone(db, batch).await;
}

/// Runs the writes of `batch` on `executor`, the [`Merged`] pieces of each kind together;
/// answers whether all succeeded (it stops at the first that failed).
async fn run_in(executor: &DatabaseExecutor<'_>, batch: &mut [Box<dyn Job>]) -> bool {
    let mut start = 0;
    while let Some(head) = batch.get(start) {
        let kind = head.kind();
        let end = match kind {
            None => start + 1,
            Some(_) => {
                start
                    + batch[start..]
                        .iter()
                        .take_while(|job| job.kind() == kind)
                        .count()
            }
        };
        let Some((head, others)) = batch[start..end].split_first_mut() else {
            break;
        };
        if !head.run(others, executor).await {
            return false;
        }
        start = end;
    }
    true
}

/// Runs each write of a batch that failed (and left nothing behind) again alone.
async fn each_alone(db: &DatabaseConnection, batch: &mut Vec<Box<dyn Job>>) {
    tracing::debug!(
        writes = batch.len(),
        "a group commit failed; its writes run alone"
    );
    for job in batch.drain(..) {
        alone(db, job).await;
    }
}

/// Runs one write by itself: on the connection, or in its own transaction when atomic.
async fn alone(db: &DatabaseConnection, mut job: Box<dyn Job>) {
    if !job.atomic() {
        job.run(&mut [], &DatabaseExecutor::Connection(db)).await;
        job.answer();
        return;
    }
    match crate::begin_write(db).await {
        Ok(txn) => {
            let succeeded = job.run(&mut [], &DatabaseExecutor::Transaction(&txn)).await;
            if succeeded {
                if let Err(error) = txn.commit().await {
                    job.fail(error.into());
                }
            } else if let Err(error) = txn.rollback().await {
                tracing::warn!(%error, "a failed write could not be rolled back");
            }
        }
        Err(error) => job.fail(error),
    }
    job.answer();
}
