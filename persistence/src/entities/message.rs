//! One message of a conversation, in either direction.

use sea_orm::entity::prelude::*;

use crate::values::{Direction, MessageStatus, Role};

/// One row of `messages`.
#[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
#[sea_orm(table_name = "messages")]
pub struct Model {
    /// UUID v7, so messages sort by creation.
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: Uuid,
    /// Owning workspace.
    pub workspace_id: i64,
    /// The conversation.
    pub conversation_id: Uuid,
    /// The channel, for the uniqueness of platform ids.
    pub channel_id: Uuid,
    /// Which way it went.
    pub direction: Direction,
    /// Who wrote it.
    pub role: Role,
    /// Text content.
    #[sea_orm(column_type = "Text")]
    pub content: String,
    /// Where it stands.
    pub status: MessageStatus,
    /// WhatsApp message id (`wamid…`); unique per channel.
    pub platform_message_id: Option<String>,
    /// Failure code and title, when failed.
    pub error: Option<Json>,
    /// Token usage of the model call that produced it.
    pub usage: Option<Json>,
    /// Tool calls requested by the assistant in this message.
    pub tool_calls: Option<Json>,
    /// For a tool result, the call it answers.
    pub tool_call_id: Option<String>,
    /// When it was stored.
    pub created_at: DateTimeUtc,
    /// For a reply, the inbound message it answers; a processed webhook event has one.
    pub reply_to_message_id: Option<Uuid>,
    /// For an outbound message, what goes on the wire (recipient, text or template), so that
    /// one left pending at a stop is sent again as what it was.
    pub outbound: Option<Json>,
    /// What an API caller attached to an inbound message (the chat call's `metadata`).
    pub metadata: Option<Json>,
}

/// Relations are expressed through explicit queries.
#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
