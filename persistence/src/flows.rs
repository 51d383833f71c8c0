//! Flows and their recipients. A recipient's row is its progress: claimed (`sending`) before
//! each send, so a flow restarted after a crash continues where it stopped and never sends a
//! recipient twice.

use chrono::{DateTime, Utc};
use sea_orm::sea_query::{Expr, Func};
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, EntityTrait, PaginatorTrait, QueryFilter,
    QueryOrder, Set,
};
use serde_json::Value;
use uuid::Uuid;

mod merged;
mod recipients;
mod statistics;

pub use self::merged::{Claimed, Reached, Recorded};
pub use self::recipients::*;
pub use self::statistics::*;
use crate::entities::{flow, flow_recipient};
use crate::page::fetch_keyset;
use crate::values::{FlowStatus, RecipientStatus};
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
        // A running flow has no reason to show (a pause's is gone with it).
        update = update.col_expr(flow::Column::Reason, Expr::value(Option::<String>::None));
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

/// Pauses a running flow with `reason` (a quota it reached); `false` when it was not running.
///
/// # Errors
/// The database's.
pub async fn pause_with(
    db: &impl ConnectionTrait,
    id: Uuid,
    reason: String,
    now: DateTime<Utc>,
) -> Result<bool> {
    let updated = flow::Entity::update_many()
        .col_expr(flow::Column::Status, Expr::value(FlowStatus::Paused))
        .col_expr(flow::Column::Reason, Expr::value(Some(reason)))
        .col_expr(flow::Column::UpdatedAt, Expr::value(now))
        .filter(flow::Column::Id.eq(id))
        .filter(flow::Column::Status.eq(FlowStatus::Running))
        .exec(db)
        .await?;
    Ok(updated.rows_affected > 0)
}

/// The flows of `workspace_id` paused with a reason that starts with `prefix`.
///
/// # Errors
/// The database's.
pub async fn paused_for(
    db: &impl ConnectionTrait,
    workspace_id: i64,
    prefix: &str,
) -> Result<Vec<flow::Model>> {
    Ok(flow::Entity::find()
        .filter(flow::Column::WorkspaceId.eq(workspace_id))
        .filter(flow::Column::Status.eq(FlowStatus::Paused))
        .filter(flow::Column::Reason.starts_with(prefix))
        .all(db)
        .await?)
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
