//! What a flow's recipients add up to: the statistics, error counts and failures the API shows.

use sea_orm::sea_query::Expr;
use sea_orm::{
    ColumnTrait, ConnectionTrait, EntityTrait, FromQueryResult, QueryFilter, QueryOrder,
    QuerySelect,
};
use uuid::Uuid;

use crate::Result;
use crate::entities::flow_recipient;
use crate::values::RecipientStatus;

/// Recipient counts of a flow. `sent`, `delivered` and `read` are a funnel: each counts the
/// recipients that got at least that far, so a finished flow's `sent` is every recipient
/// Meta accepted, whatever its reports said next.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Statistics {
    /// Recipients.
    pub total: u64,
    /// Not tried yet, waiting for a retry, or being sent.
    pub pending: u64,
    /// Accepted by Meta (delivered, read, or reported failed afterwards included).
    pub sent: u64,
    /// Delivered to the phone (read included).
    pub delivered: u64,
    /// Read.
    pub read: u64,
    /// Accepted by Meta, no delivery confirmed yet (what a finishing flow waits for).
    pub awaiting: u64,
    /// Failed for good (before Meta took it, or reported failed after).
    pub failed: u64,
    /// Skipped (opted out, missing parameter).
    pub skipped: u64,
    /// Attempts beyond each recipient's first.
    pub retries: u64,
}

impl Statistics {
    /// Of the recipients Meta accepted, the share delivered (0 when none was accepted).
    pub fn delivery_rate(&self) -> f64 {
        share(self.delivered, self.sent)
    }

    /// Of the recipients delivered, the share that read it (0 when none was delivered).
    pub fn read_rate(&self) -> f64 {
        share(self.read, self.delivered)
    }
}

/// `part / whole`, to four decimals; 0 for an empty whole.
fn share(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        return 0.0;
    }
    let ratio = part as f64 / whole as f64;
    (ratio * 10_000.0).round() / 10_000.0
}

#[derive(Debug, FromQueryResult)]
struct StatusCount {
    status: RecipientStatus,
    /// Whether Meta accepted the latest attempt (it has a platform id).
    accepted: i64,
    count: i64,
    attempts: Option<i64>,
    tried: Option<i64>,
}

/// 1 for a recipient whose latest attempt Meta accepted (it holds the message's platform id).
static ACCEPTED: std::sync::LazyLock<sea_orm::sea_query::SimpleExpr> =
    std::sync::LazyLock::new(|| {
        Expr::cust("CAST(CASE WHEN platform_message_id IS NULL THEN 0 ELSE 1 END AS BIGINT)")
    });

/// The flow's live counts, from its recipients.
///
/// # Errors
/// The database's.
pub async fn statistics(db: &impl ConnectionTrait, flow_id: Uuid) -> Result<Statistics> {
    let rows = flow_recipient::Entity::find()
        .select_only()
        .column(flow_recipient::Column::Status)
        .column_as(ACCEPTED.clone(), "accepted")
        .column_as(flow_recipient::Column::Id.count(), "count")
        .column_as(Expr::cust("CAST(SUM(attempts) AS BIGINT)"), "attempts")
        .column_as(
            Expr::cust("CAST(SUM(CASE WHEN attempts > 0 THEN 1 ELSE 0 END) AS BIGINT)"),
            "tried",
        )
        .filter(flow_recipient::Column::FlowId.eq(flow_id))
        .group_by(flow_recipient::Column::Status)
        .group_by(ACCEPTED.clone())
        .into_model::<StatusCount>()
        .all(db)
        .await?;
    let mut stats = Statistics::default();
    for row in rows {
        let count = u64::try_from(row.count).unwrap_or(0);
        stats.total += count;
        let extra = row.attempts.unwrap_or(0) - row.tried.unwrap_or(0);
        stats.retries += u64::try_from(extra).unwrap_or(0);
        match row.status {
            RecipientStatus::Pending | RecipientStatus::Sending => stats.pending += count,
            RecipientStatus::Sent => {
                stats.sent += count;
                stats.awaiting += count;
            }
            RecipientStatus::Delivered => {
                stats.sent += count;
                stats.delivered += count;
            }
            RecipientStatus::Read => {
                stats.sent += count;
                stats.delivered += count;
                stats.read += count;
            }
            RecipientStatus::Failed => {
                stats.failed += count;
                // Accepted, then reported failed: it was sent.
                if row.accepted == 1 {
                    stats.sent += count;
                }
            }
            RecipientStatus::Skipped => stats.skipped += count,
        }
    }
    Ok(stats)
}

#[derive(Debug, FromQueryResult)]
struct CodeCount {
    code: String,
    count: i64,
}

/// How many recipients failed with each Meta error code (or `interrupted`, `opted_out`, … for
/// failures without one), for the flow's metadata.
///
/// # Errors
/// The database's.
pub async fn error_counts(db: &impl ConnectionTrait, flow_id: Uuid) -> Result<Vec<(String, u64)>> {
    let rows = flow_recipient::Entity::find()
        .select_only()
        .column_as(
            Expr::cust("COALESCE(CAST(error_code AS TEXT), error)"),
            "code",
        )
        .column_as(flow_recipient::Column::Id.count(), "count")
        .filter(flow_recipient::Column::FlowId.eq(flow_id))
        .filter(
            flow_recipient::Column::Status
                .is_in([RecipientStatus::Failed, RecipientStatus::Skipped]),
        )
        .group_by(Expr::cust("COALESCE(CAST(error_code AS TEXT), error)"))
        .into_model::<CodeCount>()
        .all(db)
        .await?;
    Ok(rows
        .into_iter()
        .map(|r| (r.code, u64::try_from(r.count).unwrap_or(0)))
        .collect())
}

/// The latest `limit` failed recipients, newest first.
///
/// # Errors
/// The database's.
pub async fn failures(
    db: &impl ConnectionTrait,
    flow_id: Uuid,
    limit: u64,
) -> Result<Vec<flow_recipient::Model>> {
    Ok(flow_recipient::Entity::find()
        .filter(flow_recipient::Column::FlowId.eq(flow_id))
        .filter(flow_recipient::Column::Status.eq(RecipientStatus::Failed))
        .order_by_desc(flow_recipient::Column::UpdatedAt)
        .limit(limit)
        .all(db)
        .await?)
}
