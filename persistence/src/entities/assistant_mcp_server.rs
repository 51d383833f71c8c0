//! An MCP server attached to an assistant.

use sea_orm::entity::prelude::*;

/// One row of `assistant_mcp_servers`.
#[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
#[sea_orm(table_name = "assistant_mcp_servers")]
pub struct Model {
    /// UUID v7.
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: Uuid,
    /// Owning workspace.
    pub workspace_id: i64,
    /// The assistant.
    pub assistant_id: Uuid,
    /// The MCP server.
    pub mcp_server_id: Uuid,
    /// When it was attached; tools are offered in attachment order.
    pub created_at: DateTimeUtc,
}

/// Relations are expressed through explicit queries.
#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
