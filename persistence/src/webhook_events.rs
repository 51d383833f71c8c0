//! Inbound webhook events: stored (idempotently, by WhatsApp message id) before the webhook
//! answers 200, marked processed once answered; pending ones are dispatched again at start-up.

use chrono::{DateTime, Utc};
use sea_orm::sea_query::OnConflict;
use sea_orm::{
    ColumnTrait, Condition, ConnectionTrait, EntityTrait, QueryFilter, QueryOrder, QuerySelect,
};
use serde_json::Value;
use uuid::Uuid;

use crate::entities::webhook_event;
use crate::values::EventStatus;
use crate::{GroupCommit, Result};

/// Stores the event unless the channel already has one with this message id; answers the new
/// row, or `None` for a re-delivery.
///
/// # Errors
/// Fails on a database error.
pub async fn insert_if_new(
    db: &impl ConnectionTrait,
    workspace_id: i64,
    channel_id: Uuid,
    platform_message_id: &str,
    payload: Value,
    now: DateTime<Utc>,
) -> Result<Option<webhook_event::Model>> {
    let event = webhook_event::Model {
        id: Uuid::now_v7(),
        workspace_id,
        channel_id,
        platform_message_id: platform_message_id.to_owned(),
        payload,
        status: EventStatus::Pending,
        error: None,
        received_at: crate::clock::at_storage_precision(now),
        processed_at: None,
        attempts: 0,
        next_attempt_at: None,
    };
    let inserted = webhook_event::Entity::insert(webhook_event::ActiveModel::from(event.clone()))
        .on_conflict(
            OnConflict::columns([
                webhook_event::Column::ChannelId,
                webhook_event::Column::PlatformMessageId,
            ])
            .do_nothing()
            .to_owned(),
        )
        .exec_without_returning(db)
        .await?;
    // Every column is given, the time at storage precision: the row is what was inserted,
    // without reading it back.
    Ok((inserted > 0).then_some(event))
}

/// As [`insert_if_new`], committed by the database's writer with other writes.
///
/// # Errors
/// Fails on a database error.
pub async fn store(
    writer: &GroupCommit,
    workspace_id: i64,
    channel_id: Uuid,
    platform_message_id: String,
    payload: Value,
    now: DateTime<Utc>,
) -> Result<Option<webhook_event::Model>> {
    writer
        .write(move |db| {
            let (id, payload) = (platform_message_id.clone(), payload.clone());
            Box::pin(
                async move { insert_if_new(db, workspace_id, channel_id, &id, payload, now).await },
            )
        })
        .await
}

/// Events waiting to be answered whose time has come (fresh ones, and failed attempts whose
/// retry time has passed), oldest first; only those of `channels` when given (a cluster node
/// answers the events of the channels it owns).
///
/// # Errors
/// Fails on a database error.
pub async fn due(
    db: &impl ConnectionTrait,
    now: DateTime<Utc>,
    limit: u64,
    channels: Option<&[Uuid]>,
) -> Result<Vec<webhook_event::Model>> {
    let mut query = webhook_event::Entity::find();
    if let Some(channels) = channels {
        query = query.filter(webhook_event::Column::ChannelId.is_in(channels.iter().copied()));
    }
    Ok(query
        .filter(webhook_event::Column::Status.eq(EventStatus::Pending))
        .filter(
            Condition::any()
                .add(webhook_event::Column::NextAttemptAt.is_null())
                .add(webhook_event::Column::NextAttemptAt.lte(now)),
        )
        .order_by_asc(webhook_event::Column::Id)
        .limit(limit)
        .all(db)
        .await?)
}

/// Leaves the event pending after a transient failure, to be tried again at `at`; keeps why.
///
/// # Errors
/// Fails on a database error.
pub async fn retry_later(
    db: &impl ConnectionTrait,
    id: Uuid,
    attempts: i32,
    at: DateTime<Utc>,
    error: String,
) -> Result<()> {
    webhook_event::Entity::update_many()
        .col_expr(webhook_event::Column::Attempts, attempts.into())
        .col_expr(webhook_event::Column::NextAttemptAt, Some(at).into())
        .col_expr(webhook_event::Column::Error, Some(error).into())
        .filter(webhook_event::Column::Id.eq(id))
        .exec(db)
        .await?;
    Ok(())
}

/// Marks the event answered (or failed, with why).
///
/// # Errors
/// Fails on a database error.
pub async fn finish(
    db: &impl ConnectionTrait,
    id: Uuid,
    error: Option<String>,
    now: DateTime<Utc>,
) -> Result<()> {
    let status = if error.is_some() {
        EventStatus::Failed
    } else {
        EventStatus::Processed
    };
    webhook_event::Entity::update_many()
        .col_expr(
            webhook_event::Column::Status,
            sea_orm::sea_query::Expr::value(status),
        )
        .col_expr(webhook_event::Column::Error, error.into())
        .col_expr(webhook_event::Column::ProcessedAt, Some(now).into())
        .filter(webhook_event::Column::Id.eq(id))
        .exec(db)
        .await?;
    Ok(())
}
