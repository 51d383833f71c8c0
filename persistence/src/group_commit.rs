//! Group commit: the writes of many callers share one transaction and one commit.
//!
//! A [`GroupCommit`] is the database's writer (one task on SQLite, a few on PostgreSQL).
//! Callers hand it a piece of work (one or a few statements, nothing but the database) and
//! wait for its result, which they get only
//! once the work is committed, so a caller that acknowledges something after `write` returns
//! (the webhook's 200, a message's `sent`) acknowledges durable state. The writer takes what
//! has queued while it was busy, up to [`MAX_BATCH`], and runs it in one transaction:
//! under load N writes cost one `BEGIN`/`COMMIT` (on SQLite one pass over the writer lock and
//! the log, on PostgreSQL one flush of the log) instead of N. Alone, a write runs as it would
//! without the writer (autocommit, or its own transaction when it asked for one), so a quiet
//! server pays only the hop to the writer task.
//!
//! When a write in a batch fails (a unique conflict, a row gone) or the commit fails, the batch
//! is rolled back and each of its writes is run again alone, so every caller gets the answer it
//! would have had without the writer and no write fails because of another's. Work is
//! therefore a function that may be called twice; a call whose transaction was rolled back
//! left nothing behind.
//!
//! Small writes of one kind that many callers make ([`Merged`]: the webhook's events, their
//! outcomes, the sends' claims) run, when several wait in one batch, as one statement: on
//! SQLite each statement is a round trip to the connection's thread, and in a burst those
//! round trips, not the commits, are the writer's time. On SQLite a statement carries a
//! multiple of eight pieces, and a second one the rest (a batch's 13: 8 and 5), so that the
//! writer's connection keeps 15 statements prepared per kind instead of 64
//! (`merged::statement_sizes`). What many writes of a batch add and none reads back before
//! the commit (usage counts, event deliveries) is kept back and written once for the batch, just
//! before its commit (`deferred`); outside a batch, a fact and its counts go to the database in
//! one call that commits them together ([`crate::one_call`]), not in a transaction of their own
//! (four calls). Writes waiting at once have no order between them (ordinary
//! work runs first, then the merged pieces kind by kind): a caller whose write depends on
//! another waits for that one's answer before handing it over, as every caller here does.

use std::any::{Any, TypeId};
use std::future::Future;
use std::pin::Pin;

use std::sync::Arc;

use sea_orm::{DatabaseConnection, DatabaseExecutor, DbBackend};
use tokio::sync::Mutex;
use tokio::sync::{mpsc, oneshot};

use crate::{PersistenceError, Result};

mod deferred;
mod merged;
mod writer;

pub(crate) use self::deferred::{keep_counts, keep_deliveries};
pub use self::merged::Merged;
use self::merged::Merging;
pub(crate) use self::merged::inserted_ids;
use self::writer::{keep_writing, writers};

/// Most writes committed together.
pub(crate) const MAX_BATCH: usize = 64;

/// Writers on PostgreSQL (a share of its pool of 16 connections): two keep a commit's flush
/// overlapping the next batch's statements; more make smaller batches, and so more statements,
/// for the same writes (benches/README.md, the thirteenth session).
const POSTGRES_WRITERS: u32 = 2;

/// The histogram of how many writes each commit of the writer carried (1: a write alone), for
/// the server's metrics.
pub const WRITE_BATCH: &str = "parley_db_write_batch_size";

/// Writes waiting for the writer beyond which callers wait to hand theirs over.
const QUEUE: usize = 4096;

/// The future of one piece of work, borrowing the executor it runs on.
pub type Writes<'e, T> = Pin<Box<dyn Future<Output = Result<T>> + Send + 'e>>;

/// The database's writer; cheap to clone.
#[derive(Clone, Debug)]
pub struct GroupCommit {
    jobs: mpsc::Sender<Box<dyn Job>>,
    /// The pool, where a small write runs directly on a database that writes in parallel
    /// (PostgreSQL; see [`GroupCommit::write_small`]); `None` on SQLite.
    parallel: Option<DatabaseConnection>,
}

impl GroupCommit {
    /// Starts the writer tasks for `db` (see [`writers`]; they commit on connections of their
    /// own, see [`crate::connection::writer_connection`]); they end when the last handle is
    /// dropped.
    #[must_use]
    pub fn start(db: DatabaseConnection) -> Self {
        let writers = writers(&db);
        let parallel = (db.get_database_backend() != DbBackend::Sqlite).then(|| db.clone());
        let db = crate::connection::writer_connection(&db, writers);
        let (jobs, queue) = mpsc::channel(QUEUE);
        let queue = Arc::new(Mutex::new(queue));
        for _ in 0..writers {
            tokio::spawn(keep_writing(db.clone(), queue.clone()));
        }
        Self { jobs, parallel }
    }

    /// Runs `work` with other callers' writes and answers its result once committed.
    /// `work` may run twice (see the module's description) and must touch nothing but the
    /// executor it is given. Its statements are atomic only within a batch: work that needs
    /// its statements to commit together when it runs alone uses [`GroupCommit::write_atomic`].
    ///
    /// # Errors
    /// What `work` answered, or a database error of the transaction it ran in.
    pub async fn write<T, F>(&self, work: F) -> Result<T>
    where
        T: Send + 'static,
        F: for<'e> Fn(&'e DatabaseExecutor<'e>) -> Writes<'e, T> + Send + 'static,
    {
        self.submit(work, false).await
    }

    /// As [`GroupCommit::write`], for work of several statements that must commit together.
    ///
    /// # Errors
    /// As [`GroupCommit::write`].
    pub async fn write_atomic<T, F>(&self, work: F) -> Result<T>
    where
        T: Send + 'static,
        F: for<'e> Fn(&'e DatabaseExecutor<'e>) -> Writes<'e, T> + Send + 'static,
    {
        self.submit(work, true).await
    }

    /// Runs `work`, a write of a statement or two that needs nothing of a batch but its commit,
    /// where it waits least: on SQLite with the writer's batches (one write lock: a write on
    /// another connection would wait for the writer's commits and hold them up in turn), on
    /// PostgreSQL on a pool connection of its own (writes run in parallel there, and the
    /// writers' few connections would queue it behind every other write). Answers once
    /// committed, as [`GroupCommit::write`].
    ///
    /// # Errors
    /// As [`GroupCommit::write`].
    pub async fn write_small<T, F>(&self, work: F) -> Result<T>
    where
        T: Send + 'static,
        F: for<'e> Fn(&'e DatabaseExecutor<'e>) -> Writes<'e, T> + Send + 'static,
    {
        match &self.parallel {
            Some(pool) => work(&DatabaseExecutor::Connection(pool)).await,
            None => self.submit(work, false).await,
        }
    }

    /// As [`GroupCommit::write_small`], for statements that must commit together.
    ///
    /// # Errors
    /// As [`GroupCommit::write`].
    pub async fn write_small_atomic<T, F>(&self, work: F) -> Result<T>
    where
        T: Send + 'static,
        F: for<'e> Fn(&'e DatabaseExecutor<'e>) -> Writes<'e, T> + Send + 'static,
    {
        let Some(pool) = &self.parallel else {
            return self.submit(work, true).await;
        };
        let txn = crate::begin_write(pool).await?;
        let answer = work(&DatabaseExecutor::Transaction(&txn)).await?;
        txn.commit().await?;
        Ok(answer)
    }

    /// Runs `piece` with the other pieces of its kind waiting in the same batch, in one
    /// statement (see [`Merged`]), and answers its answer once committed.
    ///
    /// # Errors
    /// As [`GroupCommit::write`].
    pub async fn write_merged<W: Merged>(&self, piece: W) -> Result<W::Answer> {
        let (done, answer) = oneshot::channel();
        let job = Box::new(Merging::new(piece, done));
        self.jobs.send(job).await.map_err(|_| stopped())?;
        answer.await.map_err(|_| stopped())?
    }

    async fn submit<T, F>(&self, work: F, atomic: bool) -> Result<T>
    where
        T: Send + 'static,
        F: for<'e> Fn(&'e DatabaseExecutor<'e>) -> Writes<'e, T> + Send + 'static,
    {
        let (done, answer) = oneshot::channel();
        let job = Box::new(Pending {
            work,
            atomic,
            result: None,
            done,
        });
        self.jobs.send(job).await.map_err(|_| stopped())?;
        answer.await.map_err(|_| stopped())?
    }
}

/// The writer stopped (the server is stopping) or failed while running the write.
fn stopped() -> PersistenceError {
    PersistenceError::Database(sea_orm::DbErr::Custom(
        "the database writer stopped before answering".to_owned(),
    ))
}

/// A caller's work and where its answer goes.
trait Job: Send + Any {
    /// Whether the work's statements must commit together when it runs alone.
    fn atomic(&self) -> bool;
    /// The kind of [`Merged`] piece it is, if it is one: pieces of one kind run together.
    fn kind(&self) -> Option<TypeId>;
    /// Whether it and `others` run as one statement on `backend` (see
    /// [`Merged::one_statement`]).
    fn one_statement_with(&self, _others: &[Box<dyn Job>], _backend: DbBackend) -> bool {
        false
    }
    /// Runs the work on `db`, with `others` (pieces of its own kind, when it is a merged
    /// piece; none otherwise), and keeps each result; answers whether all succeeded.
    fn run<'a>(
        &'a mut self,
        others: &'a mut [Box<dyn Job>],
        db: &'a DatabaseExecutor<'a>,
    ) -> Pin<Box<dyn Future<Output = bool> + Send + 'a>>;
    /// Replaces the kept result with `error` (the transaction it ran in did not commit).
    fn fail(&mut self, error: PersistenceError);
    /// Hands the kept result to the caller.
    fn answer(self: Box<Self>);
}

struct Pending<T, F> {
    work: F,
    atomic: bool,
    result: Option<Result<T>>,
    done: oneshot::Sender<Result<T>>,
}

impl<T, F> Job for Pending<T, F>
where
    T: Send + 'static,
    F: for<'e> Fn(&'e DatabaseExecutor<'e>) -> Writes<'e, T> + Send + 'static,
{
    fn atomic(&self) -> bool {
        self.atomic
    }

    fn kind(&self) -> Option<TypeId> {
        None
    }

    fn run<'a>(
        &'a mut self,
        _others: &'a mut [Box<dyn Job>],
        db: &'a DatabaseExecutor<'a>,
    ) -> Pin<Box<dyn Future<Output = bool> + Send + 'a>> {
        Box::pin(async move {
            let result = (self.work)(db).await;
            let succeeded = result.is_ok();
            self.result = Some(result);
            succeeded
        })
    }

    fn fail(&mut self, error: PersistenceError) {
        self.result = Some(Err(error));
    }

    fn answer(self: Box<Self>) {
        let result = self.result.unwrap_or_else(|| Err(stopped()));
        // The caller may have stopped waiting; the write stands either way.
        let _ = self.done.send(result);
    }
}

#[cfg(test)]
mod tests;
