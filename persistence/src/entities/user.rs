//! A user of a business: creates API keys and belongs to workspaces.

use sea_orm::entity::prelude::*;

/// One row of `users`.
#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "users")]
pub struct Model {
    /// UUID v7.
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: Uuid,
    /// The business the user belongs to.
    pub business_id: Uuid,
    /// Lower-cased; unique within the business when present.
    pub email: Option<String>,
    /// When it was created.
    pub created_at: DateTimeUtc,
}

/// Relations are expressed through explicit queries.
#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
