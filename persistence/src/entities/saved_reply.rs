//! A reply a workspace's operators insert by its shortcut.

use sea_orm::entity::prelude::*;

/// One row of `saved_replies`.
#[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
#[sea_orm(table_name = "saved_replies")]
pub struct Model {
    /// UUID v7.
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: Uuid,
    /// Its workspace.
    pub workspace_id: i64,
    /// What an operator types after `/` to insert it; unique in the workspace.
    pub shortcut: String,
    /// The reply.
    #[sea_orm(column_type = "Text")]
    pub text: String,
    /// When it was saved.
    pub created_at: DateTimeUtc,
}

/// Relations are expressed through explicit queries.
#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
