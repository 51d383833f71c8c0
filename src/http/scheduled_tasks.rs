//! Scheduled tasks (snake_case): `GET|POST /scheduled-tasks`, `GET|DELETE
//! /scheduled-tasks/{id}`, `PATCH /scheduled-tasks/{id}/pause|resume` and the added
//! `GET /scheduled-tasks/{id}/runs`. The payload is parsed into its task type's typed value, and
//! what it refers to (identities, channels, stages, campaigns, contacts) must exist in the
//! caller's workspace; references are stored resolved (an identity path becomes its id).

use axum::extract::State;
use chrono::{DateTime, Utc};
use parley_persistence::entities::{scheduled_task, scheduled_task_run};
use parley_persistence::scheduled_tasks::{self};
use parley_persistence::{RunStatus, TaskStatus, TaskType};
use serde::Serialize;
use serde_json::Value;
use uuid::Uuid;

use crate::domain::Permission;
use crate::http::AppState;
use crate::http::auth::Caller;
use crate::http::envelope::{DeletedRecord, Envelope};
use crate::http::error::{ApiError, Result};
use crate::http::extract::{Path, Query};
use crate::http::pagination::{ListQuery, PageResponse};
use crate::http::validation::parse_uuid;
use parley_actors::scheduler::TaskMove;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

mod create;
mod resolve;

use self::create::{__path_create_task, create_task};

pub(crate) fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_tasks, create_task))
        .routes(routes!(get_task, delete_task))
        .routes(routes!(pause_task))
        .routes(routes!(resume_task))
        .routes(routes!(list_runs))
}

/// A task as the API shows it.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub(super) struct TaskRecord {
    id: Uuid,
    name: String,
    task_type: TaskType,
    payload: Value,
    scheduled_at: DateTime<Utc>,
    recurrence: Option<String>,
    timezone: String,
    status: TaskStatus,
    next_run_at: Option<DateTime<Utc>>,
    last_run_at: Option<DateTime<Utc>>,
    run_count: i32,
    last_error: Option<String>,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
}

impl From<scheduled_task::Model> for TaskRecord {
    fn from(t: scheduled_task::Model) -> Self {
        Self {
            id: t.id,
            name: t.name,
            task_type: t.task_type,
            payload: t.payload,
            scheduled_at: t.scheduled_at,
            recurrence: t.recurrence,
            timezone: t.timezone,
            status: t.status,
            next_run_at: t.next_run_at,
            last_run_at: t.last_run_at,
            run_count: t.run_count,
            last_error: t.last_error,
            created_at: t.created_at,
            updated_at: t.updated_at,
        }
    }
}

/// One run as the API shows it.
#[derive(Debug, Serialize, utoipa::ToSchema)]
struct RunRecord {
    id: Uuid,
    due_at: DateTime<Utc>,
    started_at: DateTime<Utc>,
    finished_at: Option<DateTime<Utc>>,
    status: RunStatus,
    late: bool,
    error: Option<String>,
    result: Option<Value>,
}

impl From<scheduled_task_run::Model> for RunRecord {
    fn from(r: scheduled_task_run::Model) -> Self {
        Self {
            id: r.id,
            due_at: r.due_at,
            started_at: r.started_at,
            finished_at: r.finished_at,
            status: r.status,
            late: r.late,
            error: r.error,
            result: r.result,
        }
    }
}

/// Tells the scheduler that a task changed.
pub(super) fn tell(state: &AppState, task_id: Uuid) {
    state.actors.scheduler().changed(task_id);
}

/// List scheduled tasks.
///
/// The workspace's tasks, in pages.
#[utoipa::path(
    get,
    path = "/scheduled-tasks",
    tag = "scheduled-tasks",
    params(ListQuery),
    responses((status = 200, body = PageResponse<TaskRecord>)),
)]
#[tracing::instrument(skip_all, fields(workspace_id = caller.workspace_id))]
async fn list_tasks(
    caller: Caller,
    State(state): State<AppState>,
    Query(query): Query<ListQuery>,
) -> Result<PageResponse<TaskRecord>> {
    caller.require(Permission::Read)?;
    let page = query.page()?;
    let paged = scheduled_tasks::list(&state.db, caller.workspace_id, page).await?;
    Ok(PageResponse::new(
        "Scheduled tasks retrieved successfully",
        page,
        paged,
        TaskRecord::from,
    ))
}

async fn find_task(state: &AppState, caller: &Caller, raw: &str) -> Result<scheduled_task::Model> {
    let id = parse_uuid(raw, "id")?;
    scheduled_tasks::find(&state.db, caller.workspace_id, id)
        .await?
        .ok_or(ApiError::NotFound("Scheduled task"))
}

/// Read a scheduled task.
///
/// Its status, next and last run, run count and last error.
#[utoipa::path(
    get,
    path = "/scheduled-tasks/{id}",
    tag = "scheduled-tasks",
    params(("id" = String, Path, format = Uuid, description = "Scheduled task id")),
    responses((status = 200, body = Envelope<TaskRecord>)),
)]
#[tracing::instrument(skip_all, fields(workspace_id = caller.workspace_id))]
async fn get_task(
    caller: Caller,
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Envelope<TaskRecord>> {
    caller.require(Permission::Read)?;
    let found = find_task(&state, &caller, &id).await?;
    Ok(Envelope::ok(
        "Scheduled task retrieved successfully",
        found.into(),
    ))
}

/// Delete a scheduled task.
///
/// With its runs; it does not run again.
#[utoipa::path(
    delete,
    path = "/scheduled-tasks/{id}",
    tag = "scheduled-tasks",
    params(("id" = String, Path, format = Uuid, description = "Scheduled task id")),
    responses((status = 200, body = Envelope<DeletedRecord>)),
)]
#[tracing::instrument(skip_all, fields(workspace_id = caller.workspace_id))]
async fn delete_task(
    caller: Caller,
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Envelope<DeletedRecord>> {
    caller.require(Permission::Write)?;
    let found = find_task(&state, &caller, &id).await?;
    scheduled_tasks::delete(&state.db, caller.workspace_id, found.id).await?;
    tell(&state, found.id);
    Ok(Envelope::ok(
        "Scheduled task deleted successfully",
        DeletedRecord { id: found.id },
    ))
}

/// Pause a scheduled task.
///
/// Only a `scheduled` task can be paused (409 otherwise); it runs again when resumed.
#[utoipa::path(
    patch,
    path = "/scheduled-tasks/{id}/pause",
    tag = "scheduled-tasks",
    params(("id" = String, Path, format = Uuid, description = "Scheduled task id")),
    responses((status = 200, body = Envelope<TaskRecord>)),
)]
#[tracing::instrument(skip_all, fields(workspace_id = caller.workspace_id))]
async fn pause_task(
    caller: Caller,
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Envelope<TaskRecord>> {
    let moved = move_task(&state, &caller, &id, TaskMove::Pause).await?;
    Ok(Envelope::ok("Scheduled task paused", moved.into()))
}

/// Resume a paused task.
///
/// Resuming: a task whose time passed while paused runs at once (its next run stays where it
/// was).
#[utoipa::path(
    patch,
    path = "/scheduled-tasks/{id}/resume",
    tag = "scheduled-tasks",
    params(("id" = String, Path, format = Uuid, description = "Scheduled task id")),
    responses((status = 200, body = Envelope<TaskRecord>)),
)]
#[tracing::instrument(skip_all, fields(workspace_id = caller.workspace_id))]
async fn resume_task(
    caller: Caller,
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Envelope<TaskRecord>> {
    let moved = move_task(&state, &caller, &id, TaskMove::Resume).await?;
    Ok(Envelope::ok("Scheduled task resumed", moved.into()))
}

async fn move_task(
    state: &AppState,
    caller: &Caller,
    raw: &str,
    how: TaskMove,
) -> Result<scheduled_task::Model> {
    caller.require(Permission::Write)?;
    let found = find_task(state, caller, raw).await?;
    let scheduler = state.actors.scheduler();
    Ok(scheduler.move_task(&state.db, &found, how).await?)
}

/// List a task's runs.
///
/// Newest first; the newest runs are kept.
#[utoipa::path(
    get,
    path = "/scheduled-tasks/{id}/runs",
    tag = "scheduled-tasks",
    params(("id" = String, Path, format = Uuid, description = "Scheduled task id"), ListQuery),
    responses((status = 200, body = PageResponse<RunRecord>)),
)]
#[tracing::instrument(skip_all, fields(workspace_id = caller.workspace_id))]
async fn list_runs(
    caller: Caller,
    State(state): State<AppState>,
    Path(id): Path<String>,
    Query(query): Query<ListQuery>,
) -> Result<PageResponse<RunRecord>> {
    caller.require(Permission::Read)?;
    let found = find_task(&state, &caller, &id).await?;
    let page = query.page()?;
    let paged = scheduled_tasks::runs(&state.db, found.id, page).await?;
    Ok(PageResponse::new(
        "Scheduled task runs retrieved successfully",
        page,
        paged,
        RunRecord::from,
    ))
}
