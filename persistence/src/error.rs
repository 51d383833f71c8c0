//! What can go wrong below the HTTP layer, in terms callers can act on.

use sea_orm::{DbErr, SqlErr};

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
    /// Anything else the database reported.
    #[error(transparent)]
    Database(DbErr),
}

impl From<DbErr> for PersistenceError {
    fn from(err: DbErr) -> Self {
        if matches!(err, DbErr::RecordNotUpdated | DbErr::RecordNotFound(_)) {
            return Self::Vanished(err.to_string());
        }
        match err.sql_err() {
            Some(SqlErr::UniqueConstraintViolation(message)) => Self::Conflict(message),
            Some(SqlErr::ForeignKeyConstraintViolation(message)) => Self::Vanished(message),
            _ => Self::Database(err),
        }
    }
}
