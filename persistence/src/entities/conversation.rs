//! An identity's thread on one channel.

use sea_orm::entity::prelude::*;

use crate::values::{ConversationMode, ConversationStatus};

/// One row of `conversations`.
#[derive(Clone, Debug, PartialEq, DeriveEntityModel, serde::Serialize, serde::Deserialize)]
#[sea_orm(table_name = "conversations")]
pub struct Model {
    /// UUID v7.
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: Uuid,
    /// Owning workspace.
    pub workspace_id: i64,
    /// The identity.
    pub identity_id: Uuid,
    /// The channel.
    pub channel_id: Uuid,
    /// The assistant answering it.
    pub assistant_id: Option<Uuid>,
    /// Whether it still takes messages.
    pub status: ConversationStatus,
    /// First message.
    pub started_at: DateTimeUtc,
    /// Latest message.
    pub last_message_at: DateTimeUtc,
    /// Who answers it: the assistant, or a person it was handed to.
    pub mode: ConversationMode,
    /// When `mode` last changed; `None` while it never has.
    pub mode_changed_at: Option<DateTimeUtc>,
    /// Why it was last handed to a person.
    pub handoff_reason: Option<String>,
    /// While a person has it: when a person last acted in it (the handoff, or their latest
    /// message). The automatic return to the assistant counts from here.
    pub human_active_at: Option<DateTimeUtc>,
    /// The model's prompt tokens spent on it, in all.
    pub prompt_tokens: i64,
    /// The model's completion tokens spent on it, in all.
    pub completion_tokens: i64,
    /// The operator it is assigned to, if anyone.
    pub assigned_operator_id: Option<Uuid>,
    /// When it was assigned (an unanswered assignment returns to the queue from here).
    pub assigned_at: Option<DateTimeUtc>,
}

/// Relations are expressed through explicit queries.
#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
