//! An MCP server a workspace registered, whose tools its assistants may use.

use sea_orm::entity::prelude::*;

use crate::values::McpTransport;

/// One row of `mcp_servers`.
#[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
#[sea_orm(table_name = "mcp_servers")]
pub struct Model {
    /// UUID v7.
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: Uuid,
    /// Owning workspace.
    pub workspace_id: i64,
    /// Display name; its slug prefixes the tool names offered to the model.
    pub name: String,
    /// How Parley speaks to it.
    pub transport: McpTransport,
    /// Its address (http or https).
    #[sea_orm(column_type = "Text")]
    pub url: String,
    /// `[{key, value}]` with every value sealed; never returned.
    pub headers: Json,
    /// When it was registered.
    pub created_at: DateTimeUtc,
    /// When it last changed.
    pub updated_at: DateTimeUtc,
}

/// Relations are expressed through explicit queries.
#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
