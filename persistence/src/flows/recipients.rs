//! A flow's recipients: their progress one row each (claimed `sending` before each send,
//! recorded after), delivery reports moving them forward, and their pages.

use chrono::{DateTime, Utc};
use sea_orm::sea_query::{Expr, ExprTrait};
use sea_orm::{
    ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter, QueryOrder, QuerySelect, QueryTrait,
};
use uuid::Uuid;

use crate::cluster::{Fence, fenced};
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
/// pending any more, or `fence` (the flow's partition lease) no longer holds.
///
/// # Errors
/// The database's.
pub async fn claim(
    db: &impl ConnectionTrait,
    id: Uuid,
    now: DateTime<Utc>,
    fence: Option<&Fence>,
) -> Result<bool> {
    Ok(!claim_all(db, &[id], now, fence).await?.is_empty())
}

/// Claims the recipients `ids` as [`claim`] does, in one statement, and answers those it took
/// (a runner with room for several sends claims them with one write, not one each).
///
/// # Errors
/// The database's.
pub async fn claim_all(
    db: &impl ConnectionTrait,
    ids: &[Uuid],
    now: DateTime<Utc>,
    fence: Option<&Fence>,
) -> Result<Vec<Uuid>> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let update = flow_recipient::Entity::update_many()
        .col_expr(
            flow_recipient::Column::Status,
            Expr::value(RecipientStatus::Sending),
        )
        .col_expr(
            flow_recipient::Column::Attempts,
            Expr::col(flow_recipient::Column::Attempts).add(1),
        )
        .col_expr(flow_recipient::Column::UpdatedAt, Expr::value(now))
        .filter(flow_recipient::Column::Id.is_in(ids.iter().copied()))
        .filter(flow_recipient::Column::Status.eq(RecipientStatus::Pending));
    let mut update = fenced(update, fence).into_query();
    update.returning_col(flow_recipient::Column::Id);
    db.query_all(&update)
        .await?
        .iter()
        .map(|row| Ok(row.try_get::<Uuid>("", "id")?))
        .collect()
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
