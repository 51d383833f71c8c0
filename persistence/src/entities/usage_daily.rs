//! One counter of a workspace's usage on one UTC day.

use sea_orm::entity::prelude::*;

/// One row of `usage_daily`: `value` of `metric` counted for the key.
#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "usage_daily")]
pub struct Model {
    /// Owning workspace.
    #[sea_orm(primary_key, auto_increment = false)]
    pub workspace_id: i64,
    /// The UTC day counted.
    #[sea_orm(primary_key, auto_increment = false)]
    pub day: Date,
    /// The assistant the count is of; the nil UUID for none.
    #[sea_orm(primary_key, auto_increment = false)]
    pub assistant_id: Uuid,
    /// The channel the count is of; the nil UUID for none.
    #[sea_orm(primary_key, auto_increment = false)]
    pub channel_id: Uuid,
    /// What is counted (see [`crate::usage::Metric`]).
    #[sea_orm(primary_key, auto_increment = false)]
    pub metric: String,
    /// How much.
    pub value: i64,
}

/// Relations are expressed through explicit queries.
#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
