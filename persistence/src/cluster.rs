//! The cluster's coordination in PostgreSQL (DESIGN §2 "Cluster"): the membership table, the
//! partition leases, and the fence a claim carries. Every time here is the database's
//! (`now()`), so the nodes' clocks never have to agree. PostgreSQL only: a cluster refuses to
//! start on SQLite.

use chrono::{DateTime, Utc};
use sea_orm::sea_query::{Expr, SimpleExpr};
use sea_orm::{ConnectionTrait, DbBackend, FromQueryResult, Statement, Value};
use uuid::Uuid;

use crate::Result;

/// What a claim proves it acts under: the partition's lease held by `node_id` at `epoch`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Fence {
    /// The partition of the claimed thing.
    pub partition: i32,
    /// The node claiming.
    pub node_id: Uuid,
    /// The lease's epoch the node acted under.
    pub epoch: i64,
}

impl Fence {
    /// The condition a claim's UPDATE adds: the lease is still the node's, at the same epoch,
    /// and has not expired (a node paused past its lease cannot claim, even before another
    /// node took the partition over). PostgreSQL's placeholders: a cluster runs on nothing
    /// else.
    pub fn condition(&self) -> SimpleExpr {
        Expr::cust_with_values(
            "EXISTS (SELECT 1 FROM partition_leases WHERE partition = $1 AND node_id = $2 \
             AND epoch = $3 AND expires_at > now())",
            [
                Value::from(self.partition),
                Value::from(self.node_id),
                Value::from(self.epoch),
            ],
        )
    }
}

/// Applies the fence to a claim's filter, when there is one (a single node has none).
pub fn fenced<Q: sea_orm::QueryFilter>(query: Q, fence: Option<&Fence>) -> Q {
    match fence {
        Some(fence) => query.filter(fence.condition()),
        None => query,
    }
}

/// A partition held: its number and the epoch of the lease.
#[derive(Clone, Copy, Debug, PartialEq, Eq, FromQueryResult)]
pub struct Held {
    /// The partition.
    pub partition: i32,
    /// Its lease's epoch.
    pub epoch: i64,
}

/// A node as the membership table has it, with the partitions it holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeView {
    /// The node's id (new at each start).
    pub id: Uuid,
    /// How the other nodes reach it.
    pub url: String,
    /// When it started.
    pub started_at: DateTime<Utc>,
    /// Whether its heartbeat is younger than the lease time.
    pub alive: bool,
    /// Whether it is stopping.
    pub draining: bool,
    /// The partitions whose unexpired lease it holds.
    pub partitions: Vec<i32>,
}

#[derive(FromQueryResult)]
struct NodeRow {
    id: Uuid,
    advertise_url: String,
    started_at: DateTime<Utc>,
    alive: bool,
    draining: bool,
}

#[derive(FromQueryResult)]
struct LeaseRow {
    partition: i32,
    node_id: Uuid,
}

/// An owner's address: the partition and the URL of the alive node holding its lease.
#[derive(Clone, Debug, PartialEq, Eq, FromQueryResult)]
pub struct Owner {
    /// The partition.
    pub partition: i32,
    /// The owner's advertised URL.
    pub advertise_url: String,
}

fn statement(sql: &str, values: Vec<Value>) -> Statement {
    Statement::from_sql_and_values(DbBackend::Postgres, sql, values)
}

fn ttl_interval(ttl_ms: u64) -> Value {
    Value::from(i64::try_from(ttl_ms).unwrap_or(i64::MAX))
}

/// Fixes the partition count at the first start (`wanted`) and answers the stored one, with a
/// lease row per partition.
///
/// # Errors
/// The database's.
pub async fn fix_partitions(db: &impl ConnectionTrait, wanted: i32) -> Result<i32> {
    db.execute_raw(statement(
        "INSERT INTO cluster_settings (key, value) VALUES ('partitions', $1) \
         ON CONFLICT (key) DO NOTHING",
        vec![Value::from(i64::from(wanted))],
    ))
    .await?;
    let row = db
        .query_one_raw(statement(
            "SELECT value FROM cluster_settings WHERE key = 'partitions'",
            vec![],
        ))
        .await?;
    let stored: i64 = match row {
        Some(row) => row.try_get("", "value")?,
        None => i64::from(wanted),
    };
    let stored = i32::try_from(stored).unwrap_or(wanted);
    db.execute_raw(statement(
        "INSERT INTO partition_leases (partition, node_id, epoch, expires_at) \
         SELECT g, NULL, 0, now() FROM generate_series(0, $1 - 1) AS g \
         ON CONFLICT (partition) DO NOTHING",
        vec![Value::from(stored)],
    ))
    .await?;
    Ok(stored)
}

/// Records the node's heartbeat (joining the table on its first).
///
/// # Errors
/// The database's.
pub async fn heartbeat(db: &impl ConnectionTrait, node_id: Uuid, url: &str) -> Result<()> {
    db.execute_raw(statement(
        "INSERT INTO cluster_nodes (id, advertise_url, started_at, heartbeat_at, draining) \
         VALUES ($1, $2, now(), now(), false) \
         ON CONFLICT (id) DO UPDATE SET heartbeat_at = now(), advertise_url = $2",
        vec![Value::from(node_id), Value::from(url)],
    ))
    .await?;
    Ok(())
}

/// Renews the node's unexpired leases for `ttl_ms` more; answers those it still holds (an
/// expired lease is lost: the node takes it again, if it is free, with a new epoch).
///
/// # Errors
/// The database's.
pub async fn renew(db: &impl ConnectionTrait, node_id: Uuid, ttl_ms: u64) -> Result<Vec<Held>> {
    Ok(Held::find_by_statement(statement(
        "UPDATE partition_leases SET expires_at = now() + $2 * interval '1 millisecond' \
         WHERE node_id = $1 AND expires_at > now() RETURNING partition, epoch",
        vec![Value::from(node_id), ttl_interval(ttl_ms)],
    ))
    .all(db)
    .await?)
}

/// How many nodes are alive (heartbeat younger than `ttl_ms`) and not draining.
///
/// # Errors
/// The database's.
pub async fn alive_nodes(db: &impl ConnectionTrait, ttl_ms: u64) -> Result<i64> {
    let row = db
        .query_one_raw(statement(
            "SELECT count(*) AS alive FROM cluster_nodes \
             WHERE heartbeat_at > now() - $1 * interval '1 millisecond' AND NOT draining",
            vec![ttl_interval(ttl_ms)],
        ))
        .await?;
    Ok(match row {
        Some(row) => row.try_get("", "alive")?,
        None => 0,
    })
}

/// Takes up to `count` free or expired partitions, each with its epoch incremented.
///
/// # Errors
/// The database's.
pub async fn take(
    db: &impl ConnectionTrait,
    node_id: Uuid,
    ttl_ms: u64,
    count: i64,
) -> Result<Vec<Held>> {
    Ok(Held::find_by_statement(statement(
        "UPDATE partition_leases SET node_id = $1, epoch = epoch + 1, \
             expires_at = now() + $2 * interval '1 millisecond' \
         WHERE partition IN (SELECT partition FROM partition_leases \
             WHERE node_id IS NULL OR expires_at <= now() \
             ORDER BY partition LIMIT $3 FOR UPDATE SKIP LOCKED) \
           AND (node_id IS NULL OR expires_at <= now()) \
         RETURNING partition, epoch",
        vec![
            Value::from(node_id),
            ttl_interval(ttl_ms),
            Value::from(count),
        ],
    ))
    .all(db)
    .await?)
}

/// Hands `partitions` back (free at once for another node to take).
///
/// # Errors
/// The database's.
pub async fn release(db: &impl ConnectionTrait, node_id: Uuid, partitions: &[i32]) -> Result<()> {
    if partitions.is_empty() {
        return Ok(());
    }
    let list = partitions
        .iter()
        .map(i32::to_string)
        .collect::<Vec<_>>()
        .join(",");
    db.execute_raw(statement(
        "UPDATE partition_leases SET node_id = NULL, expires_at = now() \
         WHERE node_id = $1 AND partition = ANY(string_to_array($2, ',')::integer[])",
        vec![Value::from(node_id), Value::from(list)],
    ))
    .await?;
    Ok(())
}

/// Marks the node as stopping: it counts no more towards the others' fair share.
///
/// # Errors
/// The database's.
pub async fn drain(db: &impl ConnectionTrait, node_id: Uuid) -> Result<()> {
    db.execute_raw(statement(
        "UPDATE cluster_nodes SET draining = true WHERE id = $1",
        vec![Value::from(node_id)],
    ))
    .await?;
    Ok(())
}

/// The node leaves: every lease it holds is freed and its row removed.
///
/// # Errors
/// The database's.
pub async fn leave(db: &impl ConnectionTrait, node_id: Uuid) -> Result<()> {
    db.execute_raw(statement(
        "UPDATE partition_leases SET node_id = NULL, expires_at = now() WHERE node_id = $1",
        vec![Value::from(node_id)],
    ))
    .await?;
    db.execute_raw(statement(
        "DELETE FROM cluster_nodes WHERE id = $1",
        vec![Value::from(node_id)],
    ))
    .await?;
    Ok(())
}

/// Forgets nodes whose heartbeat is older than `gone_ms` (their leases have long expired).
///
/// # Errors
/// The database's.
pub async fn forget_gone(db: &impl ConnectionTrait, gone_ms: u64) -> Result<()> {
    db.execute_raw(statement(
        "DELETE FROM cluster_nodes WHERE heartbeat_at < now() - $1 * interval '1 millisecond' \
         AND NOT EXISTS (SELECT 1 FROM partition_leases l WHERE l.node_id = cluster_nodes.id \
             AND l.expires_at > now())",
        vec![ttl_interval(gone_ms)],
    ))
    .await?;
    Ok(())
}

/// Every node in the table, with the partitions whose unexpired lease it holds.
///
/// # Errors
/// The database's.
pub async fn nodes(db: &impl ConnectionTrait, ttl_ms: u64) -> Result<Vec<NodeView>> {
    let rows = NodeRow::find_by_statement(statement(
        "SELECT id, advertise_url, started_at, draining, \
             heartbeat_at > now() - $1 * interval '1 millisecond' AS alive \
         FROM cluster_nodes ORDER BY started_at, id",
        vec![ttl_interval(ttl_ms)],
    ))
    .all(db)
    .await?;
    let leases = LeaseRow::find_by_statement(statement(
        "SELECT partition, node_id FROM partition_leases \
         WHERE node_id IS NOT NULL AND expires_at > now() ORDER BY partition",
        vec![],
    ))
    .all(db)
    .await?;
    Ok(rows
        .into_iter()
        .map(|row| NodeView {
            partitions: leases
                .iter()
                .filter(|lease| lease.node_id == row.id)
                .map(|lease| lease.partition)
                .collect(),
            id: row.id,
            url: row.advertise_url,
            started_at: row.started_at,
            alive: row.alive,
            draining: row.draining,
        })
        .collect())
}

/// Where each owned partition's owner is reached (partitions without a live owner are left
/// out).
///
/// # Errors
/// The database's.
pub async fn owners(db: &impl ConnectionTrait) -> Result<Vec<Owner>> {
    Ok(Owner::find_by_statement(statement(
        "SELECT l.partition, n.advertise_url FROM partition_leases l \
         JOIN cluster_nodes n ON n.id = l.node_id WHERE l.expires_at > now() \
         ORDER BY l.partition",
        vec![],
    ))
    .all(db)
    .await?)
}

/// The listener a node hears the others' notifications with.
pub use sea_orm::sqlx::postgres::PgListener;

/// Listens on `channel` with a connection of its own from `db`'s pool.
///
/// # Errors
/// The database's.
pub async fn listen(db: &sea_orm::DatabaseConnection, channel: &str) -> Result<PgListener> {
    let mut listener = PgListener::connect_with(db.get_postgres_connection_pool())
        .await
        .map_err(|e| sea_orm::DbErr::Custom(e.to_string()))?;
    listener
        .listen(channel)
        .await
        .map_err(|e| sea_orm::DbErr::Custom(e.to_string()))?;
    Ok(listener)
}

/// Publishes each of `payloads` on the notification channel `channel`, in order, with one
/// statement however many there are (delivered at commit when run in a transaction).
///
/// # Errors
/// The database's.
pub async fn notify(db: &impl ConnectionTrait, channel: &str, payloads: &[String]) -> Result<()> {
    let payloads =
        serde_json::to_string(payloads).map_err(|e| sea_orm::DbErr::Json(e.to_string()))?;
    db.execute_raw(statement(
        "SELECT pg_notify($1, payload) FROM json_array_elements_text($2::json) AS payload",
        vec![Value::from(channel), Value::from(payloads)],
    ))
    .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use sea_orm::sea_query::{ExprTrait, PostgresQueryBuilder, Query};

    use super::*;

    #[test]
    fn the_fence_binds_its_values_after_the_claims_own() {
        let fence = Fence {
            partition: 3,
            node_id: Uuid::nil(),
            epoch: 7,
        };
        let (sql, values) = Query::update()
            .table("messages")
            .value("status", "sending")
            .and_where(Expr::col("id").eq(1))
            .and_where(fence.condition())
            .build(PostgresQueryBuilder);
        assert!(
            sql.contains("partition = $3 AND node_id = $4 AND epoch = $5"),
            "{sql}"
        );
        assert_eq!(values.0.len(), 5);
    }
}
