//! One run of a scheduled task.

use sea_orm::entity::prelude::*;

use crate::values::RunStatus;

/// One row of `scheduled_task_runs`.
#[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
#[sea_orm(table_name = "scheduled_task_runs")]
pub struct Model {
    /// UUID v7.
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: Uuid,
    /// Its task.
    pub task_id: Uuid,
    /// When the task was due.
    pub due_at: DateTimeUtc,
    /// When the run started.
    pub started_at: DateTimeUtc,
    /// When it ended.
    pub finished_at: Option<DateTimeUtc>,
    /// How it went.
    pub status: RunStatus,
    /// It fell due while the service was down.
    pub late: bool,
    /// Why it failed.
    #[sea_orm(column_type = "Text", nullable)]
    pub error: Option<String>,
    /// What it did (ids of what it created or sent).
    pub result: Option<Json>,
}

/// Relations are expressed through explicit queries.
#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
