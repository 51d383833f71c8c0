//! Workspaces: `POST /workspace`, `PATCH /workspace/{id}`, `GET /workspace`,
//! `GET /workspace/{id}`. A caller sees the workspaces of its business that its user belongs to.

use axum::extract::State;
use chrono::{DateTime, Utc};
use parley_persistence::PersistenceError;
use parley_persistence::clock;
use parley_persistence::entities::workspace;
use parley_persistence::workspaces::{self, WorkspaceChanges};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::domain::{Name, Permission};
use crate::http::AppState;
use crate::http::auth::Caller;
use crate::http::envelope::Envelope;
use crate::http::error::{ApiError, Result};
use crate::http::extract::{Json, Path, Query};
use crate::http::lookup::accessible_workspace;
use crate::http::pagination::{ListQuery, PageResponse};
use crate::http::validation::{Problems, present};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

/// Longest accepted description, in characters.
const MAX_DESCRIPTION_CHARS: usize = 2000;

pub(crate) fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_workspaces, create_workspace))
        .routes(routes!(get_workspace, update_workspace))
}

/// A workspace as the API shows it.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub(crate) struct WorkspaceRecord {
    id: i64,
    name: String,
    description: Option<String>,
    business_id: Uuid,
    /// Days its media files are kept (0: kept); null: the installation's `media.retention_days`.
    media_retention_days: Option<i32>,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
}

impl From<workspace::Model> for WorkspaceRecord {
    fn from(w: workspace::Model) -> Self {
        Self {
            id: w.id,
            name: w.name,
            description: w.description,
            business_id: w.business_id,
            media_retention_days: w.media_retention_days,
            created_at: w.created_at,
            updated_at: w.updated_at,
        }
    }
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
struct CreateWorkspaceBody {
    #[schema(min_length = 1, max_length = 100)]
    name: String,
    #[schema(value_type = Option<String>, max_length = 2000)]
    description: Option<String>,
}

/// Create a workspace.
///
/// A tenant of its own: channels, workers, identities and keys are never shared between workspaces.
/// Needs an admin key.
#[utoipa::path(
    post,
    path = "/workspace",
    tag = "workspaces",
    request_body = CreateWorkspaceBody,
    responses((status = 201, body = Envelope<WorkspaceRecord>)),
)]
#[tracing::instrument(skip_all, fields(workspace_id = caller.workspace_id))]
async fn create_workspace(
    caller: Caller,
    State(state): State<AppState>,
    Json(body): Json<CreateWorkspaceBody>,
) -> Result<Envelope<WorkspaceRecord>> {
    caller.require(Permission::Admin)?;
    let mut problems = Problems::default();
    let name = problems.parse(["name"], Name::try_from(body.name.as_str()));
    let description = parse_description(body.description, &mut problems);
    problems.finish()?;
    let name = name.ok_or_else(|| ApiError::invalid_field(["name"], "is required"))?;

    let txn = parley_persistence::begin_write(&state.db).await?;
    let created = workspaces::create_with_owner(
        &txn,
        caller.business_id,
        caller.user_id,
        name.as_str(),
        description.as_deref(),
        clock::now(),
    )
    .await
    .map_err(|e| workspace_name_taken(e, &name))?;
    txn.commit().await.map_err(PersistenceError::from)?;
    tracing::info!(new_workspace_id = created.id, "workspace created");
    Ok(Envelope::created(
        "Workspace created successfully",
        created.into(),
    ))
}

/// List the workspaces the key reaches.
///
/// The workspaces of the key's user.
#[utoipa::path(
    get,
    path = "/workspace",
    tag = "workspaces",
    params(ListQuery),
    responses((status = 200, body = PageResponse<WorkspaceRecord>)),
)]
#[tracing::instrument(skip_all, fields(workspace_id = caller.workspace_id))]
async fn list_workspaces(
    caller: Caller,
    State(state): State<AppState>,
    Query(query): Query<ListQuery>,
) -> Result<PageResponse<WorkspaceRecord>> {
    caller.require(Permission::Read)?;
    let page = query.page()?;
    let paged =
        workspaces::list_for_member(&state.db, caller.business_id, caller.user_id, page).await?;
    Ok(PageResponse::new(
        "Workspaces retrieved successfully",
        page,
        paged,
        WorkspaceRecord::from,
    ))
}

/// Read a workspace.
///
/// One of the key's workspaces.
#[utoipa::path(
    get,
    path = "/workspace/{workspace_id}",
    tag = "workspaces",
    params(("workspace_id" = String, Path, description = "Workspace id", pattern = "^[0-9]+$", example = "1")),
    responses((status = 200, body = Envelope<WorkspaceRecord>)),
)]
#[tracing::instrument(skip_all, fields(workspace_id = caller.workspace_id))]
async fn get_workspace(
    caller: Caller,
    State(state): State<AppState>,
    Path(workspace_id): Path<String>,
) -> Result<Envelope<WorkspaceRecord>> {
    caller.require(Permission::Read)?;
    let found = accessible_workspace(&state, &caller, &workspace_id).await?;
    Ok(Envelope::ok(
        "Workspace retrieved successfully",
        found.into(),
    ))
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
struct UpdateWorkspaceBody {
    #[schema(value_type = Option<String>, min_length = 1, max_length = 100)]
    name: Option<String>,
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<String>, max_length = 2000)]
    description: Option<Option<String>>,
    /// Days the workspace's media files are kept after their message (0: kept); null returns
    /// to the installation's `media.retention_days`.
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<i32>, minimum = 0, maximum = 36500)]
    media_retention_days: Option<Option<serde_json::Value>>,
}

/// Longest media retention a workspace may set, in days (a hundred years).
const MAX_RETENTION_DAYS: i64 = 36_500;

/// Rename or describe a workspace, or set how long its media is kept.
///
/// Its name, description and media retention. Needs an admin key.
#[utoipa::path(
    patch,
    path = "/workspace/{workspace_id}",
    tag = "workspaces",
    params(("workspace_id" = String, Path, description = "Workspace id", pattern = "^[0-9]+$", example = "1")),
    request_body = UpdateWorkspaceBody,
    responses((status = 200, body = Envelope<WorkspaceRecord>)),
)]
#[tracing::instrument(skip_all, fields(workspace_id = caller.workspace_id))]
async fn update_workspace(
    caller: Caller,
    State(state): State<AppState>,
    Path(workspace_id): Path<String>,
    Json(body): Json<UpdateWorkspaceBody>,
) -> Result<Envelope<WorkspaceRecord>> {
    caller.require(Permission::Admin)?;
    let current = accessible_workspace(&state, &caller, &workspace_id).await?;
    let mut problems = Problems::default();
    let name = body
        .name
        .as_deref()
        .and_then(|n| problems.parse(["name"], Name::try_from(n)));
    let description = body
        .description
        .map(|d| parse_description(d, &mut problems));
    let media_retention_days = body
        .media_retention_days
        .map(|days| parse_retention(days, &mut problems));
    problems.finish()?;
    let changes = WorkspaceChanges {
        name: name.clone().map(Name::into_inner),
        description,
        media_retention_days,
    };
    let updated = workspaces::update(&state.db, current, changes, clock::now())
        .await
        .map_err(|e| match &name {
            Some(name) => workspace_name_taken(e, name),
            None => e.into(),
        })?;
    Ok(Envelope::ok(
        "Workspace updated successfully",
        updated.into(),
    ))
}

/// A description kept as written, bounded in length.
fn parse_description(raw: Option<String>, problems: &mut Problems) -> Option<String> {
    let text = raw?;
    if text.chars().count() > MAX_DESCRIPTION_CHARS {
        problems.add(
            ["description"],
            format!("must be at most {MAX_DESCRIPTION_CHARS} characters"),
        );
    }
    Some(text)
}

/// Whole days from 0 to a hundred years, or null.
fn parse_retention(raw: Option<serde_json::Value>, problems: &mut Problems) -> Option<i32> {
    let raw = raw?;
    match raw
        .as_i64()
        .filter(|d| (0..=MAX_RETENTION_DAYS).contains(d))
    {
        Some(days) => i32::try_from(days).ok(),
        None => {
            problems.add(
                ["media_retention_days"],
                format!("must be a whole number of days from 0 to {MAX_RETENTION_DAYS}, or null"),
            );
            None
        }
    }
}

fn workspace_name_taken(error: PersistenceError, name: &Name) -> ApiError {
    let message = format!(
        "A workspace named '{}' already exists in this business",
        name.as_str()
    );
    ApiError::unique(error, message)
}
