//! Shared setup for this crate's unit tests: a migrated SQLite database in a temporary
//! directory, and a workspace with its owner.

use chrono::{DateTime, Utc};
use sea_orm::{ConnectionTrait, DatabaseConnection};

use crate::{tenancy, workspaces};

/// A fresh, migrated SQLite database; the directory holds it and must outlive it.
pub(crate) async fn migrated() -> (tempfile::TempDir, DatabaseConnection) {
    let dir = tempfile::tempdir().expect("dir");
    let db = crate::connect(&crate::sqlite_url_in(dir.path()))
        .await
        .expect("database");
    crate::migrate(&db).await.expect("migrate");
    (dir, db)
}

/// Commits `rows` rows of 8 KiB to a scratch table (made on first use): log to checkpoint.
pub(crate) async fn fill_log(db: &DatabaseConnection, rows: usize) {
    db.execute_unprepared("CREATE TABLE IF NOT EXISTS filler (body BLOB)")
        .await
        .expect("table");
    for _ in 0..rows {
        db.execute_unprepared("INSERT INTO filler VALUES (zeroblob(8192))")
            .await
            .expect("insert");
    }
}

/// A workspace of a business of the same name, with an owner; its id.
pub(crate) async fn workspace(db: &DatabaseConnection, name: &str, now: DateTime<Utc>) -> i64 {
    let business = tenancy::find_or_create_business(db, name, now)
        .await
        .expect("business");
    let owner = tenancy::find_or_create_user(db, business.id, None, now)
        .await
        .expect("user");
    workspaces::create_with_owner(db, business.id, owner.id, name, None, now)
        .await
        .expect("workspace")
        .id
}
