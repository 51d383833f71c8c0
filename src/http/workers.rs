//! Workers: `GET /workers`, `POST /workers`, `GET /workers/{id}`, `DELETE /workers/{id}`.

use axum::extract::State;
use chrono::{DateTime, Utc};
use parley_persistence::clock;
use parley_persistence::entities::worker;
use parley_persistence::workers::{self, NewWorker};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::domain::{Name, Permission, Timezone};
use crate::http::AppState;
use crate::http::auth::Caller;
use crate::http::envelope::{DeletedRecord, Envelope};
use crate::http::error::{ApiError, Result};
use crate::http::extract::{Json, Path, Query};
use crate::http::lookup::find_worker;
use crate::http::pagination::{ListQuery, PageResponse};
use crate::http::validation::{Problems, optional_text, parse_uuid};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub(crate) fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_workers, create_worker))
        .routes(routes!(get_worker, delete_worker))
}

/// A worker as the API shows it.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub(crate) struct WorkerRecord {
    id: Uuid,
    name: String,
    description: Option<String>,
    timezone: Option<String>,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
}

impl From<worker::Model> for WorkerRecord {
    fn from(w: worker::Model) -> Self {
        Self {
            id: w.id,
            name: w.name,
            description: w.description,
            timezone: w.timezone,
            created_at: w.created_at,
            updated_at: w.updated_at,
        }
    }
}

/// The create answer: the specification's `worker_id` beside the record.
#[derive(Debug, Serialize, utoipa::ToSchema)]
struct CreatedWorker {
    worker_id: Uuid,
    #[serde(flatten)]
    record: WorkerRecord,
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
struct CreateWorkerBody {
    #[schema(min_length = 1, max_length = 100)]
    name: String,
    #[schema(value_type = Option<String>)]
    description: Option<String>,
    /// An IANA zone name.
    #[schema(value_type = Option<String>, example = "Europe/Lisbon")]
    timezone: Option<String>,
}

/// Create a worker.
///
/// A worker answers on the channels synced to it, through its assistants.
#[utoipa::path(
    post,
    path = "/workers",
    tag = "workers",
    request_body = CreateWorkerBody,
    responses((status = 201, body = Envelope<CreatedWorker>)),
)]
#[tracing::instrument(skip_all, fields(workspace_id = caller.workspace_id))]
async fn create_worker(
    caller: Caller,
    State(state): State<AppState>,
    Json(body): Json<CreateWorkerBody>,
) -> Result<Envelope<CreatedWorker>> {
    caller.require(Permission::Write)?;
    let mut problems = Problems::default();
    let name = problems.parse(["name"], Name::try_from(body.name.as_str()));
    let description = optional_text(&mut problems, "description", body.description, 2000);
    let timezone = body
        .timezone
        .and_then(|tz| problems.parse(["timezone"], Timezone::try_from(tz.as_str())));
    problems.finish()?;
    let Some(name) = name else {
        return Err(ApiError::invalid_field(["name"], "is required"));
    };
    let created = workers::create(
        &state.db,
        caller.workspace_id,
        NewWorker {
            name: name.into_inner(),
            description,
            timezone: timezone.map(|tz| tz.name().to_owned()),
        },
        clock::now(),
    )
    .await?;
    Ok(Envelope::created(
        "Worker created successfully",
        CreatedWorker {
            worker_id: created.id,
            record: created.into(),
        },
    ))
}

/// List workers.
///
/// The workspace's workers, in pages.
#[utoipa::path(
    get,
    path = "/workers",
    tag = "workers",
    params(ListQuery),
    responses((status = 200, body = PageResponse<WorkerRecord>)),
)]
#[tracing::instrument(skip_all, fields(workspace_id = caller.workspace_id))]
async fn list_workers(
    caller: Caller,
    State(state): State<AppState>,
    Query(query): Query<ListQuery>,
) -> Result<PageResponse<WorkerRecord>> {
    caller.require(Permission::Read)?;
    let page = query.page()?;
    let paged = workers::list(&state.db, caller.workspace_id, page).await?;
    Ok(PageResponse::new(
        "Workers retrieved successfully",
        page,
        paged,
        WorkerRecord::from,
    ))
}

/// Read a worker.
///
/// With its timezone and description.
#[utoipa::path(
    get,
    path = "/workers/{worker_id}",
    tag = "workers",
    params(("worker_id" = String, Path, format = Uuid, description = "Worker id")),
    responses((status = 200, body = Envelope<WorkerRecord>)),
)]
#[tracing::instrument(skip_all, fields(workspace_id = caller.workspace_id, worker_id = %worker_id))]
async fn get_worker(
    caller: Caller,
    State(state): State<AppState>,
    Path(worker_id): Path<String>,
) -> Result<Envelope<WorkerRecord>> {
    caller.require(Permission::Read)?;
    let found = find_worker(&state, &caller, &worker_id).await?;
    Ok(Envelope::ok("Worker retrieved successfully", found.into()))
}

/// Delete a worker.
///
/// Its assistants go with it; the channels synced to it are left without a worker until another is
/// synced.
#[utoipa::path(
    delete,
    path = "/workers/{worker_id}",
    tag = "workers",
    params(("worker_id" = String, Path, format = Uuid, description = "Worker id")),
    responses((status = 200, body = Envelope<DeletedRecord>)),
)]
#[tracing::instrument(skip_all, fields(workspace_id = caller.workspace_id, worker_id = %worker_id))]
async fn delete_worker(
    caller: Caller,
    State(state): State<AppState>,
    Path(worker_id): Path<String>,
) -> Result<Envelope<DeletedRecord>> {
    caller.require(Permission::Write)?;
    let id = parse_uuid(&worker_id, "worker_id")?;
    if !state
        .actors
        .store()
        .delete_worker(caller.workspace_id, id)
        .await?
    {
        return Err(ApiError::NotFound("Worker"));
    }
    Ok(Envelope::ok(
        "Worker deleted successfully",
        DeletedRecord { id },
    ))
}
