//! A workspace: the isolated container every other resource is scoped to.

use sea_orm::entity::prelude::*;

/// One row of `workspaces`.
#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "workspaces")]
pub struct Model {
    /// Integer, because the specification's campaign list takes `workspaceId` as a number.
    #[sea_orm(primary_key)]
    pub id: i64,
    /// The business that owns it.
    pub business_id: Uuid,
    /// Unique within the business.
    pub name: String,
    /// Free text.
    pub description: Option<String>,
    /// Days its media files are kept (0: kept); `None`: the installation's
    /// `media.retention_days`.
    pub media_retention_days: Option<i32>,
    /// When it was created.
    pub created_at: DateTimeUtc,
    /// When its name or description last changed.
    pub updated_at: DateTimeUtc,
}

/// Relations are expressed through explicit queries.
#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
