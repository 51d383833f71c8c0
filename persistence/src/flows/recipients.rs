//! A flow's recipients: their progress one row each (claimed `sending` before each send,
//! recorded after), delivery reports moving them forward, and the statistics, error counts and
//! failures the API shows.

use chrono::{DateTime, Utc};
use sea_orm::sea_query::{Expr, ExprTrait};
use sea_orm::{
    ColumnTrait, ConnectionTrait, EntityTrait, FromQueryResult, QueryFilter, QueryOrder,
    QuerySelect,
};
use uuid::Uuid;

use crate::entities::flow_recipient;
use crate::page::fetch_keyset;
use crate::values::{FailureReason, RecipientStatus};
use crate::{Cursor, CursorPage, Result};

/// The next recipients due: pending, not waiting for a retry past `now`, in order.
///
/// # Errors
/// The database's.
pub async fn due_recipients(
    db: &impl ConnectionTrait,
    flow_id: Uuid,
    now: DateTime<Utc>,
    limit: u64,
) -> Result<Vec<flow_recipient::Model>> {
    Ok(flow_recipient::Entity::find()
        .filter(flow_recipient::Column::FlowId.eq(flow_id))
        .filter(flow_recipient::Column::Status.eq(RecipientStatus::Pending))
        .filter(
            flow_recipient::Column::NextAttemptAt
                .is_null()
                .or(flow_recipient::Column::NextAttemptAt.lte(now)),
        )
        .order_by_asc(flow_recipient::Column::Position)
        .limit(limit)
        .all(db)
        .await?)
}

/// When the earliest retry of the flow is due, if one waits.
///
/// # Errors
/// The database's.
pub async fn next_retry_at(
    db: &impl ConnectionTrait,
    flow_id: Uuid,
) -> Result<Option<DateTime<Utc>>> {
    Ok(flow_recipient::Entity::find()
        .filter(flow_recipient::Column::FlowId.eq(flow_id))
        .filter(flow_recipient::Column::Status.eq(RecipientStatus::Pending))
        .order_by_asc(flow_recipient::Column::NextAttemptAt)
        .one(db)
        .await?
        .map(|r| r.next_attempt_at.unwrap_or(DateTime::<Utc>::MIN_UTC)))
}

/// Claims a pending recipient for a send (`sending`, one more attempt); `false` when it was not
/// pending any more.
///
/// # Errors
/// The database's.
pub async fn claim(db: &impl ConnectionTrait, id: Uuid, now: DateTime<Utc>) -> Result<bool> {
    let updated = flow_recipient::Entity::update_many()
        .col_expr(
            flow_recipient::Column::Status,
            Expr::value(RecipientStatus::Sending),
        )
        .col_expr(
            flow_recipient::Column::Attempts,
            Expr::col(flow_recipient::Column::Attempts).add(1),
        )
        .col_expr(flow_recipient::Column::UpdatedAt, Expr::value(now))
        .filter(flow_recipient::Column::Id.eq(id))
        .filter(flow_recipient::Column::Status.eq(RecipientStatus::Pending))
        .exec(db)
        .await?;
    Ok(updated.rows_affected > 0)
}

/// How a claimed recipient's send ended.
#[derive(Clone, Debug)]
pub enum SendOutcome {
    /// Accepted (`Sent`) or delivered at once (`Delivered`, the sandbox).
    Accepted {
        /// The stored outbound message.
        message_id: Uuid,
        /// Meta's id of it.
        platform_message_id: String,
        /// `Sent` or `Delivered`.
        status: RecipientStatus,
    },
    /// To be tried again at `at`.
    Retry {
        /// Meta's error code, if any.
        code: Option<i64>,
        /// What failed.
        error: String,
        /// When to try again.
        at: DateTime<Utc>,
    },
    /// Failed or skipped for good.
    Final {
        /// `Failed` or `Skipped`.
        status: RecipientStatus,
        /// Meta's error code, if any.
        code: Option<i64>,
        /// Why.
        error: String,
    },
}

/// Records how a claimed recipient's send ended.
///
/// # Errors
/// The database's.
pub async fn record(
    db: &impl ConnectionTrait,
    id: Uuid,
    outcome: SendOutcome,
    now: DateTime<Utc>,
) -> Result<()> {
    let mut update = flow_recipient::Entity::update_many()
        .col_expr(flow_recipient::Column::UpdatedAt, Expr::value(now))
        .filter(flow_recipient::Column::Id.eq(id));
    update = match outcome {
        SendOutcome::Accepted {
            message_id,
            platform_message_id,
            status,
        } => update
            .col_expr(flow_recipient::Column::Status, Expr::value(status))
            .col_expr(flow_recipient::Column::MessageId, Expr::value(message_id))
            .col_expr(
                flow_recipient::Column::PlatformMessageId,
                Expr::value(platform_message_id),
            )
            // An earlier attempt's transient error does not outlive the success.
            .col_expr(flow_recipient::Column::ErrorCode, Expr::value(None::<i64>))
            .col_expr(flow_recipient::Column::Error, Expr::value(None::<String>))
            .col_expr(
                flow_recipient::Column::NextAttemptAt,
                Expr::value(None::<DateTime<Utc>>),
            ),
        SendOutcome::Retry { code, error, at } => update
            .col_expr(
                flow_recipient::Column::Status,
                Expr::value(RecipientStatus::Pending),
            )
            .col_expr(flow_recipient::Column::ErrorCode, Expr::value(code))
            .col_expr(flow_recipient::Column::Error, Expr::value(error))
            .col_expr(flow_recipient::Column::NextAttemptAt, Expr::value(at)),
        SendOutcome::Final {
            status,
            code,
            error,
        } => {
            // Skipped before any send: its claim was not an attempt at Meta.
            let update = if status == RecipientStatus::Skipped {
                update.col_expr(
                    flow_recipient::Column::Attempts,
                    Expr::col(flow_recipient::Column::Attempts).sub(1),
                )
            } else {
                update
            };
            update
                .col_expr(flow_recipient::Column::Status, Expr::value(status))
                .col_expr(flow_recipient::Column::ErrorCode, Expr::value(code))
                .col_expr(flow_recipient::Column::Error, Expr::value(error))
                .col_expr(
                    flow_recipient::Column::NextAttemptAt,
                    Expr::value(None::<DateTime<Utc>>),
                )
        }
    };
    update.exec(db).await?;
    Ok(())
}

/// The flow's recipients left `sending` by a stop, for its actor to settle when it starts.
///
/// # Errors
/// The database's.
pub async fn left_sending(
    db: &impl ConnectionTrait,
    flow_id: Uuid,
) -> Result<Vec<flow_recipient::Model>> {
    Ok(flow_recipient::Entity::find()
        .filter(flow_recipient::Column::FlowId.eq(flow_id))
        .filter(flow_recipient::Column::Status.eq(RecipientStatus::Sending))
        .all(db)
        .await?)
}

/// A recipient left `sending` whose attempt never handed its message over goes back to
/// `pending`, its claim not counted as an attempt.
///
/// # Errors
/// The database's.
pub async fn release(db: &impl ConnectionTrait, id: Uuid, now: DateTime<Utc>) -> Result<bool> {
    let updated = flow_recipient::Entity::update_many()
        .col_expr(
            flow_recipient::Column::Status,
            Expr::value(RecipientStatus::Pending),
        )
        .col_expr(
            flow_recipient::Column::Attempts,
            Expr::col(flow_recipient::Column::Attempts).sub(1),
        )
        .col_expr(flow_recipient::Column::UpdatedAt, Expr::value(now))
        .filter(flow_recipient::Column::Id.eq(id))
        .filter(flow_recipient::Column::Status.eq(RecipientStatus::Sending))
        .exec(db)
        .await?;
    Ok(updated.rows_affected > 0)
}

/// A recipient left `sending` whose send may have reached Meta is failed `interrupted`, never
/// sent again.
///
/// # Errors
/// The database's.
pub async fn fail_interrupted(
    db: &impl ConnectionTrait,
    id: Uuid,
    now: DateTime<Utc>,
) -> Result<()> {
    flow_recipient::Entity::update_many()
        .col_expr(
            flow_recipient::Column::Status,
            Expr::value(RecipientStatus::Failed),
        )
        .col_expr(
            flow_recipient::Column::Error,
            Expr::value(FailureReason::Interrupted.as_str()),
        )
        .col_expr(flow_recipient::Column::UpdatedAt, Expr::value(now))
        .filter(flow_recipient::Column::Id.eq(id))
        .filter(flow_recipient::Column::Status.eq(RecipientStatus::Sending))
        .exec(db)
        .await?;
    Ok(())
}

/// Moves the recipient whose template Meta knows as `platform_message_id` forward to `status`
/// (never back); answers its flow and identity when one moved.
///
/// # Errors
/// The database's.
pub async fn apply_delivery(
    db: &impl ConnectionTrait,
    platform_message_id: &str,
    status: RecipientStatus,
    error: Option<(Option<i64>, String)>,
    now: DateTime<Utc>,
) -> Result<Option<(Uuid, Uuid)>> {
    let lower: &[RecipientStatus] = match status {
        RecipientStatus::Delivered => &[RecipientStatus::Sent],
        RecipientStatus::Read => &[RecipientStatus::Sent, RecipientStatus::Delivered],
        RecipientStatus::Failed => &[
            RecipientStatus::Sent,
            RecipientStatus::Delivered,
            RecipientStatus::Read,
        ],
        _ => return Ok(None),
    };
    let Some(found) = flow_recipient::Entity::find()
        .filter(flow_recipient::Column::PlatformMessageId.eq(platform_message_id))
        .one(db)
        .await?
    else {
        return Ok(None);
    };
    let mut update = flow_recipient::Entity::update_many()
        .col_expr(flow_recipient::Column::Status, Expr::value(status))
        .col_expr(flow_recipient::Column::UpdatedAt, Expr::value(now))
        .filter(flow_recipient::Column::Id.eq(found.id))
        .filter(flow_recipient::Column::Status.is_in(lower.iter().copied()));
    if let Some((code, message)) = error {
        update = update
            .col_expr(flow_recipient::Column::ErrorCode, Expr::value(code))
            .col_expr(flow_recipient::Column::Error, Expr::value(message));
    }
    let moved = update.exec(db).await?.rows_affected > 0;
    Ok(moved.then_some((found.flow_id, found.identity_id)))
}

/// Recipient counts of a flow.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Statistics {
    /// Recipients.
    pub total: u64,
    /// Not tried yet, waiting for a retry, or being sent.
    pub pending: u64,
    /// Accepted by Meta, no delivery confirmed yet.
    pub sent: u64,
    /// Delivered, not read.
    pub delivered: u64,
    /// Read.
    pub read: u64,
    /// Failed for good.
    pub failed: u64,
    /// Skipped (opted out, missing parameter).
    pub skipped: u64,
    /// Attempts beyond each recipient's first.
    pub retries: u64,
}

#[derive(Debug, FromQueryResult)]
struct StatusCount {
    status: RecipientStatus,
    count: i64,
    attempts: Option<i64>,
    tried: Option<i64>,
}

/// The flow's live counts, from its recipients.
///
/// # Errors
/// The database's.
pub async fn statistics(db: &impl ConnectionTrait, flow_id: Uuid) -> Result<Statistics> {
    let rows = flow_recipient::Entity::find()
        .select_only()
        .column(flow_recipient::Column::Status)
        .column_as(flow_recipient::Column::Id.count(), "count")
        .column_as(Expr::cust("CAST(SUM(attempts) AS BIGINT)"), "attempts")
        .column_as(
            Expr::cust("CAST(SUM(CASE WHEN attempts > 0 THEN 1 ELSE 0 END) AS BIGINT)"),
            "tried",
        )
        .filter(flow_recipient::Column::FlowId.eq(flow_id))
        .group_by(flow_recipient::Column::Status)
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
            RecipientStatus::Sent => stats.sent += count,
            RecipientStatus::Delivered => stats.delivered += count,
            RecipientStatus::Read => stats.read += count,
            RecipientStatus::Failed => stats.failed += count,
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

/// A keyset page of the flow's recipients, in sending order.
///
/// # Errors
/// The database's.
pub async fn recipients(
    db: &impl ConnectionTrait,
    flow_id: Uuid,
    cursor: Option<Cursor>,
    limit: u64,
) -> Result<CursorPage<flow_recipient::Model>> {
    let query = flow_recipient::Entity::find().filter(flow_recipient::Column::FlowId.eq(flow_id));
    fetch_keyset(
        db,
        query,
        flow_recipient::Column::Id,
        |r| r.id,
        false,
        cursor,
        limit,
    )
    .await
}
