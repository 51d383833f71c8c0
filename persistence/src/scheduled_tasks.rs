//! Scheduled tasks and their runs. A task is claimed (`scheduled` → `running`) and its run
//! written `running` in one transaction before it executes; a run found `running` at start-up
//! is failed `interrupted` and never repeated.

use chrono::{DateTime, Utc};
use sea_orm::sea_query::{Expr, ExprTrait, SelectStatement};
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter, QueryOrder,
    QuerySelect, QueryTrait, Set,
};
use serde_json::Value;
use uuid::Uuid;

use crate::cluster::{Fence, fenced};
use crate::entities::{scheduled_task, scheduled_task_run};
use crate::page::fetch_page;
use crate::values::{RunStatus, TaskStatus, TaskType};
use crate::{Page, Paged, Result};

/// A new task, validated by the caller.
#[derive(Clone, Debug)]
pub struct NewTask {
    /// Display name.
    pub name: String,
    /// What it does.
    pub task_type: TaskType,
    /// Its checked parameters.
    pub payload: Value,
    /// The first run.
    pub scheduled_at: DateTime<Utc>,
    /// Cron expression, if it recurs.
    pub recurrence: Option<String>,
    /// IANA timezone of the recurrence.
    pub timezone: String,
}

/// Stores a task, `scheduled` for `scheduled_at`.
///
/// # Errors
/// The database's.
pub async fn create(
    db: &impl ConnectionTrait,
    workspace_id: i64,
    new: NewTask,
    now: DateTime<Utc>,
) -> Result<scheduled_task::Model> {
    Ok(scheduled_task::ActiveModel {
        id: Set(Uuid::now_v7()),
        workspace_id: Set(workspace_id),
        name: Set(new.name),
        task_type: Set(new.task_type),
        payload: Set(new.payload),
        scheduled_at: Set(new.scheduled_at),
        recurrence: Set(new.recurrence),
        timezone: Set(new.timezone),
        status: Set(TaskStatus::Scheduled),
        next_run_at: Set(Some(new.scheduled_at)),
        last_run_at: Set(None),
        run_count: Set(0),
        last_error: Set(None),
        created_at: Set(now),
        updated_at: Set(now),
    }
    .insert(db)
    .await?)
}

/// The task `id` of the workspace.
///
/// # Errors
/// The database's.
pub async fn find(
    db: &impl ConnectionTrait,
    workspace_id: i64,
    id: Uuid,
) -> Result<Option<scheduled_task::Model>> {
    Ok(scheduled_task::Entity::find_by_id(id)
        .filter(scheduled_task::Column::WorkspaceId.eq(workspace_id))
        .one(db)
        .await?)
}

/// The task `id`, whatever its workspace (for its actor).
///
/// # Errors
/// The database's.
pub async fn find_in_any_workspace(
    db: &impl ConnectionTrait,
    id: Uuid,
) -> Result<Option<scheduled_task::Model>> {
    Ok(scheduled_task::Entity::find_by_id(id).one(db).await?)
}

/// A page of the workspace's tasks, newest first.
///
/// # Errors
/// The database's.
pub async fn list(
    db: &impl ConnectionTrait,
    workspace_id: i64,
    page: Page,
) -> Result<Paged<scheduled_task::Model>> {
    let query = scheduled_task::Entity::find()
        .filter(scheduled_task::Column::WorkspaceId.eq(workspace_id))
        .order_by_desc(scheduled_task::Column::Id);
    fetch_page(db, query, page).await
}

/// Scheduled tasks due before `until`, soonest first (at most `limit`).
///
/// # Errors
/// The database's.
pub async fn due_before(
    db: &impl ConnectionTrait,
    until: DateTime<Utc>,
    limit: u64,
) -> Result<Vec<scheduled_task::Model>> {
    Ok(scheduled_task::Entity::find()
        .filter(scheduled_task::Column::Status.eq(TaskStatus::Scheduled))
        .filter(scheduled_task::Column::NextRunAt.lte(until))
        .order_by_asc(scheduled_task::Column::NextRunAt)
        .limit(limit)
        .all(db)
        .await?)
}

/// Moves a task from one of `from` to `to`; `false` when it was in none of them.
///
/// # Errors
/// The database's.
pub async fn set_status(
    db: &impl ConnectionTrait,
    id: Uuid,
    from: &[TaskStatus],
    to: TaskStatus,
    now: DateTime<Utc>,
) -> Result<bool> {
    let updated = scheduled_task::Entity::update_many()
        .col_expr(scheduled_task::Column::Status, Expr::value(to))
        .col_expr(scheduled_task::Column::UpdatedAt, Expr::value(now))
        .filter(scheduled_task::Column::Id.eq(id))
        .filter(scheduled_task::Column::Status.is_in(from.iter().copied()))
        .exec(db)
        .await?;
    Ok(updated.rows_affected > 0)
}

/// Claims the task for its run due at `due_at` and writes the run `running`; `None` when the
/// task is not scheduled for that time any more (paused, deleted, run by someone else).
///
/// # Errors
/// The database's.
pub async fn start_run(
    db: &impl ConnectionTrait,
    id: Uuid,
    due_at: DateTime<Utc>,
    late: bool,
    now: DateTime<Utc>,
    fence: Option<&Fence>,
) -> Result<Option<scheduled_task_run::Model>> {
    let update = scheduled_task::Entity::update_many()
        .col_expr(
            scheduled_task::Column::Status,
            Expr::value(TaskStatus::Running),
        )
        .col_expr(scheduled_task::Column::UpdatedAt, Expr::value(now))
        .filter(scheduled_task::Column::Id.eq(id))
        .filter(scheduled_task::Column::Status.eq(TaskStatus::Scheduled))
        .filter(scheduled_task::Column::NextRunAt.eq(due_at));
    let claimed = fenced(update, fence).exec(db).await?;
    if claimed.rows_affected == 0 {
        return Ok(None);
    }
    let run = scheduled_task_run::ActiveModel {
        id: Set(Uuid::now_v7()),
        task_id: Set(id),
        due_at: Set(due_at),
        started_at: Set(now),
        finished_at: Set(None),
        status: Set(RunStatus::Running),
        late: Set(late),
        error: Set(None),
        result: Set(None),
    }
    .insert(db)
    .await?;
    Ok(Some(run))
}

/// How a run ended, and where its task goes next.
#[derive(Clone, Debug)]
pub struct RunEnd {
    /// `Succeeded` or `Failed`.
    pub status: RunStatus,
    /// Why it failed.
    pub error: Option<String>,
    /// What it did.
    pub result: Option<Value>,
    /// The task's next run (a recurring task), or `None` (it is done).
    pub next_run_at: Option<DateTime<Utc>>,
}

/// How many tasks of the workspace are scheduled, paused or running, counted up to `at_most`
/// (the quota): the check costs the quota's rows at most, however many tasks the workspace
/// has (counting them all made each creation read every row of a workspace of 100,000, and
/// tasks due seconds later started seconds late behind the creations).
///
/// # Errors
/// Fails on a database error.
pub async fn count_active(
    db: &impl ConnectionTrait,
    workspace_id: i64,
    at_most: u64,
) -> Result<u64> {
    let active = scheduled_task::Entity::find()
        .select_only()
        .column(scheduled_task::Column::Id)
        .filter(scheduled_task::Column::WorkspaceId.eq(workspace_id))
        .filter(scheduled_task::Column::Status.is_in([
            TaskStatus::Scheduled,
            TaskStatus::Paused,
            TaskStatus::Running,
        ]))
        .limit(at_most)
        .as_query()
        .to_owned();
    let count = db.get_database_backend().build(
        &SelectStatement::new()
            .expr(Expr::cust("COUNT(*) AS active"))
            .from_subquery(active, "active_tasks")
            .to_owned(),
    );
    Ok(match db.query_one_raw(count).await? {
        Some(row) => u64::try_from(row.try_get::<i64>("", "active")?).unwrap_or(0),
        None => 0,
    })
}

/// Deletes a task's runs but its newest `kept`.
///
/// # Errors
/// Fails on a database error.
pub async fn trim_runs(db: &impl ConnectionTrait, task_id: Uuid, kept: u64) -> Result<u64> {
    let oldest_kept = scheduled_task_run::Entity::find()
        .filter(scheduled_task_run::Column::TaskId.eq(task_id))
        .order_by_desc(scheduled_task_run::Column::Id)
        .offset(kept.saturating_sub(1))
        .one(db)
        .await?;
    let Some(oldest_kept) = oldest_kept else {
        return Ok(0);
    };
    let deleted = scheduled_task_run::Entity::delete_many()
        .filter(scheduled_task_run::Column::TaskId.eq(task_id))
        .filter(scheduled_task_run::Column::Id.lt(oldest_kept.id))
        .exec(db)
        .await?;
    Ok(deleted.rows_affected)
}

/// Records the end of `run` and moves its task on: back to `scheduled` for its next run, or
/// `completed`/`failed`. A task paused during its run stays paused (with its next run set).
///
/// # Errors
/// The database's.
pub async fn finish_run(
    db: &impl ConnectionTrait,
    run: &scheduled_task_run::Model,
    end: RunEnd,
    now: DateTime<Utc>,
) -> Result<()> {
    scheduled_task_run::Entity::update_many()
        .col_expr(scheduled_task_run::Column::Status, Expr::value(end.status))
        .col_expr(scheduled_task_run::Column::FinishedAt, Expr::value(now))
        .col_expr(
            scheduled_task_run::Column::Error,
            Expr::value(end.error.clone()),
        )
        .col_expr(scheduled_task_run::Column::Result, Expr::value(end.result))
        .filter(scheduled_task_run::Column::Id.eq(run.id))
        .exec(db)
        .await?;
    let next_status = match (end.next_run_at, end.status) {
        (Some(_), _) => TaskStatus::Scheduled,
        (None, RunStatus::Failed) => TaskStatus::Failed,
        (None, _) => TaskStatus::Completed,
    };
    let update = |from: TaskStatus, to: TaskStatus| {
        scheduled_task::Entity::update_many()
            .col_expr(scheduled_task::Column::Status, Expr::value(to))
            .col_expr(
                scheduled_task::Column::NextRunAt,
                Expr::value(end.next_run_at),
            )
            .col_expr(
                scheduled_task::Column::LastRunAt,
                Expr::value(run.started_at),
            )
            .col_expr(
                scheduled_task::Column::RunCount,
                Expr::col(scheduled_task::Column::RunCount).add(1),
            )
            .col_expr(
                scheduled_task::Column::LastError,
                Expr::value(end.error.clone()),
            )
            .col_expr(scheduled_task::Column::UpdatedAt, Expr::value(now))
            .filter(scheduled_task::Column::Id.eq(run.task_id))
            .filter(scheduled_task::Column::Status.eq(from))
    };
    if update(TaskStatus::Running, next_status)
        .exec(db)
        .await?
        .rows_affected
        == 0
    {
        // Paused while it ran: it stays paused, resuming from its next run.
        update(TaskStatus::Paused, TaskStatus::Paused)
            .exec(db)
            .await?;
    }
    Ok(())
}

/// Every run left `running` (by a stop caught mid-way), for start-up to settle.
///
/// # Errors
/// The database's.
pub async fn running_runs(db: &impl ConnectionTrait) -> Result<Vec<scheduled_task_run::Model>> {
    Ok(scheduled_task_run::Entity::find()
        .filter(scheduled_task_run::Column::Status.eq(RunStatus::Running))
        .all(db)
        .await?)
}

/// Changes when a task runs next (a resume, or a recurring task's catch-up).
///
/// # Errors
/// The database's.
pub async fn reschedule(
    db: &impl ConnectionTrait,
    id: Uuid,
    next_run_at: Option<DateTime<Utc>>,
    now: DateTime<Utc>,
) -> Result<()> {
    scheduled_task::Entity::update_many()
        .col_expr(scheduled_task::Column::NextRunAt, Expr::value(next_run_at))
        .col_expr(scheduled_task::Column::UpdatedAt, Expr::value(now))
        .filter(scheduled_task::Column::Id.eq(id))
        .exec(db)
        .await?;
    Ok(())
}

/// Deletes a task and its runs.
///
/// # Errors
/// The database's.
pub async fn delete(db: &impl ConnectionTrait, workspace_id: i64, id: Uuid) -> Result<bool> {
    scheduled_task_run::Entity::delete_many()
        .filter(scheduled_task_run::Column::TaskId.eq(id))
        .exec(db)
        .await?;
    let deleted = scheduled_task::Entity::delete_many()
        .filter(scheduled_task::Column::Id.eq(id))
        .filter(scheduled_task::Column::WorkspaceId.eq(workspace_id))
        .exec(db)
        .await?;
    Ok(deleted.rows_affected > 0)
}

/// A page of a task's runs, newest first.
///
/// # Errors
/// The database's.
pub async fn runs(
    db: &impl ConnectionTrait,
    task_id: Uuid,
    page: Page,
) -> Result<Paged<scheduled_task_run::Model>> {
    let query = scheduled_task_run::Entity::find()
        .filter(scheduled_task_run::Column::TaskId.eq(task_id))
        .order_by_desc(scheduled_task_run::Column::Id);
    fetch_page(db, query, page).await
}
