//! Private notes on a conversation: for the workspace's operators only.

use chrono::{DateTime, Utc};
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter, QueryOrder, Set,
};
use uuid::Uuid;

use crate::Result;
use crate::entities::{conversation, conversation_note};

/// Writes a note on `conversation` by `operator_id`.
///
/// # Errors
/// Fails on a database error.
pub async fn add(
    db: &impl ConnectionTrait,
    conversation: &conversation::Model,
    operator_id: Option<Uuid>,
    text: String,
    now: DateTime<Utc>,
) -> Result<conversation_note::Model> {
    Ok(conversation_note::ActiveModel {
        id: Set(Uuid::now_v7()),
        workspace_id: Set(conversation.workspace_id),
        conversation_id: Set(conversation.id),
        operator_id: Set(operator_id),
        text: Set(text),
        created_at: Set(now),
    }
    .insert(db)
    .await?)
}

/// The notes on conversation `conversation_id`, oldest first.
///
/// # Errors
/// Fails on a database error.
pub async fn of_conversation(
    db: &impl ConnectionTrait,
    conversation_id: Uuid,
) -> Result<Vec<conversation_note::Model>> {
    Ok(conversation_note::Entity::find()
        .filter(conversation_note::Column::ConversationId.eq(conversation_id))
        .order_by_asc(conversation_note::Column::CreatedAt)
        .order_by_asc(conversation_note::Column::Id)
        .all(db)
        .await?)
}
