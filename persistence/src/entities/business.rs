//! A business: the tenant that owns workspaces and users.

use sea_orm::entity::prelude::*;

/// One row of `businesses`.
#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "businesses")]
pub struct Model {
    /// UUID v7, so ids sort by creation.
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: Uuid,
    /// Unique across the installation; the operator names it at bootstrap.
    pub name: String,
    /// When it was created.
    pub created_at: DateTimeUtc,
}

/// Relations are expressed through explicit queries.
#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
