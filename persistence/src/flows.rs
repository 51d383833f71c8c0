//! Flows and their recipients. A recipient's row is its progress: claimed (`sending`) before
//! each send, so a flow restarted after a crash continues where it stopped and never sends a
//! recipient twice.

use chrono::{DateTime, Utc};
use sea_orm::sea_query::{Expr, ExprTrait, Func};
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, EntityTrait, FromQueryResult, PaginatorTrait,
    QueryFilter, QueryOrder, QuerySelect, Set,
};
use serde_json::Value;
use uuid::Uuid;

use crate::entities::{flow, flow_recipient};
use crate::page::fetch_keyset;
use crate::values::{FailureReason, FlowStatus, RecipientStatus};
use crate::{Cursor, CursorPage, Result};

/// Recipients inserted per statement (well under SQLite's bound on parameters).
const INSERT_CHUNK: usize = 1_000;

/// A new flow.
#[derive(Clone, Debug)]
pub struct NewFlow {
    /// Owning workspace.
    pub workspace_id: i64,
    /// The campaign it sends.
    pub campaign_id: Uuid,
    /// The channel it sends from.
    pub channel_id: Uuid,
    /// Free text.
    pub description: Option<String>,
    /// `queued` or `draft`.
    pub status: FlowStatus,
    /// Configuration with defaults filled in.
    pub configuration: Value,
}

/// One recipient of a new flow: the identity and the contact as given.
#[derive(Clone, Debug)]
pub struct NewRecipient {
    /// The identity reached.
    pub identity_id: Uuid,
    /// `contactUid` as the creator wrote it.
    pub contact: String,
}

/// Stores a flow and its recipients (call inside a transaction).
///
/// # Errors
/// The database's.
pub async fn create(
    db: &impl ConnectionTrait,
    new: NewFlow,
    recipients: Vec<NewRecipient>,
    now: DateTime<Utc>,
) -> Result<flow::Model> {
    let created = flow::ActiveModel {
        id: Set(Uuid::now_v7()),
        workspace_id: Set(new.workspace_id),
        campaign_id: Set(new.campaign_id),
        channel_id: Set(new.channel_id),
        description: Set(new.description),
        status: Set(new.status),
        configuration: Set(new.configuration),
        total: Set(i64::try_from(recipients.len()).unwrap_or(i64::MAX)),
        reason: Set(None),
        started_at: Set(None),
        sends_done_at: Set(None),
        finished_at: Set(None),
        created_at: Set(now),
        updated_at: Set(now),
    }
    .insert(db)
    .await?;
    let mut position = 0i64;
    for chunk in recipients.chunks(INSERT_CHUNK) {
        let rows = chunk.iter().map(|r| {
            position += 1;
            flow_recipient::ActiveModel {
                id: Set(Uuid::now_v7()),
                flow_id: Set(created.id),
                position: Set(position),
                identity_id: Set(r.identity_id),
                contact: Set(r.contact.clone()),
                status: Set(RecipientStatus::Pending),
                attempts: Set(0),
                message_id: Set(None),
                platform_message_id: Set(None),
                error_code: Set(None),
                error: Set(None),
                next_attempt_at: Set(None),
                updated_at: Set(now),
            }
        });
        flow_recipient::Entity::insert_many(rows).exec(db).await?;
    }
    Ok(created)
}

/// The flow `id` of the workspace.
///
/// # Errors
/// The database's.
pub async fn find(
    db: &impl ConnectionTrait,
    workspace_id: i64,
    id: Uuid,
) -> Result<Option<flow::Model>> {
    Ok(flow::Entity::find_by_id(id)
        .filter(flow::Column::WorkspaceId.eq(workspace_id))
        .one(db)
        .await?)
}

/// The flow `id`, whatever its workspace (for its actor).
///
/// # Errors
/// The database's.
pub async fn find_in_any_workspace(
    db: &impl ConnectionTrait,
    id: Uuid,
) -> Result<Option<flow::Model>> {
    Ok(flow::Entity::find_by_id(id).one(db).await?)
}

/// What a flow list keeps.
#[derive(Clone, Debug, Default)]
pub struct FlowFilter {
    /// Only this campaign's.
    pub campaign_id: Option<Uuid>,
    /// Only this channel's.
    pub channel_id: Option<Uuid>,
    /// Only flows reaching this identity.
    pub identity_id: Option<Uuid>,
    /// Only this status.
    pub status: Option<FlowStatus>,
}

/// A keyset page of the workspace's flows, newest first.
///
/// # Errors
/// The database's.
pub async fn list(
    db: &impl ConnectionTrait,
    workspace_id: i64,
    filter: FlowFilter,
    cursor: Option<Cursor>,
    limit: u64,
) -> Result<CursorPage<flow::Model>> {
    let mut query = flow::Entity::find().filter(flow::Column::WorkspaceId.eq(workspace_id));
    if let Some(campaign_id) = filter.campaign_id {
        query = query.filter(flow::Column::CampaignId.eq(campaign_id));
    }
    if let Some(channel_id) = filter.channel_id {
        query = query.filter(flow::Column::ChannelId.eq(channel_id));
    }
    if let Some(status) = filter.status {
        query = query.filter(flow::Column::Status.eq(status));
    }
    if let Some(identity_id) = filter.identity_id {
        query = query.filter(
            flow::Column::Id.in_subquery(
                sea_orm::sea_query::Query::select()
                    .column(flow_recipient::Column::FlowId)
                    .from(flow_recipient::Entity)
                    .and_where(flow_recipient::Column::IdentityId.eq(identity_id))
                    .to_owned(),
            ),
        );
    }
    fetch_keyset(db, query, flow::Column::Id, |f| f.id, true, cursor, limit).await
}

/// Every flow a FlowActor should own (queued, running, paused), oldest first.
///
/// # Errors
/// The database's.
pub async fn live(db: &impl ConnectionTrait) -> Result<Vec<flow::Model>> {
    Ok(flow::Entity::find()
        .filter(flow::Column::Status.is_in([
            FlowStatus::Queued,
            FlowStatus::Running,
            FlowStatus::Paused,
        ]))
        .order_by_asc(flow::Column::Id)
        .all(db)
        .await?)
}

/// Moves the flow to `to` if it is in one of `from`; `false` when it was not (another move won).
///
/// # Errors
/// The database's.
pub async fn transition(
    db: &impl ConnectionTrait,
    id: Uuid,
    from: &[FlowStatus],
    to: FlowStatus,
    now: DateTime<Utc>,
) -> Result<bool> {
    let mut update = flow::Entity::update_many()
        .col_expr(flow::Column::Status, Expr::value(to))
        .col_expr(flow::Column::UpdatedAt, Expr::value(now))
        .filter(flow::Column::Id.eq(id))
        .filter(flow::Column::Status.is_in(from.iter().copied()));
    if to == FlowStatus::Running {
        // The first start is remembered; a resume keeps it.
        update = update.col_expr(
            flow::Column::StartedAt,
            Expr::from(Func::coalesce([
                Expr::col(flow::Column::StartedAt),
                Expr::value(now),
            ])),
        );
    }
    if !to.is_live() && to != FlowStatus::Draft {
        update = update.col_expr(flow::Column::FinishedAt, Expr::value(now));
    }
    Ok(update.exec(db).await?.rows_affected > 0)
}

/// Ends a running flow in `to` with `reason`; `false` when it was not running (paused or
/// cancelled meanwhile).
///
/// # Errors
/// The database's.
pub async fn finish(
    db: &impl ConnectionTrait,
    id: Uuid,
    to: FlowStatus,
    reason: Option<String>,
    now: DateTime<Utc>,
) -> Result<bool> {
    let updated = flow::Entity::update_many()
        .col_expr(flow::Column::Status, Expr::value(to))
        .col_expr(flow::Column::Reason, Expr::value(reason))
        .col_expr(flow::Column::FinishedAt, Expr::value(now))
        .col_expr(flow::Column::UpdatedAt, Expr::value(now))
        .filter(flow::Column::Id.eq(id))
        .filter(flow::Column::Status.eq(FlowStatus::Running))
        .exec(db)
        .await?;
    Ok(updated.rows_affected > 0)
}

/// Remembers when every recipient had been tried (the delivery timeout counts from then).
///
/// # Errors
/// The database's.
pub async fn mark_sends_done(
    db: &impl ConnectionTrait,
    id: Uuid,
    now: DateTime<Utc>,
) -> Result<DateTime<Utc>> {
    flow::Entity::update_many()
        .col_expr(
            flow::Column::SendsDoneAt,
            Expr::from(Func::coalesce([
                Expr::col(flow::Column::SendsDoneAt),
                Expr::value(now),
            ])),
        )
        .filter(flow::Column::Id.eq(id))
        .exec(db)
        .await?;
    Ok(find_in_any_workspace(db, id)
        .await?
        .and_then(|f| f.sends_done_at)
        .unwrap_or(now))
}

/// Changes the description.
///
/// # Errors
/// The database's.
pub async fn describe(
    db: &impl ConnectionTrait,
    current: flow::Model,
    description: Option<String>,
    now: DateTime<Utc>,
) -> Result<flow::Model> {
    let mut active: flow::ActiveModel = current.into();
    active.description = Set(description);
    active.updated_at = Set(now);
    Ok(active.update(db).await?)
}

/// Deletes a flow and its recipients.
///
/// # Errors
/// The database's.
pub async fn delete(db: &impl ConnectionTrait, id: Uuid) -> Result<()> {
    flow_recipient::Entity::delete_many()
        .filter(flow_recipient::Column::FlowId.eq(id))
        .exec(db)
        .await?;
    flow::Entity::delete_by_id(id).exec(db).await?;
    Ok(())
}

/// Whether a flow on the channel is queued, running or paused.
///
/// # Errors
/// The database's.
pub async fn channel_busy(db: &impl ConnectionTrait, channel_id: Uuid) -> Result<bool> {
    Ok(flow::Entity::find()
        .filter(flow::Column::ChannelId.eq(channel_id))
        .filter(flow::Column::Status.is_in([
            FlowStatus::Queued,
            FlowStatus::Running,
            FlowStatus::Paused,
        ]))
        .count(db)
        .await?
        > 0)
}

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
        } => update
            .col_expr(flow_recipient::Column::Status, Expr::value(status))
            .col_expr(flow_recipient::Column::ErrorCode, Expr::value(code))
            .col_expr(flow_recipient::Column::Error, Expr::value(error))
            .col_expr(
                flow_recipient::Column::NextAttemptAt,
                Expr::value(None::<DateTime<Utc>>),
            ),
    };
    update.exec(db).await?;
    Ok(())
}

/// When a flow's actor starts: its recipients left `sending` (their send may or may not have
/// reached Meta) are failed `interrupted`, never sent again. Answers how many.
///
/// # Errors
/// The database's.
pub async fn fail_interrupted(
    db: &impl ConnectionTrait,
    flow_id: Uuid,
    now: DateTime<Utc>,
) -> Result<u64> {
    let updated = flow_recipient::Entity::update_many()
        .col_expr(
            flow_recipient::Column::Status,
            Expr::value(RecipientStatus::Failed),
        )
        .col_expr(
            flow_recipient::Column::Error,
            Expr::value(FailureReason::Interrupted.as_str()),
        )
        .col_expr(flow_recipient::Column::UpdatedAt, Expr::value(now))
        .filter(flow_recipient::Column::FlowId.eq(flow_id))
        .filter(flow_recipient::Column::Status.eq(RecipientStatus::Sending))
        .exec(db)
        .await?;
    Ok(updated.rows_affected)
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
