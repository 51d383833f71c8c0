//! What can go wrong below the HTTP layer, in terms callers can act on.

use sea_orm::sqlx;
use sea_orm::{DbErr, RuntimeErr, SqlErr};

/// A persistence failure.
#[derive(Debug, thiserror::Error)]
pub enum PersistenceError {
    /// A unique constraint refused the write; carries the database's message, which names the
    /// constraint or its columns.
    #[error("unique constraint violated: {0}")]
    Conflict(String),
    /// The row the write was about, or a row it refers to, went away meanwhile (a concurrent
    /// delete): an update that found nothing, or a foreign key with nothing at its end.
    #[error("a row this write depends on no longer exists: {0}")]
    Vanished(String),
    /// The database cannot be reached or written right now (a connection lost or refused, a
    /// restart, a file it may not write, a full disk): the same write may succeed shortly.
    #[error("the database is unavailable: {0}")]
    Unavailable(DbErr),
    /// Anything else the database reported.
    #[error(transparent)]
    Database(DbErr),
}

impl PersistenceError {
    /// Whether the database was unavailable rather than refusing this write: worth waiting
    /// for, and a 503 to a caller.
    pub fn is_unavailable(&self) -> bool {
        matches!(self, Self::Unavailable(_))
    }
}

/// Whether `err` says the database cannot be reached or written right now, as opposed to
/// refusing a statement.
fn is_unavailable(err: &DbErr) -> bool {
    match err {
        DbErr::ConnectionAcquire(_) => true,
        DbErr::Conn(RuntimeErr::SqlxError(error))
        | DbErr::Exec(RuntimeErr::SqlxError(error))
        | DbErr::Query(RuntimeErr::SqlxError(error)) => sqlx_unavailable(error),
        DbErr::Conn(_) => true,
        _ => false,
    }
}

fn sqlx_unavailable(error: &sqlx::Error) -> bool {
    match error {
        sqlx::Error::Io(_)
        | sqlx::Error::Tls(_)
        | sqlx::Error::PoolTimedOut
        | sqlx::Error::PoolClosed
        | sqlx::Error::WorkerCrashed => true,
        sqlx::Error::Database(db) => {
            let code = db.code().unwrap_or_default();
            // SQLite: BUSY, READONLY, IOERR, FULL, CANTOPEN (and their extended codes, whose
            // low byte is the primary code). PostgreSQL: connection exceptions (08…), an
            // operator's intervention (57P…: shutdown, cannot connect now), insufficient
            // resources (53…), a read-only transaction on a standby (25006).
            let sqlite = code
                .parse::<i32>()
                .is_ok_and(|code| matches!(code & 0xff, 5 | 8 | 10 | 13 | 14));
            sqlite
                || code.starts_with("08")
                || code.starts_with("57P")
                || code.starts_with("53")
                || code == "25006"
        }
        _ => false,
    }
}

impl From<DbErr> for PersistenceError {
    fn from(err: DbErr) -> Self {
        if matches!(err, DbErr::RecordNotUpdated | DbErr::RecordNotFound(_)) {
            return Self::Vanished(err.to_string());
        }
        match err.sql_err() {
            Some(SqlErr::UniqueConstraintViolation(message)) => Self::Conflict(message),
            Some(SqlErr::ForeignKeyConstraintViolation(message)) => Self::Vanished(message),
            _ if is_unavailable(&err) => Self::Unavailable(err),
            _ => Self::Database(err),
        }
    }
}
