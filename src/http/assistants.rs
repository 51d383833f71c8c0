//! Assistants: `POST /workers/{id}/assistants`, `GET`, `PATCH` and `DELETE /assistant/{id}`.

use axum::extract::State;
use chrono::{DateTime, Utc};
use parley_persistence::assistants;
use parley_persistence::entities::assistant;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use uuid::Uuid;

use crate::domain::Permission;
use crate::http::AppState;
use crate::http::auth::Caller;
use crate::http::envelope::{DeletedRecord, Envelope};
use crate::http::error::{ApiError, Result};
use crate::http::extract::{Json, Path, Query};
use crate::http::lookup::find_worker;
use crate::http::pagination::{ListQuery, PageResponse};
use crate::http::validation::{Problems, parse_uuid, present};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

mod input;

use self::input::AssistantInput;

/// The only provider the specification supports.
const PROVIDER_ONE: &str = "PROVIDER_ONE";
/// Longest model name.
const MAX_MODEL_CHARS: usize = 200;

pub(crate) fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_assistants, create_assistant))
        .routes(routes!(get_assistant, update_assistant, delete_assistant))
}

/// An assistant as the API shows it.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub(crate) struct AssistantRecord {
    id: Uuid,
    worker_id: Uuid,
    name: String,
    instructions: String,
    languages: Value,
    provider: String,
    model: Option<String>,
    settings: Value,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
}

impl From<assistant::Model> for AssistantRecord {
    fn from(a: assistant::Model) -> Self {
        Self {
            id: a.id,
            worker_id: a.worker_id,
            name: a.name,
            instructions: a.instructions,
            languages: a.languages,
            provider: a.provider,
            model: a.model,
            settings: a.settings,
            created_at: a.created_at,
            updated_at: a.updated_at,
        }
    }
}

/// The create answer: the specification's `assistant_id` beside the record.
#[derive(Debug, Serialize, utoipa::ToSchema)]
struct CreatedAssistant {
    assistant_id: Uuid,
    #[serde(flatten)]
    record: AssistantRecord,
}

crate::http::openapi::string_schema!(
    /// An ISO 639-1 language with an optional region: `pt` or `pt-BR`.
    LanguageCode, pattern = "^[a-z]{2}(-[A-Z]{2})?$", example = "pt-BR"
);

#[derive(Debug, Deserialize, utoipa::ToSchema)]
struct CreateAssistantBody {
    #[schema(min_length = 1, max_length = 100)]
    name: String,
    #[schema(min_length = 1, max_length = 32768)]
    instructions: String,
    #[schema(value_type = Option<Vec<LanguageCode>>)]
    languages: Option<Vec<String>>,
    #[schema(value_type = Option<String>, pattern = "^PROVIDER_ONE$", example = "PROVIDER_ONE")]
    provider: Option<String>,
    #[schema(value_type = Option<String>, min_length = 1, max_length = 200)]
    model: Option<String>,
    #[schema(value_type = Option<Object>)]
    settings: Option<Value>,
}

/// List a worker's assistants.
///
/// Oldest first, in pages.
#[utoipa::path(
    get,
    path = "/workers/{worker_id}/assistants",
    tag = "assistants",
    params(("worker_id" = String, Path, format = Uuid, description = "Worker id"), ListQuery),
    responses((status = 200, body = PageResponse<AssistantRecord>)),
)]
#[tracing::instrument(skip_all, fields(workspace_id = caller.workspace_id, worker_id = %worker_id))]
async fn list_assistants(
    caller: Caller,
    State(state): State<AppState>,
    Path(worker_id): Path<String>,
    Query(query): Query<ListQuery>,
) -> Result<PageResponse<AssistantRecord>> {
    caller.require(Permission::Read)?;
    let page = query.page()?;
    let worker = find_worker(&state, &caller, &worker_id).await?;
    let paged =
        assistants::page_for_worker(&state.db, caller.workspace_id, worker.id, page).await?;
    Ok(PageResponse::new(
        "Assistants retrieved successfully",
        page,
        paged,
        AssistantRecord::from,
    ))
}

/// Create an assistant for a worker.
///
/// Its instructions, model and languages; MCP servers are attached separately.
#[utoipa::path(
    post,
    path = "/workers/{worker_id}/assistants",
    tag = "assistants",
    params(("worker_id" = String, Path, format = Uuid, description = "Worker id")),
    request_body = CreateAssistantBody,
    responses((status = 201, body = Envelope<CreatedAssistant>)),
)]
#[tracing::instrument(skip_all, fields(workspace_id = caller.workspace_id, worker_id = %worker_id))]
async fn create_assistant(
    caller: Caller,
    State(state): State<AppState>,
    Path(worker_id): Path<String>,
    Json(body): Json<CreateAssistantBody>,
) -> Result<Envelope<CreatedAssistant>> {
    caller.require(Permission::Write)?;
    let worker = find_worker(&state, &caller, &worker_id).await?;
    let mut problems = Problems::default();
    let fields = AssistantInput {
        name: Some(body.name),
        instructions: Some(body.instructions),
        languages: Some(body.languages.unwrap_or_default()),
        provider: Some(body.provider.unwrap_or_else(|| PROVIDER_ONE.to_owned())),
        model: Some(body.model),
        settings: body.settings,
    }
    .into_fields(&mut problems, None);
    problems.finish()?;
    let fields = fields.ok_or_else(|| ApiError::invalid_field(["name"], "is required"))?;
    let created = state
        .actors
        .store()
        .create_assistant(caller.workspace_id, worker.id, fields)
        .await?;
    Ok(Envelope::created(
        "Assistant created successfully",
        CreatedAssistant {
            assistant_id: created.id,
            record: created.into(),
        },
    ))
}

/// Read an assistant.
///
/// Its instructions, model, languages and settings.
#[utoipa::path(
    get,
    path = "/assistant/{assistant_id}",
    tag = "assistants",
    params(("assistant_id" = String, Path, format = Uuid, description = "Assistant id")),
    responses((status = 200, body = Envelope<AssistantRecord>)),
)]
#[tracing::instrument(skip_all, fields(workspace_id = caller.workspace_id, assistant_id = %assistant_id))]
async fn get_assistant(
    caller: Caller,
    State(state): State<AppState>,
    Path(assistant_id): Path<String>,
) -> Result<Envelope<AssistantRecord>> {
    caller.require(Permission::Read)?;
    let found = find_assistant(&state, &caller, &assistant_id).await?;
    Ok(Envelope::ok(
        "Assistant retrieved successfully",
        found.into(),
    ))
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
struct UpdateAssistantBody {
    #[schema(value_type = Option<String>, min_length = 1, max_length = 100)]
    name: Option<String>,
    #[schema(value_type = Option<String>, min_length = 1, max_length = 32768)]
    instructions: Option<String>,
    #[schema(value_type = Option<Vec<LanguageCode>>)]
    languages: Option<Vec<String>>,
    #[schema(value_type = Option<String>, pattern = "^PROVIDER_ONE$", example = "PROVIDER_ONE")]
    provider: Option<String>,
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<String>, min_length = 1, max_length = 200)]
    model: Option<Option<String>>,
    #[schema(value_type = Option<Object>)]
    settings: Option<Value>,
}

/// Change an assistant.
///
/// Only the fields given change.
#[utoipa::path(
    patch,
    path = "/assistant/{assistant_id}",
    tag = "assistants",
    params(("assistant_id" = String, Path, format = Uuid, description = "Assistant id")),
    request_body = UpdateAssistantBody,
    responses((status = 200, body = Envelope<AssistantRecord>)),
)]
#[tracing::instrument(skip_all, fields(workspace_id = caller.workspace_id, assistant_id = %assistant_id))]
async fn update_assistant(
    caller: Caller,
    State(state): State<AppState>,
    Path(assistant_id): Path<String>,
    Json(body): Json<UpdateAssistantBody>,
) -> Result<Envelope<AssistantRecord>> {
    caller.require(Permission::Write)?;
    let current = find_assistant(&state, &caller, &assistant_id).await?;
    let mut problems = Problems::default();
    let fields = AssistantInput {
        name: body.name,
        instructions: body.instructions,
        languages: body.languages,
        provider: body.provider,
        model: body.model,
        settings: body.settings,
    }
    .into_fields(&mut problems, Some(&current));
    problems.finish()?;
    let fields = fields.ok_or_else(|| ApiError::invalid(Vec::new()))?;
    let updated = state
        .actors
        .store()
        .update_assistant(current, fields)
        .await?;
    Ok(Envelope::ok(
        "Assistant updated successfully",
        updated.into(),
    ))
}

/// Delete an assistant.
///
/// Its MCP servers are detached; its conversations stay.
#[utoipa::path(
    delete,
    path = "/assistant/{assistant_id}",
    tag = "assistants",
    params(("assistant_id" = String, Path, format = Uuid, description = "Assistant id")),
    responses((status = 200, body = Envelope<DeletedRecord>)),
)]
#[tracing::instrument(skip_all, fields(workspace_id = caller.workspace_id, assistant_id = %assistant_id))]
async fn delete_assistant(
    caller: Caller,
    State(state): State<AppState>,
    Path(assistant_id): Path<String>,
) -> Result<Envelope<DeletedRecord>> {
    caller.require(Permission::Write)?;
    let id = parse_uuid(&assistant_id, "assistant_id")?;
    if !state
        .actors
        .store()
        .delete_assistant(caller.workspace_id, id)
        .await?
    {
        return Err(ApiError::NotFound("Assistant"));
    }
    Ok(Envelope::ok(
        "Assistant deleted successfully",
        DeletedRecord { id },
    ))
}

async fn find_assistant(state: &AppState, caller: &Caller, raw: &str) -> Result<assistant::Model> {
    let id = parse_uuid(raw, "assistant_id")?;
    assistants::find(&state.db, caller.workspace_id, id)
        .await?
        .ok_or(ApiError::NotFound("Assistant"))
}
