//! The readiness probe's write: a database Parley can read but not write is not ready.

use chrono::{DateTime, Utc};
use sea_orm::ConnectionTrait;
use sea_orm::sea_query::{Alias, OnConflict, Query};

use crate::Result;

/// Writes the probe's one row, as any write would be written.
///
/// # Errors
/// [`crate::PersistenceError::Unavailable`] when the database cannot be reached or written.
pub async fn probe_write(db: &impl ConnectionTrait, now: DateTime<Utc>) -> Result<()> {
    let (id, checked_at) = (Alias::new("id"), Alias::new("checked_at"));
    let statement = Query::insert()
        .into_table(Alias::new("health_probe"))
        .columns([id.clone(), checked_at.clone()])
        .values_panic([1.into(), now.into()])
        .on_conflict(OnConflict::column(id).update_column(checked_at).to_owned())
        .to_owned();
    db.execute(&statement).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::PersistenceError;

    #[tokio::test]
    async fn a_database_that_cannot_be_written_is_unavailable() {
        let dir = tempfile::tempdir().expect("dir");
        let url = crate::sqlite_url_in(dir.path());
        let db = crate::connect(&url).await.expect("connect");
        crate::migrate(&db).await.expect("migrate");
        probe_write(&db, crate::clock::now())
            .await
            .expect("writable");
        db.close().await.expect("close");

        let read_only = sea_orm::Database::connect(url.replace("mode=rwc", "mode=ro"))
            .await
            .expect("read-only connection");
        let refused = probe_write(&read_only, crate::clock::now()).await;
        assert!(
            matches!(refused, Err(PersistenceError::Unavailable(_))),
            "{refused:?}"
        );
    }
}
