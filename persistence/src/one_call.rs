//! A write's statements sent to the database in one call, committed together.
//!
//! A write that is a fact and what it counts (a message and its usage counts, a delivery and
//! its count) is two statements. Each statement costs a call: on SQLite a round trip to the
//! connection's thread (0.15–0.2 ms on a 2-core machine, whatever the statement: a call of
//! `BEGIN IMMEDIATE; INSERT; UPSERT; COMMIT` costs what one `INSERT` does, the same four as
//! four calls twice that: `write_statements` in benches/README.md), on PostgreSQL one over the
//! network. Made atomic the
//! usual way, with a transaction of its own, the write was four calls: `BEGIN`, the fact, the
//! counts, `COMMIT`. [`run`] makes it one:
//!
//! - **SQLite** runs a string of several statements in one call, binding the values across
//!   them in order (sqlx's driver steps through each and carries its argument offset). Outside
//!   a transaction the string is wrapped in `BEGIN IMMEDIATE; …; COMMIT`, on one connection
//!   held for the call, and rolled back on that same connection when a statement fails; a call
//!   dropped half-way (its runtime stopping) closes that connection, which rolls back whatever
//!   it had begun, instead of handing it back to the pool inside a transaction.
//! - **PostgreSQL** runs them as one statement: every statement but the last in a `WITH`
//!   (data-modifying common table expressions), the last as the query. One statement is atomic
//!   by itself. Its parts share one snapshot and do not see each other's rows, so the
//!   statements given here must not depend on each other (none reads, updates or refers to a
//!   row another of them writes), which is what a fact and its counts are.
//!
//! Inside a transaction (a writer's batch, a caller's own) the statements are still one call,
//! and commit with the rest of it.

use sea_orm::sea_query::{
    CommonTableExpression, Expr, InsertStatement, Query, UpdateStatement, WithClause,
};
use sea_orm::sqlx::{self, Sqlite, pool::PoolConnection};
use sea_orm::{
    ConnectionTrait, DatabaseConnection, DatabaseExecutor, DatabaseTransaction, DbBackend, DbErr,
    RuntimeErr, Statement, Values,
};
use sea_query_sqlx::SqlxValues;

use crate::Result;

/// Where statements run: a connection on its own, where each statement commits by itself, or a
/// transaction, whose commit is its owner's.
pub trait Executor: ConnectionTrait + Sync {
    /// The connection, when statements run on it outside any transaction.
    fn outside_transaction(&self) -> Option<&DatabaseConnection>;
}

impl Executor for DatabaseConnection {
    fn outside_transaction(&self) -> Option<&DatabaseConnection> {
        Some(self)
    }
}

impl Executor for DatabaseTransaction {
    fn outside_transaction(&self) -> Option<&DatabaseConnection> {
        None
    }
}

impl Executor for DatabaseExecutor<'_> {
    fn outside_transaction(&self) -> Option<&DatabaseConnection> {
        match self {
            DatabaseExecutor::Connection(connection) => Some(connection),
            DatabaseExecutor::Transaction(_) | DatabaseExecutor::OwnedTransaction(_) => None,
        }
    }
}

/// One statement of a write.
#[derive(Clone, Debug)]
pub enum Write {
    /// An `INSERT` (an upsert too).
    Insert(InsertStatement),
    /// An `UPDATE`.
    Update(UpdateStatement),
}

impl From<InsertStatement> for Write {
    fn from(statement: InsertStatement) -> Self {
        Self::Insert(statement)
    }
}

impl From<UpdateStatement> for Write {
    fn from(statement: UpdateStatement) -> Self {
        Self::Update(statement)
    }
}

impl Write {
    fn build(&self, backend: DbBackend) -> Statement {
        match self {
            Self::Insert(statement) => backend.build(statement),
            Self::Update(statement) => backend.build(statement),
        }
    }

    /// The statement as a common table expression named `name` (PostgreSQL).
    fn cte(self, name: String) -> CommonTableExpression {
        let mut cte = CommonTableExpression::new();
        match self {
            Self::Insert(statement) => cte.query(statement),
            Self::Update(statement) => cte.query(statement),
        };
        cte.table_name(sea_orm::sea_query::Alias::new(name));
        cte
    }
}

/// Runs `writes`, statements that do not depend on one another (see the module's description),
/// in one call to the database; they commit together, or with the transaction `db` is.
///
/// # Errors
/// The database's; nothing of `writes` is written then (outside a transaction).
pub async fn run(db: &impl Executor, mut writes: Vec<Write>) -> Result<()> {
    let backend = db.get_database_backend();
    let Some(last) = writes.pop() else {
        return Ok(());
    };
    if writes.is_empty() {
        db.execute_raw(last.build(backend)).await?;
        return Ok(());
    }
    writes.push(last);
    if backend != DbBackend::Sqlite {
        db.execute_raw(with_query(writes, backend)).await?;
        return Ok(());
    }
    let (sql, values) = joined(&writes, backend);
    match db.outside_transaction() {
        Some(connection) => committed(connection, &sql, values).await,
        None => {
            db.execute_raw(Statement::from_sql_and_values(backend, sql, values))
                .await?;
            Ok(())
        }
    }
}

/// As [`run`], for writes that a crash may lose because what they record is done again: on
/// PostgreSQL, outside a transaction, their commit does not wait for the log to reach the disk
/// (`synchronous_commit` off for that transaction alone).
///
/// A lane's successes are such writes. Delivery is at least once: a success a crash loses
/// leaves its delivery pending, sent again after the restart with the same `webhook-id`, and
/// counted then, as the count lost with it was. A synchronous commit flushed its own log record
/// and waited for the disk, one flush for about ten successes, on the disk every writer's commit
/// waits on; an asynchronous commit leaves it to the log writer (within three times
/// `wal_writer_delay`, 0.6 s by default), and every later synchronous commit flushes it first.
/// PostgreSQL keeps commits in order either way, so nothing after a lost commit survives
/// without it. A synchronous standby is not waited for either; a success lost in a failover is
/// sent again the same way.
///
/// The setting is the statement's own: its writes go in a `WITH`, and its query sets
/// `synchronous_commit` for its transaction (`set_config(…, true)`), which is that one
/// statement's. SQLite's writes, and any inside a transaction, run as [`run`] runs them.
///
/// # Errors
/// As [`run`].
pub async fn run_redoable(db: &impl Executor, writes: Vec<Write>) -> Result<()> {
    let backend = db.get_database_backend();
    if backend != DbBackend::Postgres || db.outside_transaction().is_none() || writes.is_empty() {
        return run(db, writes).await;
    }
    db.execute_raw(unflushed(writes, backend)).await?;
    Ok(())
}

/// One statement of `writes`, all in a `WITH`, whose query makes its transaction's commit
/// asynchronous (PostgreSQL; see [`run_redoable`]).
fn unflushed(writes: Vec<Write>, backend: DbBackend) -> Statement {
    let with = ctes(writes);
    let asynchronous = Query::select()
        .expr(Expr::cust("set_config('synchronous_commit', 'off', true)"))
        .to_owned();
    backend.build(&with.query(asynchronous))
}

/// The statements' SQL, separated by `;`, and their values in order (SQLite).
fn joined(writes: &[Write], backend: DbBackend) -> (String, Values) {
    let mut sql = String::new();
    let mut values = Vec::new();
    for write in writes {
        let statement = write.build(backend);
        if !sql.is_empty() {
            sql.push_str("; ");
        }
        sql.push_str(&statement.sql);
        values.extend(statement.values.map(|v| v.0).unwrap_or_default());
    }
    (sql, Values(values))
}

/// One statement of `writes` (two or more): every one but the last in a `WITH`, the last as
/// its query (PostgreSQL).
fn with_query(mut writes: Vec<Write>, backend: DbBackend) -> Statement {
    let last = writes.pop();
    let with = ctes(writes);
    let query = match last {
        Some(Write::Insert(statement)) => with.query(statement),
        Some(Write::Update(statement)) => with.query(statement),
        None => return Statement::from_string(backend, "SELECT 1"),
    };
    backend.build(&query)
}

/// `writes` as the common table expressions `w0`, `w1`, … of one `WITH` (PostgreSQL).
fn ctes(writes: Vec<Write>) -> WithClause {
    let mut with = WithClause::new();
    for (n, write) in writes.into_iter().enumerate() {
        with.cte(write.cte(format!("w{n}")));
    }
    with
}

/// Runs `sql` (SQLite statements) wrapped in `BEGIN IMMEDIATE` and `COMMIT`, in one call, on
/// one connection of `connection`'s pool; rolls back on that connection when it fails.
async fn committed(connection: &DatabaseConnection, sql: &str, values: Values) -> Result<()> {
    let connection = connection
        .get_sqlite_connection_pool()
        .acquire()
        .await
        .map_err(|error| DbErr::Conn(RuntimeErr::SqlxError(error.into())))?;
    let mut held = Held {
        connection,
        settled: false,
    };
    let script = format!("BEGIN IMMEDIATE; {sql}; COMMIT");
    let outcome = sqlx::query_with(sqlx::AssertSqlSafe(script), SqlxValues(values))
        .execute(&mut *held.connection)
        .await;
    if let Err(error) = outcome {
        // The statement that failed is undone, the transaction around it is not. `ROLLBACK`
        // fails only when none is left (`BEGIN` itself failed, or SQLite rolled back on its
        // own); either way the connection is then outside any transaction.
        let _ = sqlx::raw_sql(sqlx::AssertSqlSafe("ROLLBACK"))
            .execute(&mut *held.connection)
            .await;
        held.settled = true;
        return Err(DbErr::Exec(RuntimeErr::SqlxError(error.into())).into());
    }
    held.settled = true;
    Ok(())
}

/// A connection held for a call that may leave it inside a transaction until it is settled:
/// dropped unsettled (the call's future dropped half-way), it is closed, which rolls back what
/// it had begun, rather than handed back to the pool inside a transaction.
struct Held {
    connection: PoolConnection<Sqlite>,
    settled: bool,
}

impl Drop for Held {
    fn drop(&mut self) {
        if !self.settled {
            self.connection.close_on_drop();
        }
    }
}

#[cfg(test)]
mod tests {
    use sea_orm::sea_query::{Alias, Expr, ExprTrait, Query};
    use sea_orm::{DatabaseConnection, TransactionTrait};

    use super::*;

    /// A database of two tables, `t` and `u`.
    async fn database(dir: &tempfile::TempDir) -> DatabaseConnection {
        let db = crate::connect(&crate::sqlite_url_in(dir.path()))
            .await
            .expect("database");
        for table in ["t", "u"] {
            let sql = format!("CREATE TABLE {table} (k INTEGER PRIMARY KEY, v TEXT NOT NULL)");
            db.execute_unprepared(&sql).await.expect("table");
        }
        db
    }

    fn insert(table: &str, k: i64, v: &str) -> Write {
        Query::insert()
            .into_table(Alias::new(table))
            .columns([Alias::new("k"), Alias::new("v")])
            .values_panic([k.into(), v.into()])
            .to_owned()
            .into()
    }

    fn update(table: &str, k: i64, v: &str) -> Write {
        Query::update()
            .table(Alias::new(table))
            .value(Alias::new("v"), v)
            .and_where(Expr::col(Alias::new("k")).eq(k))
            .to_owned()
            .into()
    }

    async fn rows(db: &DatabaseConnection, table: &str) -> Vec<(i64, String)> {
        let sql = format!("SELECT k, v FROM {table} ORDER BY k");
        db.query_all_raw(Statement::from_string(db.get_database_backend(), sql))
            .await
            .expect("read")
            .iter()
            .map(|r| {
                let k = r.try_get_by_index::<i64>(0).expect("k");
                (k, r.try_get_by_index::<String>(1).expect("v"))
            })
            .collect()
    }

    fn pair(k: i64, v: &str) -> (i64, String) {
        (k, v.to_owned())
    }

    #[tokio::test]
    async fn statements_in_one_call_bind_their_values_in_order_and_commit_together() {
        let dir = tempfile::tempdir().expect("dir");
        let db = database(&dir).await;
        let writes = vec![
            insert("t", 1, "a"),
            insert("u", 2, "b"),
            update("t", 1, "c"),
        ];
        run(&db, writes).await.expect("written");
        assert_eq!(rows(&db, "t").await, [pair(1, "c")]);
        assert_eq!(rows(&db, "u").await, [pair(2, "b")]);
    }

    #[tokio::test]
    async fn a_statement_refused_leaves_nothing_and_the_connection_outside_a_transaction() {
        let dir = tempfile::tempdir().expect("dir");
        let db = database(&dir).await;
        run(&db, vec![insert("u", 7, "stored before")])
            .await
            .expect("first");

        // The second statement conflicts with the row stored before: the first is undone too.
        let refused = run(&db, vec![insert("t", 1, "a"), insert("u", 7, "again")]).await;
        assert!(
            matches!(refused, Err(crate::PersistenceError::Conflict(_))),
            "a unique conflict says so: {refused:?}"
        );
        assert_eq!(rows(&db, "t").await, []);

        // Every connection of the pool is outside a transaction: each can begin one (SQLite
        // refuses a `BEGIN` inside a transaction), and another connection sees what each
        // commits.
        for k in 10..18 {
            run(&db, vec![insert("t", k, "later"), insert("u", k, "later")])
                .await
                .expect("a later write");
            let txn = db.begin().await.expect("begin");
            txn.commit().await.expect("commit");
        }
        assert_eq!(rows(&db, "t").await.len(), 8);
        assert_eq!(rows(&db, "u").await.len(), 9);
    }

    #[tokio::test]
    async fn inside_a_transaction_the_statements_are_its_own() {
        let dir = tempfile::tempdir().expect("dir");
        let db = database(&dir).await;
        let txn = db.begin().await.expect("begin");
        run(&txn, vec![insert("t", 1, "a"), insert("u", 1, "b")])
            .await
            .expect("written");
        txn.rollback().await.expect("rolled back");
        assert_eq!(rows(&db, "t").await, []);
        assert_eq!(rows(&db, "u").await, []);

        let txn = db.begin().await.expect("begin");
        run(&txn, vec![insert("t", 1, "a"), insert("u", 1, "b")])
            .await
            .expect("written");
        txn.commit().await.expect("committed");
        assert_eq!(rows(&db, "t").await, [pair(1, "a")]);
        assert_eq!(rows(&db, "u").await, [pair(1, "b")]);
    }

    #[tokio::test]
    async fn a_call_dropped_half_way_leaves_no_connection_inside_a_transaction() {
        let dir = tempfile::tempdir().expect("dir");
        let db = database(&dir).await;
        let numbers = "CREATE TABLE n (k INTEGER PRIMARY KEY); INSERT INTO n WITH RECURSIVE \
                       c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 1000) \
                       SELECT x FROM c";
        db.execute_unprepared(numbers).await.expect("numbers");
        // A million rows: the call is still running its statement when it is dropped, after
        // its `BEGIN IMMEDIATE`.
        let slow = Query::insert()
            .into_table(Alias::new("t"))
            .columns([Alias::new("k"), Alias::new("v")])
            .select_from(
                Query::select()
                    .expr(Expr::cust("a.k * 10000 + b.k"))
                    .expr(Expr::val("x"))
                    .from_as(Alias::new("n"), Alias::new("a"))
                    .from_as(Alias::new("n"), Alias::new("b"))
                    .to_owned(),
            )
            .expect("columns match")
            .to_owned();
        let call = run(&db, vec![slow.into(), insert("u", 1, "a")]);
        let dropped = tokio::time::timeout(std::time::Duration::from_millis(50), call).await;
        assert!(dropped.is_err(), "the call was still running");

        // Whatever it began is not left holding the write lock on a connection of the pool.
        run(&db, vec![insert("u", 2, "b"), insert("u", 3, "c")])
            .await
            .expect("a later write is not locked out");
        assert_eq!(rows(&db, "u").await, [pair(2, "b"), pair(3, "c")]);
        assert_eq!(rows(&db, "t").await, []);
    }

    #[test]
    fn on_postgres_the_statements_are_one_with_every_one_but_the_last_in_a_with() {
        let statement = with_query(
            vec![
                insert("t", 1, "a"),
                insert("u", 2, "b"),
                update("t", 3, "c"),
            ],
            DbBackend::Postgres,
        );
        assert_eq!(
            statement.sql,
            r#"WITH "w0" AS (INSERT INTO "t" ("k", "v") VALUES ($1, $2)) , "w1" AS (INSERT INTO "u" ("k", "v") VALUES ($3, $4)) UPDATE "t" SET "v" = $5 WHERE "k" = $6"#
        );
        assert_eq!(statement.values.map(|v| v.0.len()), Some(6));
    }

    #[test]
    fn redoable_writes_on_postgres_are_one_statement_whose_commit_does_not_wait_for_the_disk() {
        let writes = vec![insert("t", 1, "a"), update("u", 2, "b")];
        let statement = unflushed(writes, DbBackend::Postgres);
        assert_eq!(
            statement.sql,
            r#"WITH "w0" AS (INSERT INTO "t" ("k", "v") VALUES ($1, $2)) , "w1" AS (UPDATE "u" SET "v" = $3 WHERE "k" = $4) SELECT set_config('synchronous_commit', 'off', true)"#
        );
        assert_eq!(statement.values.map_or(0, |v| v.0.len()), 4);
    }

    #[tokio::test]
    async fn redoable_writes_on_sqlite_commit_as_any_others() {
        let dir = tempfile::tempdir().expect("dir");
        let db = database(&dir).await;
        let writes = vec![insert("t", 1, "a"), insert("u", 2, "b")];
        run_redoable(&db, writes).await.expect("run");
        assert_eq!(rows(&db, "t").await, [(1, "a".to_owned())]);
        assert_eq!(rows(&db, "u").await, [(2, "b".to_owned())]);
        // One refused leaves neither.
        let writes = vec![insert("t", 3, "c"), insert("u", 2, "again")];
        assert!(run_redoable(&db, writes).await.is_err());
        assert_eq!(rows(&db, "t").await.len(), 1);
    }
}
