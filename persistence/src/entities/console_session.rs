//! A signed-in console session: an operator's, or an API key's.

use sea_orm::entity::prelude::*;

/// One row of `console_sessions`.
#[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
#[sea_orm(table_name = "console_sessions")]
pub struct Model {
    /// SHA-256 of the cookie's token, hex: the token itself is only ever in the cookie.
    #[sea_orm(primary_key, auto_increment = false)]
    pub token_hash: String,
    /// The workspace it sees.
    pub workspace_id: i64,
    /// The operator signed in, for an operator's session.
    pub operator_id: Option<Uuid>,
    /// The key signed in with, for a key's session.
    pub api_key_id: Option<Uuid>,
    /// When it started (its longest life counts from here).
    pub created_at: DateTimeUtc,
    /// When it was last used, to a minute (its idle time counts from here).
    pub seen_at: DateTimeUtc,
}

/// Relations are expressed through explicit queries.
#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
