//! Inbound webhook events: stored (idempotently, by WhatsApp message id) before the webhook
//! answers 200, marked processed once answered; pending ones are dispatched again at start-up.

use chrono::{DateTime, Utc};
use sea_orm::sea_query::OnConflict;
use sea_orm::{
    ColumnTrait, Condition, ConnectionTrait, DatabaseExecutor, EntityTrait, QueryFilter,
    QueryOrder, QuerySelect,
};
use serde_json::Value;
use uuid::Uuid;

use crate::entities::webhook_event;
use crate::group_commit::inserted_ids;
use crate::values::EventStatus;
use crate::{GroupCommit, Merged, Result, Writes};

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
    let event = NewEvent {
        workspace_id,
        channel_id,
        platform_message_id: platform_message_id.to_owned(),
        payload,
        now,
    };
    Ok(insert_all(db, vec![&event]).await?.pop().flatten())
}

/// An event the webhook received, to be stored unless its channel already has its message id.
#[derive(Clone, Debug)]
pub struct NewEvent {
    /// The channel's workspace.
    pub workspace_id: i64,
    /// The channel it came to.
    pub channel_id: Uuid,
    /// WhatsApp's id of the message (`wamid…`): what makes a re-delivery known.
    pub platform_message_id: String,
    /// What is kept of the message.
    pub payload: Value,
    /// When it was received.
    pub now: DateTime<Utc>,
}

impl NewEvent {
    fn row(&self) -> webhook_event::Model {
        webhook_event::Model {
            id: Uuid::now_v7(),
            workspace_id: self.workspace_id,
            channel_id: self.channel_id,
            platform_message_id: self.platform_message_id.clone(),
            payload: self.payload.clone(),
            status: EventStatus::Pending,
            error: None,
            received_at: crate::clock::at_storage_precision(self.now),
            processed_at: None,
            attempts: 0,
            next_attempt_at: None,
        }
    }
}

impl Merged for NewEvent {
    type Answer = Option<webhook_event::Model>;

    fn one_statement(_pieces: &[&Self]) -> bool {
        true
    }

    fn run_all<'e>(
        db: &'e DatabaseExecutor<'e>,
        pieces: Vec<&'e Self>,
    ) -> Writes<'e, Vec<Self::Answer>> {
        Box::pin(insert_all(db, pieces))
    }
}

/// Stores the events in one statement; answers each new row, `None` for a re-delivery (one
/// its channel has, or an earlier one of `events` has).
async fn insert_all(
    db: &impl ConnectionTrait,
    events: Vec<&NewEvent>,
) -> Result<Vec<Option<webhook_event::Model>>> {
    let rows: Vec<_> = events.iter().map(|event| event.row()).collect();
    let insert = webhook_event::Entity::insert_many(
        rows.iter().cloned().map(webhook_event::ActiveModel::from),
    )
    .on_conflict(
        OnConflict::columns([
            webhook_event::Column::ChannelId,
            webhook_event::Column::PlatformMessageId,
        ])
        .do_nothing()
        .to_owned(),
    );
    let inserted = inserted_ids(db, insert).await?;
    // Every column is given, the time at storage precision: a row is what was inserted,
    // without reading it back.
    Ok(rows
        .into_iter()
        .map(|row| inserted.contains(&row.id).then_some(row))
        .collect())
}

/// As [`insert_if_new`], committed by the database's writer with other writes (in one
/// statement with the other events waiting to be stored).
///
/// # Errors
/// Fails on a database error.
pub async fn store(writer: &GroupCommit, event: NewEvent) -> Result<Option<webhook_event::Model>> {
    writer.write_merged(event).await
}

/// The outcome of an event answered (its reply sent, or held for a person), to be recorded
/// by the writer with the others waiting: one statement marks them all processed.
#[derive(Clone, Copy, Debug)]
pub struct Answered {
    /// The event.
    pub id: Uuid,
    /// When its processing ended.
    pub now: DateTime<Utc>,
}

impl Merged for Answered {
    type Answer = ();

    fn one_statement(_pieces: &[&Self]) -> bool {
        true
    }

    fn run_all<'e>(
        db: &'e DatabaseExecutor<'e>,
        pieces: Vec<&'e Self>,
    ) -> Writes<'e, Vec<Self::Answer>> {
        Box::pin(async move {
            // One time for all: the latest, which is at most the commit's.
            let now = pieces
                .iter()
                .map(|piece| piece.now)
                .max()
                .unwrap_or_else(Utc::now);
            finish_all(db, pieces.iter().map(|piece| piece.id), None, now).await?;
            Ok(vec![(); pieces.len()])
        })
    }
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
    let mut query = due_at(now);
    if let Some(channels) = channels {
        query = query.filter(webhook_event::Column::ChannelId.is_in(channels.iter().copied()));
    }
    Ok(query.limit(limit).all(db).await?)
}

/// Those of `ids` that are due as [`due`] reads them, oldest first.
///
/// # Errors
/// Fails on a database error.
pub async fn due_among(
    db: &impl ConnectionTrait,
    now: DateTime<Utc>,
    ids: &[Uuid],
) -> Result<Vec<webhook_event::Model>> {
    Ok(due_at(now)
        .filter(webhook_event::Column::Id.is_in(ids.iter().copied()))
        .all(db)
        .await?)
}

/// Pending events whose time has come at `now`, oldest first.
fn due_at(now: DateTime<Utc>) -> sea_orm::Select<webhook_event::Entity> {
    webhook_event::Entity::find()
        .filter(webhook_event::Column::Status.eq(EventStatus::Pending))
        .filter(
            Condition::any()
                .add(webhook_event::Column::NextAttemptAt.is_null())
                .add(webhook_event::Column::NextAttemptAt.lte(now)),
        )
        .order_by_asc(webhook_event::Column::Id)
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
    finish_all(db, [id], error, now).await
}

/// Marks the events `ids` answered (or failed, with why) in one statement.
async fn finish_all(
    db: &impl ConnectionTrait,
    ids: impl IntoIterator<Item = Uuid>,
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
        .filter(webhook_event::Column::Id.is_in(ids))
        .exec(db)
        .await?;
    Ok(())
}
