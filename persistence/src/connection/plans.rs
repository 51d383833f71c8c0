//! How a SQLite connection plans its cached statements: once, whatever the values bound.
//!
//! SQLite lets a few bound values shape a statement's plan: a `LIMIT ?` or `OFFSET ?` (which
//! sea-orm binds for every `.one()` and every page), a `LIKE ?` pattern, and with statistics
//! the values compared to an indexed column. A cached statement with such a parameter is
//! marked expired whenever that parameter is bound again, so every execution parses and plans
//! it anew (`sqlite3Reprepare`): `perf` of `crud_reads` put 14 % of `GET /identity/{id}`'s and
//! 13 % of `GET /workers`'s CPU there, against none for the same statements with literal
//! limits. SQLite's query planner stability guarantee (QPSG) plans each statement once for
//! any values, so the statement cache holds.
//!
//! What it gives up: a bound `LIKE` prefix (`'abc%'`) could no longer narrow an index scan.
//! Parley's one `LIKE` (campaign names: `%…%` on `lower(name)`, with an escape) can use no
//! index whatever the value.

// SQLite's connection options can only be set through its API.
#![allow(unsafe_code)]

use std::ffi::c_int;

use libsqlite3_sys::{SQLITE_DBCONFIG_ENABLE_QPSG, SQLITE_OK, sqlite3_db_config};
use sea_orm::sqlx::SqliteConnection;

/// Turns the query planner stability guarantee on for a newly opened connection.
///
/// # Errors
/// Fails when the connection's worker thread is gone or SQLite refuses the option.
pub(super) async fn install(connection: &mut SqliteConnection) -> Result<(), sea_orm::sqlx::Error> {
    let mut handle = connection.lock_handle().await?;
    let mut now_on: c_int = 0;
    // SAFETY: `lock_handle` gives exclusive use of the open `sqlite3` handle while `handle`
    // lives (sqlx's worker thread makes no call on it meanwhile). `SQLITE_DBCONFIG_ENABLE_QPSG`
    // takes exactly two further arguments: an `int` (1: on) and an `int*` that SQLite writes
    // the resulting setting to, here a local that outlives the call.
    let code = unsafe {
        sqlite3_db_config(
            handle.as_raw_handle().as_ptr(),
            SQLITE_DBCONFIG_ENABLE_QPSG,
            1 as c_int,
            &raw mut now_on,
        )
    };
    if code == SQLITE_OK && now_on == 1 {
        Ok(())
    } else {
        Err(sea_orm::sqlx::Error::Protocol(format!(
            "SQLite refused the query planner stability guarantee (code {code})"
        )))
    }
}
