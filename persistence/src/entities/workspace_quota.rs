//! A workspace's quotas, set by the installation's operator.

use sea_orm::entity::prelude::*;

/// One row of `workspace_quotas`; a `None` is no limit.
#[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
#[sea_orm(table_name = "workspace_quotas")]
pub struct Model {
    /// The workspace.
    #[sea_orm(primary_key, auto_increment = false)]
    pub workspace_id: i64,
    /// Model tokens (prompt and completion) per calendar month, UTC.
    pub model_tokens_per_month: Option<i64>,
    /// Messages sent per UTC day, every category together.
    pub messages_per_day: Option<i64>,
    /// Messages sent per UTC day of one category: `{"marketing": 1000, ...}`.
    pub messages_per_day_by_category: Option<Json>,
    /// Requests per second each API key of the workspace may make.
    pub requests_per_second_per_key: Option<i32>,
    /// When they were last set.
    pub updated_at: DateTimeUtc,
}

/// Relations are expressed through explicit queries.
#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
