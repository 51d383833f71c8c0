//! API keys: `POST /workspace/api-keys` (answers the secret once), `GET /workspace/api-keys`,
//! `DELETE /workspace/api-keys/{key_id}` (revokes at once). All need the `admin` permission.

use axum::extract::State;
use chrono::{DateTime, Utc};
use parley_persistence::api_keys;
use parley_persistence::clock;
use parley_persistence::entities::api_key;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use uuid::Uuid;

use crate::domain::{Name, Permission, Permissions};
use crate::http::AppState;
use crate::http::auth::Caller;
use crate::http::envelope::Envelope;
use crate::http::error::{ApiError, PathSegment, Result};
use crate::http::extract::{Json, Path, Query};
use crate::http::lookup::accessible_workspace;
use crate::http::pagination::{PageResponse, page_from};
use crate::http::validation::Problems;
use crate::tenancy::issue_api_key;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub(crate) fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_api_keys, create_api_key))
        .routes(routes!(revoke_api_key))
}

/// A key as the API shows it; `key` is present only in the create answer.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub(crate) struct ApiKeyRecord {
    id: Uuid,
    name: String,
    permissions: Vec<&'static str>,
    workspace_id: i64,
    created_at: DateTime<Utc>,
    last_used_at: Option<DateTime<Utc>>,
    expires_at: Option<DateTime<Utc>>,
    revoked_at: Option<DateTime<Utc>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    key: Option<String>,
}

impl From<api_key::Model> for ApiKeyRecord {
    fn from(k: api_key::Model) -> Self {
        Self {
            id: k.id,
            name: k.name,
            permissions: Permissions::from_storage(&k.permissions).names(),
            workspace_id: k.workspace_id,
            created_at: k.created_at,
            last_used_at: k.last_used_at,
            expires_at: k.expires_at,
            revoked_at: k.revoked_at,
            key: None,
        }
    }
}

crate::http::openapi::string_schema!(
    /// A permission: `read` (GET), `write` (other methods), `admin` (workspaces and keys;
    /// implies the other two).
    KeyPermission, one_of = Permission::ALL.map(Permission::as_str)
);

#[derive(Debug, Deserialize, utoipa::ToSchema)]
struct CreateApiKeyBody {
    #[schema(min_length = 1, max_length = 100)]
    name: String,
    #[schema(value_type = Vec<KeyPermission>, min_items = 1)]
    permissions: Vec<String>,
    /// A number or a numeric string; checked by hand to name the field in the error.
    #[schema(value_type = String, pattern = "^[0-9]+$", example = "1")]
    workspace_id: Value,
    #[schema(value_type = Option<chrono::DateTime<Utc>>, example = "2030-01-01T00:00:00Z")]
    expires_at: Option<DateTime<Utc>>,
}

/// Create an API key.
///
/// The answer carries the key itself (`prl_…`) once; store it then. Permissions: `read`, `write`,
/// `admin`.
#[utoipa::path(
    post,
    path = "/workspace/api-keys",
    tag = "api-keys",
    request_body = CreateApiKeyBody,
    responses((status = 201, body = Envelope<ApiKeyRecord>)),
)]
#[tracing::instrument(skip_all, fields(workspace_id = caller.workspace_id))]
async fn create_api_key(
    caller: Caller,
    State(state): State<AppState>,
    Json(body): Json<CreateApiKeyBody>,
) -> Result<Envelope<ApiKeyRecord>> {
    caller.require(Permission::Admin)?;
    let mut problems = Problems::default();
    let name = problems.parse(["name"], Name::try_from(body.name.as_str()));
    let permissions = parse_permissions(&body.permissions, &mut problems);
    let target = match &body.workspace_id {
        Value::Number(n) => n.as_i64().map(|id| id.to_string()),
        Value::String(s) => Some(s.clone()),
        _ => None,
    };
    if target.is_none() {
        problems.add(["workspace_id"], "must be a number or a numeric string");
    }
    if body.expires_at.is_some_and(|at| at <= clock::now()) {
        problems.add(["expires_at"], "must be in the future");
    }
    problems.finish()?;
    let (Some(name), Some(target)) = (name, target) else {
        return Err(ApiError::invalid_field(["name"], "is required"));
    };

    let workspace = accessible_workspace(&state, &caller, &target).await?;
    let (stored, secret) = issue_api_key(
        &state.db,
        workspace.id,
        caller.user_id,
        &name,
        &permissions,
        body.expires_at,
    )
    .await?;
    tracing::info!(new_api_key_id = %stored.id, target_workspace_id = workspace.id, "API key created");
    let mut record = ApiKeyRecord::from(stored);
    record.key = Some(secret.expose().to_owned());
    Ok(Envelope::created("API key created successfully", record))
}

fn parse_permissions(raw: &[String], problems: &mut Problems) -> Permissions {
    if raw.is_empty() {
        problems.add(
            ["permissions"],
            "must list at least one of read, write, admin",
        );
    }
    raw.iter()
        .enumerate()
        .filter_map(|(index, name)| {
            let path = [PathSegment::from("permissions"), PathSegment::from(index)];
            problems.parse(path, name.parse::<Permission>())
        })
        .collect()
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
struct ListApiKeysQuery {
    #[param(value_type = Option<String>, pattern = "^[0-9]+$", example = "1")]
    workspace_id: Option<String>,
    #[param(minimum = 1, maximum = 1_000_000_000_000_000_u64, default = 1)]
    page: Option<u64>,
    #[param(minimum = 1, maximum = 100)]
    limit: Option<u64>,
}

/// List API keys.
///
/// The keys of a workspace, oldest first; a key itself is shown only once, when it is created.
#[utoipa::path(
    get,
    path = "/workspace/api-keys",
    tag = "api-keys",
    params(ListApiKeysQuery),
    responses((status = 200, body = PageResponse<ApiKeyRecord>)),
)]
#[tracing::instrument(skip_all, fields(workspace_id = caller.workspace_id))]
async fn list_api_keys(
    caller: Caller,
    State(state): State<AppState>,
    Query(query): Query<ListApiKeysQuery>,
) -> Result<PageResponse<ApiKeyRecord>> {
    caller.require(Permission::Admin)?;
    let page = page_from(query.page, query.limit)?;
    let workspace_id = match query.workspace_id {
        Some(raw) => accessible_workspace(&state, &caller, &raw).await?.id,
        None => caller.workspace_id,
    };
    let paged = api_keys::list_for_workspace(&state.db, workspace_id, page).await?;
    Ok(PageResponse::new(
        "API keys retrieved successfully",
        page,
        paged,
        ApiKeyRecord::from,
    ))
}

/// Revoke an API key.
///
/// The key stops working at once.
#[utoipa::path(
    delete,
    path = "/workspace/api-keys/{key_id}",
    tag = "api-keys",
    params(("key_id" = String, Path, format = Uuid, description = "API key id")),
    responses((status = 200, body = Envelope<ApiKeyRecord>)),
)]
#[tracing::instrument(skip_all, fields(workspace_id = caller.workspace_id))]
async fn revoke_api_key(
    caller: Caller,
    State(state): State<AppState>,
    Path(key_id): Path<String>,
) -> Result<Envelope<ApiKeyRecord>> {
    caller.require(Permission::Admin)?;
    let key_id = Uuid::parse_str(&key_id)
        .map_err(|_| ApiError::invalid_field(["key_id"], "must be a UUID"))?;
    let key = api_keys::find_by_id(&state.db, key_id)
        .await?
        .ok_or(ApiError::NotFound("API key"))?;
    // A key of a workspace the caller cannot reach does not exist for the caller.
    accessible_workspace(&state, &caller, &key.workspace_id.to_string())
        .await
        .map_err(|e| match e {
            ApiError::Forbidden(_) => ApiError::NotFound("API key"),
            ApiError::NotFound(_) => ApiError::NotFound("API key"),
            other => other,
        })?;
    let revoked = api_keys::revoke(&state.db, key, clock::now()).await?;
    // Every node's remembered keys forget it (this one's among them).
    state
        .actors
        .changes()
        .announce(&parley_actors::Change::KeyRevoked {
            workspace_id: revoked.workspace_id,
            key_id: revoked.id,
        });
    tracing::info!(revoked_api_key_id = %revoked.id, "API key revoked");
    Ok(Envelope::ok("API key revoked successfully", revoked.into()))
}
