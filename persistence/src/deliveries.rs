//! Delivery of outbound messages: replies waiting to be sent, their platform ids, and the
//! statuses Meta reports (monotonic: sent < delivered < read; failed keeps Meta's error).

use std::collections::HashSet;

use chrono::{DateTime, Utc};
use sea_orm::sea_query::Expr;
use sea_orm::{
    ColumnTrait, ConnectionTrait, DatabaseExecutor, EntityTrait, QueryFilter, QueryOrder,
    QuerySelect, QueryTrait,
};
use serde_json::Value;
use uuid::Uuid;

mod accepted;
mod reported;

pub use self::accepted::Accepted;
pub use self::reported::Reported;
use crate::cluster::{Fence, fenced};
use crate::entities::{conversation, message};
use crate::page::fetch_page;
use crate::values::{Direction, FailureReason, MessageStatus, Role};
use crate::{Merged, Page, Paged, Result, Writes};

/// The message the channel stored with this platform id.
///
/// # Errors
/// Fails on a database error.
pub async fn find_by_platform_id(
    db: &impl ConnectionTrait,
    channel_id: Uuid,
    platform_message_id: &str,
) -> Result<Option<message::Model>> {
    Ok(message::Entity::find()
        .filter(message::Column::ChannelId.eq(channel_id))
        .filter(message::Column::PlatformMessageId.eq(platform_message_id))
        .one(db)
        .await?)
}

/// The reply to `message_id`, if one was stored.
///
/// # Errors
/// Fails on a database error.
pub async fn reply_to(
    db: &impl ConnectionTrait,
    message_id: Uuid,
) -> Result<Option<message::Model>> {
    Ok(message::Entity::find()
        .filter(message::Column::ReplyToMessageId.eq(message_id))
        .filter(message::Column::Role.eq(Role::Assistant))
        .order_by_desc(message::Column::Id)
        .one(db)
        .await?)
}

/// Records the platform's answer to a send: accepted (`sent` with its id, or `delivered` for a
/// sandbox) or `failed` with the error.
///
/// # Errors
/// Fails on a database error.
pub async fn record_send(
    db: &impl ConnectionTrait,
    message_id: Uuid,
    status: MessageStatus,
    platform_message_id: Option<&str>,
    error: Option<Value>,
) -> Result<()> {
    let mut update = message::Entity::update_many()
        .col_expr(message::Column::Status, Expr::value(status))
        .col_expr(message::Column::Error, error.into())
        .filter(message::Column::Id.eq(message_id));
    if let Some(id) = platform_message_id {
        update = update.col_expr(
            message::Column::PlatformMessageId,
            Some(id.to_owned()).into(),
        );
    }
    update.exec(db).await?;
    Ok(())
}

/// Applies a status Meta reported for `platform_message_id`, only if it moves the message
/// forward; answers whether it changed anything, or `None` when no message of the channel has
/// that id (yet: Meta's report can arrive before the send's answer is recorded).
///
/// # Errors
/// Fails on a database error.
pub async fn apply_status(
    db: &impl ConnectionTrait,
    channel_id: Uuid,
    platform_message_id: &str,
    status: MessageStatus,
    error: Option<Value>,
) -> Result<Option<bool>> {
    let Some(found) = find_by_platform_id(db, channel_id, platform_message_id).await? else {
        return Ok(None);
    };
    if status.rank() <= found.status.rank() {
        return Ok(Some(false));
    }
    let lower = status.lower();
    // The condition on the current status makes concurrent reports race safely.
    let result = message::Entity::update_many()
        .col_expr(message::Column::Status, Expr::value(status))
        .col_expr(message::Column::Error, error.into())
        .filter(message::Column::Id.eq(found.id))
        .filter(message::Column::Status.is_in(lower))
        .exec(db)
        .await?;
    Ok(Some(result.rows_affected > 0))
}

/// The identity a message of the channel with this platform id was sent to (its
/// conversation's), if there is such a message.
///
/// # Errors
/// Fails on a database error.
pub async fn recipient_of(
    db: &impl ConnectionTrait,
    channel_id: Uuid,
    platform_message_id: &str,
) -> Result<Option<Uuid>> {
    let Some(found) = find_by_platform_id(db, channel_id, platform_message_id).await? else {
        return Ok(None);
    };
    Ok(conversation::Entity::find_by_id(found.conversation_id)
        .one(db)
        .await?
        .map(|c| c.identity_id))
}

/// Deletes a stored message that nobody sent yet (`pending`): a flow's attempt caught by a stop
/// before its channel claimed it sends again instead. `false` when it is not pending any more
/// (a sender claimed it meanwhile).
///
/// # Errors
/// Fails on a database error.
pub async fn delete_if_pending(db: &impl ConnectionTrait, message_id: Uuid) -> Result<bool> {
    let deleted = message::Entity::delete_many()
        .filter(message::Column::Id.eq(message_id))
        .filter(message::Column::Status.eq(MessageStatus::Pending))
        .exec(db)
        .await?;
    Ok(deleted.rows_affected > 0)
}

/// Outbound messages stored before `stored_before` but not yet handed to the platform, oldest
/// first, after `after` (a cursor over ids, so that a caller can walk any number of them).
///
/// # Errors
/// Fails on a database error.
pub async fn pending_outbound(
    db: &impl ConnectionTrait,
    stored_before: DateTime<Utc>,
    after: Option<Uuid>,
    limit: u64,
    channels: Option<&[Uuid]>,
) -> Result<Vec<message::Model>> {
    let mut query = message::Entity::find()
        .filter(message::at_indexed_status(MessageStatus::Pending))
        .filter(message::Column::Direction.eq(Direction::Outbound))
        .filter(message::Column::CreatedAt.lt(stored_before));
    if let Some(channels) = channels {
        query = query.filter(message::Column::ChannelId.is_in(channels.iter().copied()));
    }
    if let Some(after) = after {
        query = query.filter(message::Column::Id.gt(after));
    }
    Ok(query
        .order_by_asc(message::Column::Id)
        .limit(limit)
        .all(db)
        .await?)
}

/// When the identity last wrote on the channel (opens WhatsApp's 24-hour window).
///
/// # Errors
/// Fails on a database error.
pub async fn last_inbound_at(
    db: &impl ConnectionTrait,
    identity_id: Uuid,
    channel_id: Uuid,
) -> Result<Option<DateTime<Utc>>> {
    let conversations = sea_orm::sea_query::Query::select()
        .column(conversation::Column::Id)
        .from(conversation::Entity)
        .and_where(conversation::Column::IdentityId.eq(identity_id))
        .and_where(conversation::Column::ChannelId.eq(channel_id))
        .to_owned();
    Ok(message::Entity::find()
        .filter(message::Column::ChannelId.eq(channel_id))
        .filter(message::Column::ConversationId.in_subquery(conversations))
        .filter(message::Column::Direction.eq(Direction::Inbound))
        .order_by_desc(message::Column::CreatedAt)
        .one(db)
        .await?
        .map(|m| m.created_at))
}

/// The channel's outbound messages, oldest first (the sandbox outbox).
///
/// # Errors
/// Fails on a database error.
pub async fn outbound_of_channel(
    db: &impl ConnectionTrait,
    channel_id: Uuid,
    page: Page,
) -> Result<Paged<message::Model>> {
    let query = message::Entity::find()
        .filter(message::Column::ChannelId.eq(channel_id))
        .filter(message::Column::Direction.eq(Direction::Outbound))
        // Whoever wrote it (the assistant, a template, an operator): what went through the
        // channel; the assistant's tool requests and replies given to API callers never did.
        .filter(message::Column::Role.is_in([Role::Assistant, Role::Operator]))
        .filter(message::Column::ToolCalls.is_null())
        .filter(message::Column::PlatformMessageId.is_not_null())
        .order_by_asc(message::Column::Id);
    fetch_page(db, query, page).await
}

/// Takes a pending outbound message for one HTTP attempt: answers `true` when this caller
/// moved it from `pending` to `sending`, `false` when it was not pending (someone else has it,
/// or it was sent, or `fence` no longer holds), so a message is attempted by one sender at a
/// time, and only by the node holding its channel's partition.
///
/// # Errors
/// Fails on a database error.
pub async fn claim(
    db: &impl ConnectionTrait,
    message_id: Uuid,
    fence: Option<&Fence>,
) -> Result<bool> {
    let claim = Claim {
        message_id,
        fence: fence.copied(),
    };
    Ok(claim_all(db, vec![&claim]).await?.pop().unwrap_or(false))
}

/// A claim of a pending outbound message (see [`claim`]) for the writer, which runs the claims
/// waiting in one batch together: one statement for all those under the same fence.
#[derive(Clone, Copy, Debug)]
pub struct Claim {
    /// The message.
    pub message_id: Uuid,
    /// The lease its node acts under, on a cluster.
    pub fence: Option<Fence>,
}

impl Merged for Claim {
    /// Whether this caller took the message.
    type Answer = bool;

    fn one_statement(pieces: &[&Self]) -> bool {
        pieces.windows(2).all(|pair| pair[0].fence == pair[1].fence)
    }

    fn run_all<'e>(
        db: &'e DatabaseExecutor<'e>,
        pieces: Vec<&'e Self>,
    ) -> Writes<'e, Vec<Self::Answer>> {
        Box::pin(claim_all(db, pieces))
    }
}

/// Runs `claims`: one statement per fence among them; answers whether each took its message
/// (a message claimed twice goes to the first).
async fn claim_all(db: &impl ConnectionTrait, claims: Vec<&Claim>) -> Result<Vec<bool>> {
    let mut taken = HashSet::new();
    let mut fences = HashSet::new();
    for fence in claims.iter().map(|claim| claim.fence) {
        if !fences.insert(fence) {
            continue;
        }
        let ids = claims
            .iter()
            .filter(|claim| claim.fence == fence)
            .map(|claim| claim.message_id);
        let update = message::Entity::update_many()
            .col_expr(message::Column::Status, Expr::value(MessageStatus::Sending))
            .filter(message::Column::Id.is_in(ids))
            .filter(message::Column::Status.eq(MessageStatus::Pending));
        let mut update = fenced(update, fence.as_ref()).into_query();
        update.returning_col(message::Column::Id);
        for row in db.query_all(&update).await? {
            taken.insert(row.try_get::<Uuid>("", "id")?);
        }
    }
    Ok(claims
        .iter()
        .map(|claim| taken.remove(&claim.message_id))
        .collect())
}

/// Gives a claimed message back (`sending` to `pending`) while its sender waits to retry, so
/// that a stop during the wait sends it again at start-up instead of losing it.
///
/// # Errors
/// Fails on a database error.
pub async fn release(db: &impl ConnectionTrait, message_id: Uuid) -> Result<()> {
    message::Entity::update_many()
        .col_expr(message::Column::Status, Expr::value(MessageStatus::Pending))
        .filter(message::Column::Id.eq(message_id))
        .filter(message::Column::Status.eq(MessageStatus::Sending))
        .exec(db)
        .await?;
    Ok(())
}

/// Marks replies left in flight by a stop (of `channels`, or of all) as failed
/// (`interrupted`): Meta may have accepted them, so they are not sent again. Answers them as they were (run it in a transaction to
/// answer exactly those it marked).
///
/// # Errors
/// Fails on a database error.
pub async fn fail_interrupted(
    db: &impl ConnectionTrait,
    channels: Option<&[Uuid]>,
) -> Result<Vec<message::Model>> {
    let mut query =
        message::Entity::find().filter(message::at_indexed_status(MessageStatus::Sending));
    if let Some(channels) = channels {
        query = query.filter(message::Column::ChannelId.is_in(channels.iter().copied()));
    }
    let caught = query.all(db).await?;
    if caught.is_empty() {
        return Ok(caught);
    }
    let error = interrupted_error();
    message::Entity::update_many()
        .col_expr(message::Column::Status, Expr::value(MessageStatus::Failed))
        .col_expr(message::Column::Error, Some(error).into())
        .filter(message::Column::Id.is_in(caught.iter().map(|m| m.id)))
        .filter(message::Column::Status.eq(MessageStatus::Sending))
        .exec(db)
        .await?;
    Ok(caught)
}

/// The error a message caught mid-send is failed with.
pub fn interrupted_error() -> serde_json::Value {
    serde_json::json!({"code": null, "message": FailureReason::Interrupted.as_str()})
}
