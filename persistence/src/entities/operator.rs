//! A person who answers a workspace's conversations in the console.

use sea_orm::entity::prelude::*;

/// One row of `operators`.
#[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
#[sea_orm(table_name = "operators")]
pub struct Model {
    /// UUID v7.
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: Uuid,
    /// The workspace they work in.
    pub workspace_id: i64,
    /// Their e-mail address, lower-cased: what they sign in with.
    pub email: String,
    /// Their name, as the console and the history show it.
    pub name: String,
    /// `agent` or `supervisor`.
    pub role: String,
    /// argon2id in PHC form; `None` until they answered their invitation.
    pub password_hash: Option<String>,
    /// When an admin disabled them.
    pub disabled_at: Option<DateTimeUtc>,
    /// When they were invited.
    pub created_at: DateTimeUtc,
}

/// Relations are expressed through explicit queries.
#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}

impl Model {
    /// `invited` (no password yet), `active` or `disabled`.
    pub fn status(&self) -> &'static str {
        if self.disabled_at.is_some() {
            "disabled"
        } else if self.password_hash.is_some() {
            "active"
        } else {
            "invited"
        }
    }
}
