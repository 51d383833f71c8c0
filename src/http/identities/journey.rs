//! What happens to an identity over time: `POST /identity/{id}/stage`,
//! `GET /identity/{id}/stages` (history) and `POST /identity/{id}/merge`.

use axum::extract::State;
use chrono::{DateTime, Utc};
use parley_actors::store::StoreError;
use parley_persistence::entities::identity_stage;
use parley_persistence::{clock, identities};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use uuid::Uuid;

use super::{IdentityRecord, record};
use crate::domain::Permission;
use crate::http::AppState;
use crate::http::auth::Caller;
use crate::http::envelope::Envelope;
use crate::http::error::{ApiError, Result};
use crate::http::extract::{Json, Path, Query};
use crate::http::lookup::find_identity;
use crate::http::pagination::{ListQuery, PageResponse};
use crate::http::validation::{Problems, object_or_empty};
use parley_actors::store::identities::StageRef;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub(crate) fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(set_identity_stage))
        .routes(routes!(list_identity_stages))
        .routes(routes!(merge_identity))
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
struct SetStageBody {
    /// A stage id or a stage name.
    #[schema(min_length = 1)]
    stage_id: String,
    #[schema(value_type = Option<Object>)]
    metadata: Option<Value>,
}

/// Move a person to a stage.
///
/// The move is kept in the person's stage history.
#[utoipa::path(
    post,
    path = "/identity/{identity_id}/stage",
    tag = "identities",
    params(("identity_id" = String, Path, description = "Identity: its id, or a path resolving to one (`external_id`, phone, e-mail)")),
    request_body = SetStageBody,
    responses((status = 200, body = Envelope<IdentityRecord>)),
)]
#[tracing::instrument(skip_all, fields(workspace_id = caller.workspace_id))]
async fn set_identity_stage(
    caller: Caller,
    State(state): State<AppState>,
    Path(identity_id): Path<String>,
    Json(body): Json<SetStageBody>,
) -> Result<Envelope<IdentityRecord>> {
    caller.require(Permission::Write)?;
    let mut problems = Problems::default();
    let metadata = object_or_empty(&mut problems, "metadata", body.metadata);
    if body.stage_id.trim().is_empty() {
        problems.add(["stage_id"], "must name a stage by id or name");
    }
    problems.finish()?;
    let ws = caller.workspace_id;
    let found = find_identity(&state.db, ws, &identity_id).await?;
    let stage = StageRef::parse(&body.stage_id);
    let set = state
        .actors
        .store()
        .set_stage(ws, found.id, &stage, metadata)
        .await
        .map_err(|error| match error {
            StoreError::NotFound("Stage") => ApiError::invalid_field(
                ["stage_id"],
                "names no stage of this workspace (by id or name)",
            ),
            error => error.into(),
        })?;
    let answer = record(&state.db, set.identity).await?;
    Ok(Envelope::ok("Identity stage updated successfully", answer))
}

/// One entry of the stage history.
#[derive(Debug, Serialize, utoipa::ToSchema)]
struct StageEntryRecord {
    id: Uuid,
    stage_id: Option<Uuid>,
    stage: String,
    metadata: Value,
    created_at: DateTime<Utc>,
}

impl From<identity_stage::Model> for StageEntryRecord {
    fn from(e: identity_stage::Model) -> Self {
        Self {
            id: e.id,
            stage_id: e.stage_id,
            stage: e.stage_name,
            metadata: e.metadata,
            created_at: e.created_at,
        }
    }
}

/// List a person's stage history.
///
/// Oldest first.
#[utoipa::path(
    get,
    path = "/identity/{identity_id}/stages",
    tag = "identities",
    params(("identity_id" = String, Path, description = "Identity: its id, or a path resolving to one (`external_id`, phone, e-mail)"), ListQuery),
    responses((status = 200, body = PageResponse<StageEntryRecord>)),
)]
#[tracing::instrument(skip_all, fields(workspace_id = caller.workspace_id))]
async fn list_identity_stages(
    caller: Caller,
    State(state): State<AppState>,
    Path(identity_id): Path<String>,
    Query(query): Query<ListQuery>,
) -> Result<PageResponse<StageEntryRecord>> {
    caller.require(Permission::Read)?;
    let page = query.page()?;
    let found = find_identity(&state.db, caller.workspace_id, &identity_id).await?;
    let paged = identities::stage_history(&state.db, found.id, page).await?;
    Ok(PageResponse::new(
        "Stage history retrieved successfully",
        page,
        paged,
        StageEntryRecord::from,
    ))
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
struct MergeBody {
    /// The identity merged into the path's one, addressed like any identity.
    #[schema(example = "crm-2")]
    source_id: String,
}

/// Merge two identities into one.
///
/// The source's phones, e-mails, memory and conversations move to this identity; the source is gone
/// afterwards.
#[utoipa::path(
    post,
    path = "/identity/{identity_id}/merge",
    tag = "identities",
    params(("identity_id" = String, Path, description = "Identity: its id, or a path resolving to one (`external_id`, phone, e-mail)")),
    request_body = MergeBody,
    responses((status = 200, body = Envelope<IdentityRecord>)),
)]
#[tracing::instrument(skip_all, fields(workspace_id = caller.workspace_id))]
async fn merge_identity(
    caller: Caller,
    State(state): State<AppState>,
    Path(identity_id): Path<String>,
    Json(body): Json<MergeBody>,
) -> Result<Envelope<IdentityRecord>> {
    caller.require(Permission::Write)?;
    let ws = caller.workspace_id;
    let txn = parley_persistence::begin_write(&state.db).await?;
    let target = find_identity(&txn, ws, &identity_id).await?;
    let source = find_identity(&txn, ws, &body.source_id).await?;
    if source.id == target.id {
        return Err(ApiError::invalid_field(
            ["source_id"],
            "must name another identity than the target",
        ));
    }
    // Concurrent merges of one source: the first holds the rows, the others find the source
    // gone once it commits.
    let locked = identities::lock(&txn, ws, &[target.id, source.id]).await?;
    let find = |id: uuid::Uuid| locked.iter().find(|i| i.id == id).cloned();
    let (Some(target), Some(source)) = (find(target.id), find(source.id)) else {
        return Err(ApiError::NotFound("Identity"));
    };
    let source_id = source.id;
    let target_id = target.id;
    let merged = identities::merge(&txn, target, source, clock::now()).await?;
    let answer = record(&txn, merged).await?;
    let store = state.actors.store();
    store
        .commit_identities(txn, ws, &[source_id, target_id])
        .await?;
    tracing::info!(%source_id, "identity merged");
    Ok(Envelope::ok("Identities merged successfully", answer))
}
