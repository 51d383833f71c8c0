//! What can go wrong below the HTTP layer, in terms callers can act on.

use sea_orm::{DbErr, SqlErr};

/// A persistence failure.
#[derive(Debug, thiserror::Error)]
pub enum PersistenceError {
    /// A unique constraint refused the write; carries the database's message, which names the
    /// constraint or its columns.
    #[error("unique constraint violated: {0}")]
    Conflict(String),
    /// Anything else the database reported.
    #[error(transparent)]
    Database(DbErr),
}

impl From<DbErr> for PersistenceError {
    fn from(err: DbErr) -> Self {
        match err.sql_err() {
            Some(SqlErr::UniqueConstraintViolation(message)) => Self::Conflict(message),
            _ => Self::Database(err),
        }
    }
}
