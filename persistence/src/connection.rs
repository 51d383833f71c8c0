//! Opening the database and bringing its schema up to date.

mod busy;
mod checkpoint;
mod memory;
mod plans;
mod write_behind;

pub use checkpoint::{Checkpoints, checkpoint_connection};
pub use write_behind::WriteBehind;

use std::path::Path;
use std::time::Duration;

use parley_migrations::{Migrator, MigratorTrait};
use sea_orm::sqlx::Connection as _;
use sea_orm::sqlx::SqliteConnection;
use sea_orm::sqlx::postgres::PgPoolOptions;
use sea_orm::sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous,
};
use sea_orm::{
    ConnectOptions, Database, DatabaseConnection, DatabaseTransaction, SqliteTransactionMode,
    SqlxPostgresConnector, SqlxSqliteConnector, TransactionOptions, TransactionTrait,
};

use crate::Result;

/// How long a SQLite connection waits for the writer lock before failing with "database is
/// locked". SQLite has one writer at a time; short write transactions make this rarely reached.
/// How it waits is [`busy`]'s.
const SQLITE_BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// Statements each of the writers' connections keeps prepared (sqlx's default is 100).
const WRITER_STATEMENTS: usize = 1024;

/// A pooled connection idle at least this long is pinged before it is handed out.
const PING_WHEN_IDLE_FOR: Duration = Duration::from_secs(30);

/// The URL of the embedded SQLite database kept in `data_dir`.
pub fn sqlite_url_in(data_dir: &Path) -> String {
    format!("sqlite://{}?mode=rwc", data_dir.join("parley.db").display())
}

/// Connects to the database named by `url` (`sqlite://…` or `postgres://…`).
///
/// SQLite connections use WAL, `synchronous=NORMAL`, foreign keys, a busy handler that
/// waits for the writer lock in short steps ([`busy`]) and plans that do not depend on bound
/// values, so that cached statements stay cached ([`plans`]). SQLite's own memory comes from
/// mimalloc, as the rest of Parley's does ([`memory`]).
///
/// # Errors
/// Fails when the URL is not understood or the database cannot be reached.
pub async fn connect(url: &str) -> Result<DatabaseConnection> {
    if url.starts_with("sqlite:") {
        memory::use_mimalloc();
    }
    let mut options = ConnectOptions::new(url.to_owned());
    options
        .max_connections(if url.starts_with("sqlite:") { 8 } else { 16 })
        .min_connections(1)
        .connect_timeout(Duration::from_secs(10))
        .acquire_timeout(Duration::from_secs(10))
        // A connection is pinged before use only after sitting idle (when a server, proxy or
        // firewall may have dropped it), not on every checkout: the default ping is one more
        // round trip per statement, unseen in the statement log.
        .test_before_acquire_if_idle_for(PING_WHEN_IDLE_FOR)
        // Every statement in the log, only when the filter asks for it
        // (`PARLEY_LOG=info,sqlx::query=debug`): counting queries per request.
        .sqlx_logging(tracing::enabled!(target: "sqlx::query", tracing::Level::DEBUG))
        .map_sqlx_sqlite_opts(|opts| {
            opts.journal_mode(SqliteJournalMode::Wal)
                .synchronous(SqliteSynchronous::Normal)
                // No checkpoint inside a commit: the one that crossed 1000 pages of log paid
                // milliseconds for copying them (a turn's p99); `Checkpoints` does it off
                // the request path. The last connection to close checkpoints what is left.
                .pragma("wal_autocheckpoint", "0")
                .busy_timeout(SQLITE_BUSY_TIMEOUT)
                .foreign_keys(true)
                .create_if_missing(true)
        })
        .map_sqlx_sqlite_pool_opts(|pool| {
            pool.after_connect(|connection, _| Box::pin(prepare_sqlite(connection)))
        });
    Ok(Database::connect(options).await?)
}

/// What every SQLite connection gets once opened: the busy handler and the plans' stability.
async fn prepare_sqlite(connection: &mut SqliteConnection) -> Result<(), sea_orm::sqlx::Error> {
    busy::install(connection).await?;
    plans::install(connection).await
}

/// The connections the database's `writers` commit on: a pool of their own, opened as `db`'s
/// are, keeping [`WRITER_STATEMENTS`] prepared statements each.
///
/// SQLite empties a connection's page cache whenever another connection has committed since
/// its last read. Batches taken from the shared pool ran on whichever connection was free,
/// which the readers' connections and the other batches had made cold: each write read again,
/// through system calls, the pages of the tables and indexes it added to. The writer's own
/// connection, written to by the writer alone, keeps its cache from one batch to the next.
///
/// PostgreSQL keeps its pages in the server, but a merged write (`group_commit::Merged`) is one
/// statement per number of pieces it carries: on the shared pool's connections (100 prepared
/// statements each, shared with the readers) they were parsed and planned again and again. The
/// writers' own connections keep them, and no reader waits behind a batch for a connection.
pub(crate) fn writer_connection(db: &DatabaseConnection, writers: u32) -> DatabaseConnection {
    match db.get_database_backend() {
        sea_orm::DbBackend::Sqlite => sqlite_writer(db),
        sea_orm::DbBackend::Postgres => postgres_writers(db, writers),
        _ => db.clone(),
    }
}

/// SQLite's writer connection (see [`writer_connection`]).
fn sqlite_writer(db: &DatabaseConnection) -> DatabaseConnection {
    let options = (*db.get_sqlite_connection_pool().connect_options())
        .clone()
        // Merged writes prepare one statement per number of pieces they carry (seven per kind
        // on SQLite): room for those beside the single-row ones, which stay cached.
        .statement_cache_capacity(WRITER_STATEMENTS);
    // A second connection to `:memory:` would open another, empty database.
    one_sqlite_connection(options).unwrap_or_else(|| db.clone())
}

/// A pool of one SQLite connection opened with `options`, kept for good (reopening it would
/// empty the page cache it is there for); `None` for `:memory:`, where a second connection
/// would open another, empty database.
fn one_sqlite_connection(options: SqliteConnectOptions) -> Option<DatabaseConnection> {
    if options.get_filename() == Path::new(":memory:") {
        return None;
    }
    let own = SqlitePoolOptions::new()
        .max_connections(1)
        .min_connections(1)
        .idle_timeout(None)
        .max_lifetime(None)
        .test_before_acquire(false)
        .acquire_timeout(Duration::from_secs(10))
        .after_connect(|connection, _| Box::pin(prepare_sqlite(connection)))
        .connect_lazy_with(options);
    Some(SqlxSqliteConnector::from_sqlx_sqlite_pool(own))
}

/// PostgreSQL's writer connections, one per writer (see [`writer_connection`]), pinged before
/// use after sitting idle as the shared pool's are.
fn postgres_writers(db: &DatabaseConnection, writers: u32) -> DatabaseConnection {
    let options = (*db.get_postgres_connection_pool().connect_options())
        .clone()
        .statement_cache_capacity(WRITER_STATEMENTS);
    let own = PgPoolOptions::new()
        .max_connections(writers.max(1))
        .min_connections(0)
        .idle_timeout(None)
        .acquire_timeout(Duration::from_secs(10))
        .test_before_acquire(false)
        .before_acquire(|connection, meta| {
            Box::pin(async move {
                if meta.idle_for >= PING_WHEN_IDLE_FOR {
                    connection.ping().await?;
                }
                Ok(true)
            })
        })
        .connect_lazy_with(options);
    SqlxPostgresConnector::from_sqlx_postgres_pool(own)
}

/// Applies every migration that has not run yet.
///
/// # Errors
/// Fails when a migration fails; the failing step is rolled back where the database allows it.
pub async fn migrate(db: &DatabaseConnection) -> Result<()> {
    Migrator::up(db, None).await?;
    Ok(())
}

/// Starts a transaction that will write. On SQLite it begins `IMMEDIATE`, taking the writer
/// lock up front (waiting up to the busy timeout): a deferred transaction that reads first and
/// writes later fails at once with "database is locked" when another writer got in between.
/// On PostgreSQL it is an ordinary transaction.
///
/// # Errors
/// Fails when the database cannot start a transaction (on SQLite: the writer lock stayed busy
/// past the busy timeout).
pub async fn begin_write(db: &DatabaseConnection) -> Result<DatabaseTransaction> {
    let options = TransactionOptions {
        sqlite_transaction_mode: Some(SqliteTransactionMode::Immediate),
        ..TransactionOptions::default()
    };
    Ok(db.begin_with_options(options).await?)
}

/// The connection pool's open connections and how many of them are idle (for metrics).
pub fn pool_connections(db: &DatabaseConnection) -> (u32, usize) {
    match db.get_database_backend() {
        sea_orm::DbBackend::Sqlite => {
            let pool = db.get_sqlite_connection_pool();
            (pool.size(), pool.num_idle())
        }
        sea_orm::DbBackend::Postgres => {
            let pool = db.get_postgres_connection_pool();
            (pool.size(), pool.num_idle())
        }
        _ => (0, 0),
    }
}
