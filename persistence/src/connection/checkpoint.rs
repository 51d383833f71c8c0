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
//! and empties the file (`TRUNCATE`). Writers wait meanwhile: a short pause, as rare as the load
//! is heavy (a light load's log is started again by its writer long before). One held up by a
//! long read leaves the log for the next tries, [`RESTART_PAUSE`] later.

use std::time::{Duration, Instant};

use sea_orm::{ConnectionTrait, DatabaseConnection, DbBackend, Statement};

use super::one_sqlite_connection;
use crate::Result;

/// Pages of log (4 KiB each by default, so 64 MiB) past which a checkpoint empties the log.
const RESTART_LOG_OVER: i64 = 16_384;

/// How long emptying the log waits for the readers and the writer of the moment, at most;
/// new writers wait behind it meanwhile.
const RESTART_WAIT_MS: u64 = 50;

/// How long after a checkpoint that could not empty the log the next one tries again.
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
    /// Pages of log past which a checkpoint empties it.
    restart_over: i64,
    /// A checkpoint that could not empty the log (a reader or the writer held on past
    /// [`RESTART_WAIT_MS`]) keeps the next ones from trying before this.
    restart_held_until: Option<Instant>,
}

impl Default for Checkpoints {
    fn default() -> Self {
        Self::emptying_over(RESTART_LOG_OVER)
    }
}

impl Checkpoints {
    /// Checkpoints that empty the log past `restart_over` pages.
    fn emptying_over(restart_over: i64) -> Self {
        Self {
            restart_over,
            restart_held_until: None,
        }
    }

    /// Copies what it can of the write-ahead log into the database file (`PASSIVE`: what it
    /// cannot copy now is copied next time), and empties the log once it holds more than
    /// [`RESTART_LOG_OVER`] pages. Call it on [`checkpoint_connection`]: emptying the log sets
    /// that connection's busy timeout to [`RESTART_WAIT_MS`].
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
        let (finished, left) = checkpoint(db, "TRUNCATE").await?;
        self.restart_held_until = (!finished).then(|| now + RESTART_PAUSE);
        tracing::debug!(log_pages, left, finished, "emptying the write-ahead log");
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
    async fn a_log_grown_past_its_bound_is_emptied_and_a_short_one_is_left() {
        let (dir, db) = crate::test_support::migrated().await;
        db.execute_unprepared("CREATE TABLE filler (body BLOB)")
            .await
            .expect("table");
        for _ in 0..50 {
            db.execute_unprepared("INSERT INTO filler VALUES (zeroblob(8192))")
                .await
                .expect("insert");
        }
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
        Checkpoints::emptying_over(1_000_000)
            .run(&own)
            .await
            .expect("checkpoint");
        assert_eq!(log_bytes(dir.path()), grown);

        // The reader keeps it from emptying the log: it does not wait for it for long, and
        // does not try again at once.
        let mut checkpoints = Checkpoints::emptying_over(100);
        checkpoints.run(&own).await.expect("checkpoint");
        assert_eq!(log_bytes(dir.path()), grown, "emptied under a reader");
        assert!(checkpoints.restart_held_until.is_some());
        reader.commit().await.expect("commit");
        checkpoints.run(&own).await.expect("checkpoint");
        assert_eq!(log_bytes(dir.path()), grown, "tried again at once");

        checkpoints.restart_held_until = None;
        checkpoints.run(&own).await.expect("checkpoint");
        assert_eq!(log_bytes(dir.path()), 0, "the log was not emptied");
        assert!(checkpoints.restart_held_until.is_none());
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
        assert_eq!(rows, 50, "what the log held is in the database");
        db.close().await.expect("close");
    }
}
