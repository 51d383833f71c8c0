//! Copying SQLite's write-ahead log into the database file, off the request path, and keeping
//! the log from growing without end.
//!
//! Connections never checkpoint when they commit (see [`super::connect`]); the server runs
//! [`Checkpoints`] periodically on a connection of its own. A `PASSIVE` checkpoint waits for
//! nobody: it copies what no reader still needs. The log file starts again from its beginning
//! only when a writer finds it copied whole and no reader on it, which a steady load never
//! leaves for long, and the file never shrinks: twelve minutes into `idle_identities 1000000
//! 2400 --inbound` the log file was 7.6 GB beside a 1.5 GB database, and stayed that size.
//! So once the log holds more than [`RESTART_LOG_OVER`] pages, the checkpoint waits (at most
//! [`RESTART_WAIT_MS`]) for the readers and the writer of the moment to finish, copies the rest
//! and has the next writer start the log again from its beginning (`RESTART`). Writers wait
//! meanwhile: a short pause, as rare as the load is heavy (a light load's log is started again
//! by its writer long before). One held up by a long read leaves the log for the next tries,
//! [`RESTART_PAUSE`] later.
//!
//! The file keeps its size (about [`RESTART_LOG_OVER`] pages, what a load writes between two
//! restarts), and the writer writes over it. Emptying it instead (`TRUNCATE`) freed 64 MiB of
//! the file's blocks while writers waited: 24–55 ms a time against 2–6 ms, every 1.3–1.5 s at
//! 300 messages a second, and the clusters of slow replies at that load came at its cadence
//! (benches/README.md, the forty-fourth session).
//!
//! Each checkpoint flushes the log before it copies it; [`super::WriteBehind`] has the kernel
//! write the log's pages out as they come, so that flush finds little left to write.

use std::time::{Duration, Instant};

use sea_orm::{ConnectionTrait, DatabaseConnection, DbBackend, Statement};

use super::one_sqlite_connection;
use crate::Result;

/// Pages of log (4 KiB each by default, so 64 MiB) past which a checkpoint has the log started
/// again from its beginning.
const RESTART_LOG_OVER: i64 = 16_384;

/// How long starting the log again waits for the readers and the writer of the moment, at most;
/// new writers wait behind it meanwhile.
const RESTART_WAIT_MS: u64 = 50;

/// How long after a checkpoint that could not have the log started again the next one tries
/// again.
const RESTART_PAUSE: Duration = Duration::from_secs(1);

/// SQLite only: a connection of its own for [`Checkpoints`] (one connection, so one thread
/// of sqlx's), opened as `db`'s are; `None` on PostgreSQL, which checkpoints itself, and for an
/// in-memory database.
///
/// A checkpoint on a connection of the shared pool took one of the readers' connections for its
/// copy and its two flushes; on its own it takes none, and keeps its page cache warm between
/// checkpoints.
pub fn checkpoint_connection(db: &DatabaseConnection) -> Option<DatabaseConnection> {
    if db.get_database_backend() != DbBackend::Sqlite {
        return None;
    }
    one_sqlite_connection((*db.get_sqlite_connection_pool().connect_options()).clone())
}

/// The periodic checkpoints of one SQLite database (see the module's notes), with what they
/// remember from one to the next. Each does nothing on PostgreSQL.
#[derive(Debug)]
pub struct Checkpoints {
    /// Pages of log past which a checkpoint has it started again.
    restart_over: i64,
    /// A checkpoint that could not have the log started again (a reader or the writer held on
    /// past [`RESTART_WAIT_MS`]) keeps the next ones from trying before this.
    restart_held_until: Option<Instant>,
}

impl Default for Checkpoints {
    fn default() -> Self {
        Self::restarting_over(RESTART_LOG_OVER)
    }
}

impl Checkpoints {
    /// Checkpoints that have the log started again past `restart_over` pages.
    fn restarting_over(restart_over: i64) -> Self {
        Self {
            restart_over,
            restart_held_until: None,
        }
    }

    /// Copies what it can of the write-ahead log into the database file (`PASSIVE`: what it
    /// cannot copy now is copied next time), and has the log started again from its beginning
    /// once it holds more than [`RESTART_LOG_OVER`] pages. Call it on [`checkpoint_connection`]:
    /// restarting the log sets that connection's busy timeout to [`RESTART_WAIT_MS`].
    ///
    /// # Errors
    /// Fails on a database error.
    pub async fn run(&mut self, db: &DatabaseConnection) -> Result<()> {
        if db.get_database_backend() != DbBackend::Sqlite {
            return Ok(());
        }
        let (_, log_pages) = checkpoint(db, "PASSIVE").await?;
        let now = Instant::now();
        if log_pages <= self.restart_over || self.restart_held_until.is_some_and(|t| now < t) {
            return Ok(());
        }
        // Writers wait while it waits: not for long.
        db.execute_unprepared(&format!("PRAGMA busy_timeout = {RESTART_WAIT_MS}"))
            .await?;
        let (finished, left) = checkpoint(db, "RESTART").await?;
        self.restart_held_until = (!finished).then(|| now + RESTART_PAUSE);
        tracing::debug!(log_pages, left, finished, "restarting the write-ahead log");
        Ok(())
    }
}

/// Runs one checkpoint in `mode`; answers whether it finished (nobody held it up) and the
/// pages in the log after it.
async fn checkpoint(db: &DatabaseConnection, mode: &str) -> Result<(bool, i64)> {
    // One row: whether it was kept from finishing, the log's pages, the pages copied.
    let row = db
        .query_one_raw(Statement::from_string(
            DbBackend::Sqlite,
            format!("PRAGMA wal_checkpoint({mode})"),
        ))
        .await?;
    Ok(match row {
        Some(row) => (
            row.try_get_by_index::<i64>(0)? == 0,
            row.try_get_by_index::<i64>(1)?,
        ),
        None => (true, 0),
    })
}

#[cfg(test)]
mod tests {
    use sea_orm::{ConnectionTrait, TransactionTrait};

    use super::*;

    /// The log's size in bytes.
    fn log_bytes(dir: &std::path::Path) -> u64 {
        std::fs::metadata(dir.join("parley.db-wal")).map_or(0, |m| m.len())
    }

    #[tokio::test]
    async fn a_log_grown_past_its_bound_is_started_again_and_a_short_one_is_left() {
        let (dir, db) = crate::test_support::migrated().await;
        crate::test_support::fill_log(&db, 50).await;
        let grown = log_bytes(dir.path());
        let own = checkpoint_connection(&db).expect("SQLite's checkpoint connection");
        assert!(grown > 100 * 4096, "the log holds {grown} bytes");

        // A reader in the middle of a transaction, reading what the log holds.
        let reader = db.begin().await.expect("begin");
        reader
            .execute_unprepared("SELECT count(*) FROM filler")
            .await
            .expect("read");

        // Under the bound, the log is copied and left as it is, for its writer to start again.
        Checkpoints::restarting_over(1_000_000)
            .run(&own)
            .await
            .expect("checkpoint");
        assert_eq!(log_bytes(dir.path()), grown);

        // The reader keeps the log from starting again: the checkpoint does not wait for it for
        // long, and does not try again at once.
        let mut checkpoints = Checkpoints::restarting_over(100);
        checkpoints.run(&own).await.expect("checkpoint");
        let held = checkpoints.restart_held_until;
        assert!(held.is_some(), "not held up by a reader");
        reader.commit().await.expect("commit");
        checkpoints.run(&own).await.expect("checkpoint");
        assert_eq!(checkpoints.restart_held_until, held, "tried again at once");

        checkpoints.restart_held_until = None;
        checkpoints.run(&own).await.expect("checkpoint");
        assert!(checkpoints.restart_held_until.is_none());
        // The next write goes at the log's beginning: the file keeps its size and holds only it.
        crate::test_support::fill_log(&db, 1).await;
        let (_, log_pages) = checkpoint(&own, "PASSIVE").await.expect("checkpoint");
        assert!(
            log_pages < 10,
            "the log was not started again: {log_pages} pages"
        );
        assert_eq!(
            log_bytes(dir.path()),
            grown,
            "the file did not keep its size"
        );
        let rows = db
            .query_one_raw(Statement::from_string(
                DbBackend::Sqlite,
                "SELECT count(*) FROM filler",
            ))
            .await
            .expect("count")
            .expect("a row")
            .try_get_by_index::<i64>(0)
            .expect("count");
        assert_eq!(rows, 51, "what the log held is in the database");
        db.close().await.expect("close");
    }
}
