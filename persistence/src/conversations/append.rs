//! Appending messages to a conversation: one alone, one through the database's writer, or a
//! few that must be stored together.

use chrono::{DateTime, Utc};
use sea_orm::{ConnectionTrait, DatabaseExecutor, EntityTrait};
use serde_json::Value;
use uuid::Uuid;

use super::NewMessage;
use crate::entities::{conversation, message};
use crate::event_deliveries::{Addressed, insert_all};
use crate::usage::{self, Count, Metric};
use crate::values::{Direction, Role};
use crate::{GroupCommit, Merged, Result, Writes};

/// As [`append_message`], committed by the database's writer with other writes (in one
/// statement with the other messages waiting to be stored), and `told`, its events for the
/// endpoints that take them, committed with it.
///
/// # Errors
/// As [`append_message`].
pub async fn store_message(
    writer: &GroupCommit,
    conversation: &conversation::Model,
    new: NewMessage,
    now: DateTime<Utc>,
    told: Vec<Addressed>,
) -> Result<message::Model> {
    if !new.attachments.is_empty() {
        // The message and its files are stored together or not at all: a transaction of
        // its own, not a piece of a merged statement.
        let conversation = conversation.clone();
        return writer
            .write_atomic(move |db| {
                let (conversation, new, told) = (conversation.clone(), new.clone(), told.clone());
                Box::pin(async move {
                    let stored = append_message(db, &conversation, new, now).await?;
                    insert_all(db, &told, now).await?;
                    Ok(stored)
                })
            })
            .await;
    }
    let appended = Appended {
        conversation: conversation.clone(),
        new,
        now,
        told,
    };
    writer.write_merged(appended).await
}

/// A message for the writer to append (see [`store_message`]).
struct Appended {
    conversation: conversation::Model,
    new: NewMessage,
    now: DateTime<Utc>,
    told: Vec<Addressed>,
}

impl Merged for Appended {
    type Answer = message::Model;

    /// With events, the message and their deliveries commit together.
    fn atomic(&self) -> bool {
        !self.told.is_empty()
    }

    /// One `INSERT` (the trigger that moves the conversation's `last_message_at` is part of
    /// it), unless a message counts usage: its count is written in the same transaction.
    fn one_statement(pieces: &[&Self]) -> bool {
        !usage::metering() || !pieces.iter().any(|piece| counts(&piece.new))
    }

    fn run_all<'e>(
        db: &'e DatabaseExecutor<'e>,
        pieces: Vec<&'e Self>,
    ) -> Writes<'e, Vec<Self::Answer>> {
        let rows = pieces
            .iter()
            .map(|piece| {
                let row = row(&piece.conversation, piece.new.clone(), piece.now);
                (piece.conversation.assistant_id, row)
            })
            .collect();
        Box::pin(async move {
            let stored = insert_rows(db, rows).await?;
            for piece in &pieces {
                insert_all(db, &piece.told, piece.now).await?;
            }
            Ok(stored)
        })
    }
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
    mut new: NewMessage,
    now: DateTime<Utc>,
) -> Result<message::Model> {
    let files = std::mem::take(&mut new.attachments);
    let row = row(conversation, new, now);
    let mut stored = insert_rows(db, vec![(conversation.assistant_id, row)]).await?;
    let stored = stored.pop().ok_or(sea_orm::DbErr::RecordNotInserted)?;
    let files = crate::attachments::rows(&stored, conversation.identity_id, &files);
    crate::attachments::insert(db, &files).await?;
    Ok(stored)
}

/// The row of `new` in `conversation`, every column given (the time at storage precision), so
/// that it is what the database keeps without reading it back.
fn row(conversation: &conversation::Model, new: NewMessage, now: DateTime<Utc>) -> message::Model {
    message::Model {
        id: new.id.unwrap_or_else(Uuid::now_v7),
        workspace_id: conversation.workspace_id,
        conversation_id: conversation.id,
        channel_id: conversation.channel_id,
        direction: new.direction,
        role: new.role,
        content: new.content,
        status: new.status,
        platform_message_id: new.platform_message_id,
        error: new.error,
        usage: new.usage,
        tool_calls: new.tool_calls,
        tool_call_id: new.tool_call_id,
        created_at: crate::clock::at_storage_precision(now),
        reply_to_message_id: new.reply_to_message_id,
        outbound: new.outbound,
        metadata: new.metadata,
        operator_id: new.operator_id,
    }
}

/// Inserts `rows` (each with its conversation's assistant) in one statement, with what they
/// count (see [`metered`]), and answers them.
async fn insert_rows(
    db: &impl ConnectionTrait,
    rows: Vec<(Option<Uuid>, message::Model)>,
) -> Result<Vec<message::Model>> {
    message::Entity::insert_many(
        rows.iter()
            .map(|(_, row)| message::ActiveModel::from(row.clone())),
    )
    .exec_without_returning(db)
    .await?;
    metered(db, &rows).await?;
    Ok(rows.into_iter().map(|(_, row)| row).collect())
}

/// Whether storing `new` counts usage (see [`metered`]).
fn counts(new: &NewMessage) -> bool {
    new.usage.is_some()
        || (new.role == Role::User && new.direction == Direction::Inbound)
        || (new.role == Role::Tool && is_mcp(new.metadata.as_ref()))
}

/// Whether a tool result's metadata says an MCP server answered it.
fn is_mcp(metadata: Option<&Value>) -> bool {
    metadata.is_some_and(|m| m["source"] == "mcp")
}

/// Counts what `rows` are: the model's tokens an answer spent, a person's message received, an
/// MCP server's answer to a tool call. (The conversation's own token totals move in the
/// insert's statement: the trigger that keeps its `last_message_at` adds them.)
async fn metered(db: &impl ConnectionTrait, rows: &[(Option<Uuid>, message::Model)]) -> Result<()> {
    let mut counts = Vec::new();
    for (assistant_id, row) in rows {
        let count = |metric, value| {
            Count::new(row.workspace_id, row.created_at, metric, value)
                .on(row.channel_id)
                .by(*assistant_id)
        };
        if let Some(usage) = &row.usage {
            let tokens = |name: &str| usage.get(name).and_then(Value::as_i64).unwrap_or(0);
            counts.push(count(Metric::ModelPromptTokens, tokens("prompt_tokens")));
            counts.push(count(
                Metric::ModelCompletionTokens,
                tokens("completion_tokens"),
            ));
        }
        match row.role {
            Role::User if row.direction == Direction::Inbound => {
                counts.push(count(Metric::MessagesReceived, 1));
            }
            Role::Tool if is_mcp(row.metadata.as_ref()) => {
                counts.push(count(Metric::McpCalls, 1));
            }
            _ => {}
        }
    }
    usage::add(db, &counts).await
}
