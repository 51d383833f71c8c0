//! Template campaigns (camelCase): `POST|GET /campaigns`, `GET|PATCH|DELETE /campaigns/{uid}`.
//! A campaign names a channel's template at Meta and how its parameters are filled; flows send
//! it. Creating or changing one checks the template at Meta and every parameter expression.

use axum::extract::State;
use chrono::{DateTime, Utc};
use parley_persistence::campaigns::{self, CampaignFilter};
use parley_persistence::entities::campaign;
use parley_persistence::{CampaignStatus, ParamsStrategy, clock};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use uuid::Uuid;

use crate::domain::Permission;
use crate::http::AppState;
use crate::http::auth::Caller;
use crate::http::envelope::Envelope;
use crate::http::error::{ApiError, Result};
use crate::http::extract::{Json, Path, Query};
use crate::http::lookup::find_campaign;
use crate::http::lookup::find_channel;
use crate::http::pagination::{CursorResponse, cursor_from};
use crate::http::validation::{Problems, uuid_of};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

mod template;
mod wanted;

use self::template::check_template;
use self::wanted::{CampaignBody, NewCampaignBody, Wanted};

pub(crate) fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_campaigns, create_campaign))
        .routes(routes!(get_campaign, update_campaign, delete_campaign))
}

/// A campaign as the API shows it.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct CampaignRecord {
    uid: Uuid,
    workspace_id: i64,
    channel_uid: Uuid,
    name: String,
    description: Option<Value>,
    status: CampaignStatus,
    template_name: String,
    template_language: String,
    template_params_strategy: ParamsStrategy,
    template_parameters: Value,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
}

impl From<campaign::Model> for CampaignRecord {
    fn from(c: campaign::Model) -> Self {
        Self {
            uid: c.id,
            workspace_id: c.workspace_id,
            channel_uid: c.channel_id,
            name: c.name,
            description: c.description,
            status: c.status,
            template_name: c.template_name,
            template_language: c.template_language,
            template_params_strategy: c.params_strategy,
            template_parameters: c.template_parameters,
            created_at: c.created_at,
            updated_at: c.updated_at,
        }
    }
}

/// Create a template campaign.
///
/// An approved template of a channel, and where each of its parameters comes from for each person.
#[utoipa::path(
    post,
    path = "/campaigns",
    tag = "campaigns",
    request_body = NewCampaignBody,
    responses((status = 201, body = Envelope<CampaignRecord>)),
)]
#[tracing::instrument(skip_all, fields(workspace_id = caller.workspace_id))]
async fn create_campaign(
    caller: Caller,
    State(state): State<AppState>,
    Json(body): Json<CampaignBody>,
) -> Result<Envelope<CampaignRecord>> {
    caller.require(Permission::Write)?;
    let Some(raw_channel) = body.channel_uid.as_deref() else {
        return Err(ApiError::invalid_field(["channelUid"], "is required"));
    };
    let mut wanted = Wanted::try_from((&body, None))?;
    let channel = find_channel(&state, &caller, raw_channel).await?;
    check_template(&state, &channel, &mut wanted).await?;
    let created = campaigns::create(
        &state.db,
        caller.workspace_id,
        channel.id,
        wanted.fields,
        clock::now(),
    )
    .await?;
    tracing::info!(campaign_id = %created.id, "campaign created");
    Ok(Envelope::created(
        "Campaign created successfully",
        created.into(),
    ))
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(rename_all = "camelCase")]
struct CampaignListQuery {
    /// The caller's workspace.
    #[param(required = true, value_type = String, pattern = "^-?[0-9]+$", example = "1")]
    workspace_id: Option<String>,
    #[param(value_type = Option<CampaignStatus>)]
    status: Option<String>,
    #[param(value_type = Option<uuid::Uuid>)]
    channel_uid: Option<String>,
    name: Option<String>,
    cursor: Option<String>,
    #[param(minimum = 1, maximum = 100)]
    limit: Option<u64>,
}

/// List campaigns.
///
/// Newest first, in cursor pages; filter by status, channel and name (any case, partial).
#[utoipa::path(
    get,
    path = "/campaigns",
    tag = "campaigns",
    params(CampaignListQuery),
    responses((status = 200, body = CursorResponse<CampaignRecord>)),
)]
#[tracing::instrument(skip_all, fields(workspace_id = caller.workspace_id))]
async fn list_campaigns(
    caller: Caller,
    State(state): State<AppState>,
    Query(query): Query<CampaignListQuery>,
) -> Result<CursorResponse<CampaignRecord>> {
    caller.require(Permission::Read)?;
    let workspace = match query.workspace_id.as_deref() {
        None => return Err(ApiError::invalid_field(["workspaceId"], "is required")),
        Some(raw) => raw
            .parse::<i64>()
            .map_err(|_| ApiError::invalid_field(["workspaceId"], "must be a number"))?,
    };
    if workspace != caller.workspace_id {
        return Err(ApiError::NotFound("Workspace"));
    }
    let mut problems = Problems::default();
    let status = query.status.as_deref().and_then(|raw| {
        problems.parse(
            ["status"],
            CampaignStatus::parse(raw)
                .ok_or("must be ACTIVE, PENDING, DEPRECATED, INACTIVE or BLOCKED"),
        )
    });
    let channel_id = query
        .channel_uid
        .as_deref()
        .and_then(|raw| problems.parse(["channelUid"], uuid_of(raw)));
    problems.finish()?;
    let (cursor, limit) = cursor_from(query.cursor.as_deref(), query.limit)?;
    let filter = CampaignFilter {
        status,
        channel_id,
        name: query.name.filter(|n| !n.is_empty()),
    };
    let page = campaigns::list(&state.db, caller.workspace_id, filter, cursor, limit).await?;
    Ok(CursorResponse::new(
        "Campaigns retrieved successfully",
        page,
        CampaignRecord::from,
    ))
}

/// Read a campaign.
///
/// With its template, parameter sources and status.
#[utoipa::path(
    get,
    path = "/campaigns/{uid}",
    tag = "campaigns",
    params(("uid" = String, Path, format = Uuid, description = "Campaign id")),
    responses((status = 200, body = Envelope<CampaignRecord>)),
)]
#[tracing::instrument(skip_all, fields(workspace_id = caller.workspace_id))]
async fn get_campaign(
    caller: Caller,
    State(state): State<AppState>,
    Path(uid): Path<String>,
) -> Result<Envelope<CampaignRecord>> {
    caller.require(Permission::Read)?;
    let found = find_campaign(&state, &caller, &uid).await?;
    Ok(Envelope::ok(
        "Campaign retrieved successfully",
        found.into(),
    ))
}

/// Change a campaign.
///
/// Only the fields given change.
#[utoipa::path(
    patch,
    path = "/campaigns/{uid}",
    tag = "campaigns",
    params(("uid" = String, Path, format = Uuid, description = "Campaign id")),
    request_body = CampaignBody,
    responses((status = 200, body = Envelope<CampaignRecord>)),
)]
#[tracing::instrument(skip_all, fields(workspace_id = caller.workspace_id))]
async fn update_campaign(
    caller: Caller,
    State(state): State<AppState>,
    Path(uid): Path<String>,
    Json(body): Json<CampaignBody>,
) -> Result<Envelope<CampaignRecord>> {
    caller.require(Permission::Write)?;
    let current = find_campaign(&state, &caller, &uid).await?;
    if let Some(raw) = body.channel_uid.as_deref()
        && Uuid::parse_str(raw).ok() != Some(current.channel_id)
    {
        return Err(ApiError::invalid_field(["channelUid"], "cannot be changed"));
    }
    let mut wanted = Wanted::try_from((&body, Some(&current)))?;
    let template_changed = body.template_name.is_some()
        || body.template_language.is_some()
        || body.template_parameters.is_some();
    if template_changed {
        let channel = find_channel(&state, &caller, &current.channel_id.to_string()).await?;
        check_template(&state, &channel, &mut wanted).await?;
    }
    let updated = campaigns::update(&state.db, current, wanted.fields, clock::now()).await?;
    Ok(Envelope::ok(
        "Campaign updated successfully",
        updated.into(),
    ))
}

/// Delete a campaign.
///
/// The flows that ran it stay readable.
#[utoipa::path(
    delete,
    path = "/campaigns/{uid}",
    tag = "campaigns",
    params(("uid" = String, Path, format = Uuid, description = "Campaign id")),
    responses((status = 200, body = Envelope<Value>)),
)]
#[tracing::instrument(skip_all, fields(workspace_id = caller.workspace_id))]
async fn delete_campaign(
    caller: Caller,
    State(state): State<AppState>,
    Path(uid): Path<String>,
) -> Result<Envelope<Value>> {
    caller.require(Permission::Write)?;
    let found = find_campaign(&state, &caller, &uid).await?;
    let active = campaigns::active_flows(&state.db, found.id).await?;
    if active > 0 {
        return Err(ApiError::ConflictCode {
            code: "campaign_has_active_flows",
            message: format!(
                "The campaign has {active} queued, running or paused flow(s); cancel them first"
            ),
        });
    }
    campaigns::delete(&state.db, caller.workspace_id, found.id).await?;
    Ok(Envelope::ok(
        "Campaign deleted successfully",
        json!({"uid": found.id}),
    ))
}
