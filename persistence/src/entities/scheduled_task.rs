//! A task to run later, once or on a cron recurrence.

use sea_orm::entity::prelude::*;

use crate::values::{TaskStatus, TaskType};

/// One row of `scheduled_tasks`.
#[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
#[sea_orm(table_name = "scheduled_tasks")]
pub struct Model {
    /// UUID v7.
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: Uuid,
    /// Owning workspace.
    pub workspace_id: i64,
    /// Display name.
    pub name: String,
    /// What it does.
    pub task_type: TaskType,
    /// Its parameters, checked against its type at creation.
    pub payload: Json,
    /// The first run.
    pub scheduled_at: DateTimeUtc,
    /// A cron expression (5 fields, or 6 with leading seconds), if it recurs.
    pub recurrence: Option<String>,
    /// The IANA timezone the recurrence is read in.
    pub timezone: String,
    /// Where it stands.
    pub status: TaskStatus,
    /// When it runs next.
    pub next_run_at: Option<DateTimeUtc>,
    /// When it last ran.
    pub last_run_at: Option<DateTimeUtc>,
    /// Runs so far.
    pub run_count: i32,
    /// The last run's error.
    #[sea_orm(column_type = "Text", nullable)]
    pub last_error: Option<String>,
    /// When it was created.
    pub created_at: DateTimeUtc,
    /// When it last changed.
    pub updated_at: DateTimeUtc,
}

/// Relations are expressed through explicit queries.
#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
