//! Shared setup for this crate's unit tests: a migrated SQLite database in a temporary
//! directory, and a workspace with its owner.

use chrono::{DateTime, Utc};
use sea_orm::{ConnectionTrait, DatabaseConnection, DbBackend, Statement};

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

/// A fresh, migrated SQLite database for asking query plans of. EXPLAIN is compiled against the
/// schema its connection last read and never checks it again, so a pooled connection opened
/// before the migration would plan with indexes a migration dropped: the plans are asked of
/// connections opened after it.
pub(crate) async fn migrated_for_plans() -> (tempfile::TempDir, DatabaseConnection) {
    let (dir, db) = migrated().await;
    drop(db);
    let db = crate::connect(&crate::sqlite_url_in(dir.path()))
        .await
        .expect("database");
    (dir, db)
}

/// SQLite's plan for `query`, one step after another, separated by `; `.
pub(crate) async fn plan_of(db: &DatabaseConnection, query: Statement) -> String {
    let explain = Statement::from_sql_and_values(
        DbBackend::Sqlite,
        format!("EXPLAIN QUERY PLAN {}", query.sql),
        query.values.map(|v| v.0).unwrap_or_default(),
    );
    let rows = db.query_all_raw(explain).await.expect("plan");
    let steps: Vec<String> = rows
        .iter()
        .map(|row| row.try_get::<String>("", "detail").expect("detail"))
        .collect();
    steps.join("; ")
}

/// The names of `table`'s indexes.
pub(crate) async fn indexes_of(db: &DatabaseConnection, table: &str) -> Vec<String> {
    let indexes = db
        .query_all_raw(Statement::from_sql_and_values(
            DbBackend::Sqlite,
            "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = ?",
            [table.into()],
        ))
        .await
        .expect("indexes");
    indexes
        .iter()
        .map(|row| row.try_get::<String>("", "name").expect("name"))
        .collect()
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
