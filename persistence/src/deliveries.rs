//! Delivery of outbound messages: replies waiting to be sent, their platform ids, and the
//! statuses Meta reports (monotonic: sent < delivered < read; failed keeps Meta's error).

use chrono::{DateTime, Utc};
use sea_orm::{ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter, QueryOrder, QuerySelect};
use serde_json::Value;
use uuid::Uuid;

use crate::entities::{conversation, message};
use crate::page::fetch_page;
use crate::{Page, Paged, Result};

/// Outbound status before the platform accepted the message.
pub const PENDING: &str = "pending";

/// Rank of a delivery status; a status only ever moves to a higher rank.
pub fn rank(status: &str) -> u8 {
    match status {
        "pending" | "sending" => 0,
        "sent" => 1,
        "delivered" => 2,
        "read" => 3,
        "failed" => 4,
        _ => 0,
    }
}

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
        .filter(message::Column::Role.eq("assistant"))
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
    status: &str,
    platform_message_id: Option<&str>,
    error: Option<Value>,
) -> Result<()> {
    let mut update = message::Entity::update_many()
        .col_expr(message::Column::Status, status.into())
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
/// forward; answers whether it changed anything. Unknown messages are ignored.
///
/// # Errors
/// Fails on a database error.
pub async fn apply_status(
    db: &impl ConnectionTrait,
    channel_id: Uuid,
    platform_message_id: &str,
    status: &str,
    error: Option<Value>,
) -> Result<bool> {
    let Some(found) = find_by_platform_id(db, channel_id, platform_message_id).await? else {
        return Ok(false);
    };
    if rank(status) <= rank(&found.status) {
        return Ok(false);
    }
    let lower: Vec<&str> = ["pending", "sending", "sent", "delivered", "read"]
        .into_iter()
        .filter(|s| rank(s) < rank(status))
        .collect();
    // The condition on the current status makes concurrent reports race safely.
    let result = message::Entity::update_many()
        .col_expr(message::Column::Status, status.into())
        .col_expr(message::Column::Error, error.into())
        .filter(message::Column::Id.eq(found.id))
        .filter(message::Column::Status.is_in(lower))
        .exec(db)
        .await?;
    Ok(result.rows_affected > 0)
}

/// Assistant replies not yet handed to the platform, oldest first.
///
/// # Errors
/// Fails on a database error.
pub async fn pending_replies(db: &impl ConnectionTrait, limit: u64) -> Result<Vec<message::Model>> {
    Ok(message::Entity::find()
        .filter(message::Column::Status.eq(PENDING))
        .filter(message::Column::Direction.eq("outbound"))
        .filter(message::Column::Role.eq("assistant"))
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
    let conversations: Vec<Uuid> = conversation::Entity::find()
        .filter(conversation::Column::IdentityId.eq(identity_id))
        .filter(conversation::Column::ChannelId.eq(channel_id))
        .all(db)
        .await?
        .into_iter()
        .map(|c| c.id)
        .collect();
    if conversations.is_empty() {
        return Ok(None);
    }
    Ok(message::Entity::find()
        .filter(message::Column::ConversationId.is_in(conversations))
        .filter(message::Column::Direction.eq("inbound"))
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
        .filter(message::Column::Direction.eq("outbound"))
        .filter(message::Column::Role.eq("assistant"))
        // What went through the channel: the assistant's tool requests and replies given to
        // API callers never did.
        .filter(message::Column::ToolCalls.is_null())
        .filter(message::Column::PlatformMessageId.is_not_null())
        .order_by_asc(message::Column::Id);
    fetch_page(db, query, page).await
}

/// Outbound status while a send is in flight; found at start-up, it means the process stopped
/// mid-send.
pub const SENDING: &str = "sending";

/// Takes a pending reply for sending: answers it when this caller moved it from `pending` to
/// `sending`, `None` when someone else did (so a reply is sent once).
///
/// # Errors
/// Fails on a database error.
pub async fn claim(db: &impl ConnectionTrait, message_id: Uuid) -> Result<Option<message::Model>> {
    let result = message::Entity::update_many()
        .col_expr(message::Column::Status, SENDING.into())
        .filter(message::Column::Id.eq(message_id))
        .filter(message::Column::Status.eq(PENDING))
        .exec(db)
        .await?;
    if result.rows_affected == 0 {
        return Ok(None);
    }
    Ok(message::Entity::find_by_id(message_id).one(db).await?)
}

/// Marks replies left in flight by a stop as failed (`interrupted`): Meta may have accepted
/// them, so they are not sent again. Answers how many.
///
/// # Errors
/// Fails on a database error.
pub async fn fail_interrupted(db: &impl ConnectionTrait) -> Result<u64> {
    let error = serde_json::json!({"code": null, "message": "interrupted"});
    let result = message::Entity::update_many()
        .col_expr(message::Column::Status, "failed".into())
        .col_expr(message::Column::Error, Some(error).into())
        .filter(message::Column::Status.eq(SENDING))
        .exec(db)
        .await?;
    Ok(result.rows_affected)
}
