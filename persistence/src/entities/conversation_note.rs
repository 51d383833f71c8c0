//! A private note on a conversation: for the operators only, never sent, never in the model's
//! history (a table of its own, so no reader of messages can meet one).

use sea_orm::entity::prelude::*;

/// One row of `conversation_notes`.
#[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
#[sea_orm(table_name = "conversation_notes")]
pub struct Model {
    /// UUID v7.
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: Uuid,
    /// Its workspace.
    pub workspace_id: i64,
    /// The conversation.
    pub conversation_id: Uuid,
    /// Who wrote it (`None` for a key's session).
    pub operator_id: Option<Uuid>,
    /// The note.
    #[sea_orm(column_type = "Text")]
    pub text: String,
    /// When it was written.
    pub created_at: DateTimeUtc,
}

/// Relations are expressed through explicit queries.
#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
