//! Appending messages to a conversation: one alone, one through the database's writer, or a
//! few that must be stored together.

use chrono::{DateTime, Utc};
use sea_orm::{ActiveModelTrait, ConnectionTrait, Set};
use uuid::Uuid;

use super::NewMessage;
use crate::entities::{conversation, message};
use crate::{GroupCommit, Result};

/// As [`append_message`], committed by the database's writer with other writes.
///
/// # Errors
/// As [`append_message`].
pub async fn store_message(
    writer: &GroupCommit,
    conversation: &conversation::Model,
    new: NewMessage,
    now: DateTime<Utc>,
) -> Result<message::Model> {
    let conversation = conversation.clone();
    writer
        .write(move |db| {
            let (conversation, new) = (conversation.clone(), new.clone());
            Box::pin(async move { append_message(db, &conversation, new, now).await })
        })
        .await
}

/// Appends `messages` (each with the time it happened) to `conversation` in one transaction,
/// committed by the database's writer with other writes: a tool round's request and its
/// results, which the history must hold together or not at all.
///
/// # Errors
/// As [`append_message`]; nothing is stored then.
pub async fn store_messages(
    writer: &GroupCommit,
    conversation: &conversation::Model,
    messages: Vec<(NewMessage, DateTime<Utc>)>,
) -> Result<Vec<message::Model>> {
    let conversation = conversation.clone();
    writer
        .write_atomic(move |db| {
            let (conversation, messages) = (conversation.clone(), messages.clone());
            Box::pin(async move {
                let mut stored = Vec::with_capacity(messages.len());
                for (new, at) in messages {
                    stored.push(append_message(db, &conversation, new, at).await?);
                }
                Ok(stored)
            })
        })
        .await
}

/// Appends a message to `conversation`. Its `last_message_at` moves to `now` in the same
/// statement: the database's trigger `messages_touch_conversation` keeps it (one round trip,
/// and one commit, per stored message).
///
/// # Errors
/// [`crate::PersistenceError::Conflict`] when the platform message id was already stored for
/// the channel (a re-delivered webhook).
pub async fn append_message(
    db: &impl ConnectionTrait,
    conversation: &conversation::Model,
    new: NewMessage,
    now: DateTime<Utc>,
) -> Result<message::Model> {
    let stored = message::ActiveModel {
        id: Set(new.id.unwrap_or_else(Uuid::now_v7)),
        workspace_id: Set(conversation.workspace_id),
        conversation_id: Set(conversation.id),
        channel_id: Set(conversation.channel_id),
        direction: Set(new.direction),
        role: Set(new.role),
        content: Set(new.content),
        status: Set(new.status),
        platform_message_id: Set(new.platform_message_id),
        error: Set(new.error),
        usage: Set(new.usage),
        tool_calls: Set(new.tool_calls),
        tool_call_id: Set(new.tool_call_id),
        created_at: Set(now),
        reply_to_message_id: Set(new.reply_to_message_id),
        outbound: Set(new.outbound),
        metadata: Set(new.metadata),
    }
    .insert(db)
    .await?;
    Ok(stored)
}
