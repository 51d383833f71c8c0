//! Stages: `GET /stages`, `POST /stages`, `GET|PUT|DELETE /stages/{id}`. Names are 3 to 100
//! characters and unique in the workspace (409 on a duplicate).

use axum::extract::State;
use chrono::{DateTime, Utc};
use parley_persistence::PersistenceError;
use parley_persistence::entities::stage;
use parley_persistence::stages::{self, StageChanges};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use uuid::Uuid;

use crate::domain::{LongName, Permission};
use crate::http::AppState;
use crate::http::auth::Caller;
use crate::http::envelope::{DeletedRecord, Envelope};
use crate::http::error::{ApiError, Result};
use crate::http::extract::{Json, Path, Query};
use crate::http::pagination::{ListQuery, PageResponse};
use crate::http::validation::{Problems, object_or_empty, optional_text, parse_uuid, present};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub(crate) fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_stages, create_stage))
        .routes(routes!(get_stage, update_stage, delete_stage))
}

/// A stage as the API shows it.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub(crate) struct StageRecord {
    id: Uuid,
    name: String,
    description: Option<String>,
    metadata: Value,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
}

impl From<stage::Model> for StageRecord {
    fn from(s: stage::Model) -> Self {
        Self {
            id: s.id,
            name: s.name,
            description: s.description,
            metadata: s.metadata,
            created_at: s.created_at,
            updated_at: s.updated_at,
        }
    }
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
struct CreateStageBody {
    #[schema(min_length = 3, max_length = 100)]
    name: String,
    #[schema(value_type = Option<String>)]
    description: Option<String>,
    #[schema(value_type = Option<Object>)]
    metadata: Option<Value>,
}

/// Create a journey stage.
///
/// A stage's instructions join the assistant's when a person is at that stage.
#[utoipa::path(
    post,
    path = "/stages",
    tag = "stages",
    request_body = CreateStageBody,
    responses((status = 201, body = Envelope<StageRecord>)),
)]
#[tracing::instrument(skip_all, fields(workspace_id = caller.workspace_id))]
async fn create_stage(
    caller: Caller,
    State(state): State<AppState>,
    Json(body): Json<CreateStageBody>,
) -> Result<Envelope<StageRecord>> {
    caller.require(Permission::Write)?;
    let mut problems = Problems::default();
    let name = problems.parse(["name"], LongName::try_from(body.name.as_str()));
    let description = optional_text(&mut problems, "description", body.description, 2000);
    let metadata = object_or_empty(&mut problems, "metadata", body.metadata);
    problems.finish()?;
    let name = name.ok_or_else(|| ApiError::invalid_field(["name"], "is required"))?;
    let created = state
        .actors
        .store()
        .create_stage(caller.workspace_id, name.as_str(), description, metadata)
        .await
        .map_err(|e| stage_name_taken(e, &name))?;
    Ok(Envelope::created(
        "Stage created successfully",
        created.into(),
    ))
}

/// List journey stages.
///
/// The workspace's journey stages, in pages.
#[utoipa::path(
    get,
    path = "/stages",
    tag = "stages",
    params(ListQuery),
    responses((status = 200, body = PageResponse<StageRecord>)),
)]
#[tracing::instrument(skip_all, fields(workspace_id = caller.workspace_id))]
async fn list_stages(
    caller: Caller,
    State(state): State<AppState>,
    Query(query): Query<ListQuery>,
) -> Result<PageResponse<StageRecord>> {
    caller.require(Permission::Read)?;
    let page = query.page()?;
    let paged = stages::list(&state.db, caller.workspace_id, page).await?;
    Ok(PageResponse::new(
        "Stages retrieved successfully",
        page,
        paged,
        StageRecord::from,
    ))
}

/// Read a journey stage.
///
/// With its instructions.
#[utoipa::path(
    get,
    path = "/stages/{stage_id}",
    tag = "stages",
    params(("stage_id" = String, Path, format = Uuid, description = "Stage id")),
    responses((status = 200, body = Envelope<StageRecord>)),
)]
#[tracing::instrument(skip_all, fields(workspace_id = caller.workspace_id, stage_id = %stage_id))]
async fn get_stage(
    caller: Caller,
    State(state): State<AppState>,
    Path(stage_id): Path<String>,
) -> Result<Envelope<StageRecord>> {
    caller.require(Permission::Read)?;
    let found = find_stage(&state, &caller, &stage_id).await?;
    Ok(Envelope::ok("Stage retrieved successfully", found.into()))
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
struct UpdateStageBody {
    #[schema(value_type = Option<String>, min_length = 3, max_length = 100)]
    name: Option<String>,
    #[serde(default, deserialize_with = "present")]
    description: Option<Option<String>>,
    #[schema(value_type = Option<Object>)]
    metadata: Option<Value>,
}

/// Change a journey stage.
///
/// Its name, description and instructions.
#[utoipa::path(
    put,
    path = "/stages/{stage_id}",
    tag = "stages",
    params(("stage_id" = String, Path, format = Uuid, description = "Stage id")),
    request_body = UpdateStageBody,
    responses((status = 200, body = Envelope<StageRecord>)),
)]
#[tracing::instrument(skip_all, fields(workspace_id = caller.workspace_id, stage_id = %stage_id))]
async fn update_stage(
    caller: Caller,
    State(state): State<AppState>,
    Path(stage_id): Path<String>,
    Json(body): Json<UpdateStageBody>,
) -> Result<Envelope<StageRecord>> {
    caller.require(Permission::Write)?;
    let current = find_stage(&state, &caller, &stage_id).await?;
    let mut problems = Problems::default();
    let name = body
        .name
        .and_then(|n| problems.parse(["name"], LongName::try_from(n.as_str())));
    let description = body
        .description
        .map(|d| optional_text(&mut problems, "description", d, 2000));
    let metadata = body
        .metadata
        .map(|m| object_or_empty(&mut problems, "metadata", Some(m)));
    problems.finish()?;
    let changes = StageChanges {
        name: name.clone().map(LongName::into_inner),
        description,
        metadata,
    };
    let updated = state
        .actors
        .store()
        .update_stage(current, changes)
        .await
        .map_err(|e| match &name {
            Some(name) => stage_name_taken(e, name),
            None => e.into(),
        })?;
    Ok(Envelope::ok("Stage updated successfully", updated.into()))
}

/// Delete a journey stage.
///
/// The people at it are left without a stage; their stage history stays.
#[utoipa::path(
    delete,
    path = "/stages/{stage_id}",
    tag = "stages",
    params(("stage_id" = String, Path, format = Uuid, description = "Stage id")),
    responses((status = 200, body = Envelope<DeletedRecord>)),
)]
#[tracing::instrument(skip_all, fields(workspace_id = caller.workspace_id, stage_id = %stage_id))]
async fn delete_stage(
    caller: Caller,
    State(state): State<AppState>,
    Path(stage_id): Path<String>,
) -> Result<Envelope<DeletedRecord>> {
    caller.require(Permission::Write)?;
    let id = parse_uuid(&stage_id, "stage_id")?;
    if !state
        .actors
        .store()
        .delete_stage(caller.workspace_id, id)
        .await?
    {
        return Err(ApiError::NotFound("Stage"));
    }
    Ok(Envelope::ok(
        "Stage deleted successfully",
        DeletedRecord { id },
    ))
}

async fn find_stage(state: &AppState, caller: &Caller, raw: &str) -> Result<stage::Model> {
    let id = parse_uuid(raw, "stage_id")?;
    stages::find(&state.db, caller.workspace_id, id)
        .await?
        .ok_or(ApiError::NotFound("Stage"))
}

fn stage_name_taken(error: PersistenceError, name: &LongName) -> ApiError {
    let message = format!(
        "A stage named '{}' already exists in this workspace",
        name.as_str()
    );
    ApiError::unique(error, message)
}
