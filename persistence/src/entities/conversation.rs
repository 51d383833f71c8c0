//! An identity's thread on one channel.

use sea_orm::entity::prelude::*;

use crate::values::ConversationStatus;

/// One row of `conversations`.
#[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
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
}

/// Relations are expressed through explicit queries.
#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
