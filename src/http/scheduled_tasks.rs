//! Scheduled tasks (snake_case): `GET|POST /scheduled-tasks`, `GET|DELETE
//! /scheduled-tasks/{id}`, `PATCH /scheduled-tasks/{id}/pause|resume` and the added
//! `GET /scheduled-tasks/{id}/runs`. The payload is parsed into its task type's typed value, and
//! what it refers to (identities, channels, stages, campaigns, contacts) must exist in the
//! caller's workspace; references are stored resolved (an identity path becomes its id).

use axum::extract::State;
use chrono::{DateTime, Utc};
use parley_actors::scheduler::{Recurrence, TaskPayload, recurrence};
use parley_persistence::entities::{scheduled_task, scheduled_task_run};
use parley_persistence::scheduled_tasks::{self, NewTask};
use parley_persistence::{RunStatus, TaskStatus, TaskType, campaigns, channels, clock, stages};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use uuid::Uuid;

use crate::domain::Permission;
use crate::http::AppState;
use crate::http::auth::Caller;
use crate::http::envelope::Envelope;
use crate::http::error::{ApiError, FieldError, Result};
use crate::http::extract::{Json, Path, Query};
use crate::http::lookup::resolve_contacts;
use crate::http::lookup::resolve_identity;
use crate::http::pagination::{ListQuery, PageResponse};
use crate::http::validation::{Problems, parse_uuid};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

/// Longest task name.
const MAX_NAME: usize = 200;

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
struct TaskRecord {
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

#[derive(Debug, Deserialize, utoipa::ToSchema)]
struct CreateTaskBody {
    name: Option<String>,
    task_type: Option<String>,
    payload: Option<Value>,
    scheduled_at: Option<String>,
    recurrence: Option<String>,
    timezone: Option<String>,
}

#[utoipa::path(
    post,
    path = "/scheduled-tasks",
    tag = "scheduled-tasks",
    request_body = CreateTaskBody,
    responses((status = 201, body = Envelope<TaskRecord>)),
)]
#[tracing::instrument(skip_all, fields(workspace_id = caller.workspace_id))]
async fn create_task(
    caller: Caller,
    State(state): State<AppState>,
    Json(body): Json<CreateTaskBody>,
) -> Result<Envelope<TaskRecord>> {
    caller.require(Permission::Write)?;
    let mut problems = Problems::default();
    let name = body
        .name
        .as_deref()
        .map(str::trim)
        .unwrap_or_default()
        .to_owned();
    if name.is_empty() || name.chars().count() > MAX_NAME {
        problems.add(["name"], format!("is required, 1 to {MAX_NAME} characters"));
    }
    let task_type = match body.task_type.as_deref() {
        None => {
            problems.add(["task_type"], "is required");
            None
        }
        Some(raw) => TaskType::parse(raw).or_else(|| {
            problems.add(
                ["task_type"],
                "must be send_message, send_template, start_flow, set_stage or assistant_followup",
            );
            None
        }),
    };
    let payload = match (task_type, body.payload.as_ref()) {
        (Some(task_type), Some(raw)) => match TaskPayload::parse(task_type, raw) {
            Ok(payload) => Some(payload),
            Err(found) => {
                for (field, problem) in found {
                    if field.is_empty() {
                        problems.add(["payload"], problem);
                    } else {
                        problems.add(["payload", field.as_str()], problem);
                    }
                }
                None
            }
        },
        (_, None) => {
            problems.add(["payload"], "is required");
            None
        }
        (None, Some(_)) => None,
    };
    let timezone = body.timezone.clone().unwrap_or_else(|| "UTC".to_owned());
    if recurrence::timezone(&timezone).is_err() {
        problems.add(
            ["timezone"],
            "must be an IANA timezone such as Europe/Lisbon",
        );
    }
    let recurring = match body
        .recurrence
        .as_deref()
        .map(str::trim)
        .filter(|r| !r.is_empty())
    {
        Some(expression) => match Recurrence::parse(expression, &timezone) {
            Ok(parsed) => Some((expression.to_owned(), parsed)),
            Err(recurrence::RecurrenceError::Timezone) => None,
            Err(error) => {
                problems.add(["recurrence"], error.to_string());
                None
            }
        },
        None => None,
    };
    let now = clock::now();
    let scheduled_at = match body.scheduled_at.as_deref() {
        Some(raw) => DateTime::parse_from_rfc3339(raw)
            .map(|t| t.with_timezone(&Utc))
            .map_err(|_| {
                problems.add(
                    ["scheduled_at"],
                    "must be an RFC 3339 time such as 2026-12-01T09:00:00Z",
                )
            })
            .ok(),
        // A recurring task without a first time starts at its next occurrence.
        None => match &recurring {
            Some((_, parsed)) => parsed.next_after(now),
            None => {
                problems.add(["scheduled_at"], "is required (or give a recurrence)");
                None
            }
        },
    };
    problems.finish()?;
    let (Some(task_type), Some(payload), Some(scheduled_at)) = (task_type, payload, scheduled_at)
    else {
        return Err(ApiError::Internal(anyhow::anyhow!(
            "checked fields went missing"
        )));
    };
    let payload = resolved(&state, caller.workspace_id, payload).await?;
    let new = NewTask {
        name,
        task_type,
        payload: payload.to_json(),
        scheduled_at,
        recurrence: recurring.map(|(expression, _)| expression),
        timezone,
    };
    let created = scheduled_tasks::create(&state.db, caller.workspace_id, new, now).await?;
    tracing::info!(task_id = %created.id, task_type = created.task_type.as_str(), "scheduled task created");
    tell(&state, created.id);
    Ok(Envelope::created(
        "Scheduled task created successfully",
        created.into(),
    ))
}

/// Checks that what the payload refers to exists in the workspace, and answers it with its
/// references resolved (identity paths and contacts become identity ids).
async fn resolved(state: &AppState, ws: i64, payload: TaskPayload) -> Result<TaskPayload> {
    let db = &state.db;
    let missing = |field: &str, what: &str| {
        ApiError::invalid(vec![FieldError::new(
            ["payload", field],
            format!("names no {what} of this workspace"),
        )])
    };
    let identity = |raw: String| async move {
        resolve_identity(db, ws, &raw)
            .await?
            .map(|found| found.id.to_string())
            .ok_or_else(|| missing("identity_id", "identity"))
    };
    let channel = |id: Uuid, field: &'static str| async move {
        channels::find(db, ws, id)
            .await?
            .map(|_| id)
            .ok_or_else(|| missing(field, "channel"))
    };
    Ok(match payload {
        TaskPayload::SendMessage {
            identity: raw,
            channel_id,
            message,
        } => TaskPayload::SendMessage {
            identity: identity(raw).await?,
            channel_id: channel(channel_id, "channel_id").await?,
            message,
        },
        TaskPayload::SendTemplate {
            identity: raw,
            channel_id,
            template_name,
            language,
            parameters,
        } => TaskPayload::SendTemplate {
            identity: identity(raw).await?,
            channel_id: channel(channel_id, "channel_id").await?,
            template_name,
            language,
            parameters,
        },
        TaskPayload::StartFlow {
            campaign_id,
            channel_id,
            contacts,
            configuration,
        } => {
            if campaigns::find(db, ws, campaign_id).await?.is_none() {
                return Err(missing("campaign_uid", "campaign"));
            }
            let channel_id = channel(channel_id, "channel_uid").await?;
            if let Err(problems) = parley_actors::flow::FlowConfig::parse(configuration.as_ref()) {
                let details = problems
                    .into_iter()
                    .map(|(field, problem)| {
                        FieldError::new(["payload", "configuration", field], problem)
                    })
                    .collect();
                return Err(ApiError::invalid(details));
            }
            let recipients =
                resolve_contacts(db, ws, contacts)
                    .await
                    .map_err(|error| match error {
                        ApiError::BadRequest { message, .. } => {
                            ApiError::invalid(vec![FieldError::new(
                                ["payload", "contact_uids"],
                                message,
                            )])
                        }
                        other => other,
                    })?;
            TaskPayload::StartFlow {
                campaign_id,
                channel_id,
                contacts: recipients
                    .into_iter()
                    .map(|r| r.identity_id.to_string())
                    .collect(),
                configuration,
            }
        }
        TaskPayload::SetStage {
            identity: raw,
            stage_id,
            metadata,
        } => {
            if stages::find(db, ws, stage_id).await?.is_none() {
                return Err(missing("stage_id", "stage"));
            }
            TaskPayload::SetStage {
                identity: identity(raw).await?,
                stage_id,
                metadata,
            }
        }
        TaskPayload::AssistantFollowup {
            identity: raw,
            channel_id,
            instructions,
        } => TaskPayload::AssistantFollowup {
            identity: identity(raw).await?,
            channel_id: channel(channel_id, "channel_id").await?,
            instructions,
        },
    })
}

/// Tells the scheduler that a task changed.
fn tell(state: &AppState, task_id: Uuid) {
    state.actors.scheduler().changed(task_id);
}

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

#[utoipa::path(
    delete,
    path = "/scheduled-tasks/{id}",
    tag = "scheduled-tasks",
    params(("id" = String, Path, format = Uuid, description = "Scheduled task id")),
    responses((status = 200, body = Envelope<Value>)),
)]
#[tracing::instrument(skip_all, fields(workspace_id = caller.workspace_id))]
async fn delete_task(
    caller: Caller,
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Envelope<Value>> {
    caller.require(Permission::Write)?;
    let found = find_task(&state, &caller, &id).await?;
    scheduled_tasks::delete(&state.db, caller.workspace_id, found.id).await?;
    tell(&state, found.id);
    Ok(Envelope::ok(
        "Scheduled task deleted successfully",
        json!({"id": found.id}),
    ))
}

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
    let refusal = ("task_not_scheduled", "Only a scheduled task can be paused");
    let moved = move_task(
        &state,
        &caller,
        &id,
        TaskStatus::Scheduled,
        TaskStatus::Paused,
        refusal,
    );
    Ok(Envelope::ok("Scheduled task paused", moved.await?.into()))
}

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
    let refusal = ("task_not_paused", "Only a paused task can be resumed");
    let moved = move_task(
        &state,
        &caller,
        &id,
        TaskStatus::Paused,
        TaskStatus::Scheduled,
        refusal,
    );
    Ok(Envelope::ok("Scheduled task resumed", moved.await?.into()))
}

/// Moves the task `raw` from `from` to `to` and tells the scheduler; a task in another status
/// is a 409 with `refusal` (code, sentence).
async fn move_task(
    state: &AppState,
    caller: &Caller,
    raw: &str,
    from: TaskStatus,
    to: TaskStatus,
    refusal: (&'static str, &str),
) -> Result<scheduled_task::Model> {
    caller.require(Permission::Write)?;
    let found = find_task(state, caller, raw).await?;
    if !scheduled_tasks::set_status(&state.db, found.id, &[from], to, clock::now()).await? {
        return Err(ApiError::ConflictCode {
            code: refusal.0,
            message: format!("{}; this one is {}", refusal.1, found.status.as_str()),
        });
    }
    tell(state, found.id);
    find_task(state, caller, raw).await
}

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
