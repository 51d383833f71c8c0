//! Membership of a user in a workspace.

use sea_orm::entity::prelude::*;

/// One row of `workspace_members`.
#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "workspace_members")]
pub struct Model {
    /// The workspace.
    #[sea_orm(primary_key, auto_increment = false)]
    pub workspace_id: i64,
    /// The member.
    #[sea_orm(primary_key, auto_increment = false)]
    pub user_id: Uuid,
    /// `owner` for the creator of the workspace, `member` otherwise.
    pub role: String,
    /// When the user joined.
    pub created_at: DateTimeUtc,
}

/// Relations are expressed through explicit queries.
#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}

/// Role of the user who created the workspace.
pub const ROLE_OWNER: &str = "owner";
/// Role of every other member.
pub const ROLE_MEMBER: &str = "member";
