//! Flows (camelCase): `POST|GET /flows`, `GET|PATCH|DELETE /flows/{uid}` and the added
//! `GET /flows/{uid}/recipients`. A flow sends its campaign's template to identities through
//! its FlowActor; this layer checks requests, stores flows and their recipients, moves statuses
//! as DESIGN's table allows, and tells the actors.

use axum::extract::State;
use chrono::{DateTime, Utc};
use parley_actors::flow::FlowConfig;
use parley_persistence::entities::flow;
use parley_persistence::flows::{self, FlowFilter};
use parley_persistence::{ConnectionTrait, CursorPage, FlowStatus, clock};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use uuid::Uuid;

use crate::domain::Permission;
use crate::http::AppState;
use crate::http::auth::Caller;
use crate::http::envelope::Envelope;
use crate::http::error::{ApiError, Result};
use crate::http::extract::{Json, Path, Query};
use crate::http::lookup::resolve_identity;
use crate::http::pagination::{CursorResponse, cursor_from};
use crate::http::validation::{Problems, parse_uuid, uuid_of};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

/// Latest failures a flow's metadata shows.
const SHOWN_FAILURES: u64 = 100;

mod create;
mod recipients;

use self::create::{__path_create_flow, MAX_DESCRIPTION, create_flow};
use self::recipients::{__path_list_recipients, list_recipients};

pub(crate) fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_flows, create_flow))
        .routes(routes!(get_flow, update_flow, delete_flow))
        .routes(routes!(list_recipients))
}

/// A flow as the API shows it, with its live statistics and metadata.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub(super) struct FlowRecord {
    uid: Uuid,
    workspace_id: i64,
    campaign_uid: Uuid,
    channel_uid: Uuid,
    description: Option<String>,
    status: FlowStatus,
    configuration: Value,
    statistics: Value,
    metadata: Value,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
}

/// The record of `found`, its statistics and metadata read from its recipients.
pub(super) async fn record(db: &impl ConnectionTrait, found: flow::Model) -> Result<FlowRecord> {
    let stats = flows::statistics(db, found.id).await?;
    let error_counts: serde_json::Map<String, Value> = flows::error_counts(db, found.id)
        .await?
        .into_iter()
        .map(|(code, count)| (code, json!(count)))
        .collect();
    let failures: Vec<Value> = flows::failures(db, found.id, SHOWN_FAILURES)
        .await?
        .into_iter()
        .map(|r| {
            json!({"contactUid": r.contact, "code": r.error_code, "message": r.error,
                   "attempts": r.attempts, "at": r.updated_at})
        })
        .collect();
    Ok(FlowRecord {
        uid: found.id,
        workspace_id: found.workspace_id,
        campaign_uid: found.campaign_id,
        channel_uid: found.channel_id,
        description: found.description,
        status: found.status,
        configuration: FlowConfig::from_stored(&found.configuration).to_json(),
        statistics: json!({
            "total": stats.total, "pending": stats.pending, "sent": stats.sent,
            "delivered": stats.delivered, "read": stats.read, "failed": stats.failed,
            "skipped": stats.skipped, "retries": stats.retries,
            "deliveryRate": stats.delivery_rate(), "readRate": stats.read_rate(),
        }),
        metadata: json!({
            "errorCounts": error_counts,
            "failures": failures,
            "startedAt": found.started_at,
            "finishedAt": found.finished_at,
            "reason": found.reason,
        }),
        created_at: found.created_at,
        updated_at: found.updated_at,
    })
}

/// Tells the flow actors that a flow's status changed.
pub(super) fn tell(state: &AppState, flow_id: Uuid) {
    state.actors.flows().changed(flow_id);
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(rename_all = "camelCase")]
struct FlowListQuery {
    #[param(value_type = Option<uuid::Uuid>)]
    campaign_uid: Option<String>,
    #[param(value_type = Option<uuid::Uuid>)]
    channel_uid: Option<String>,
    /// An identity: its id, or a path resolving to one (`external_id`, phone, e-mail).
    contact_uid: Option<String>,
    #[param(value_type = Option<FlowStatus>)]
    status: Option<String>,
    cursor: Option<String>,
    #[param(minimum = 1, maximum = 100)]
    limit: Option<u64>,
}

/// List flows.
///
/// In cursor pages; filter by campaign, channel, contact and status.
#[utoipa::path(
    get,
    path = "/flows",
    tag = "flows",
    params(FlowListQuery),
    responses((status = 200, body = CursorResponse<FlowRecord>)),
)]
#[tracing::instrument(skip_all, fields(workspace_id = caller.workspace_id))]
async fn list_flows(
    caller: Caller,
    State(state): State<AppState>,
    Query(query): Query<FlowListQuery>,
) -> Result<CursorResponse<FlowRecord>> {
    caller.require(Permission::Read)?;
    let mut problems = Problems::default();
    let campaign_id = query
        .campaign_uid
        .as_deref()
        .and_then(|raw| problems.parse(["campaignUid"], uuid_of(raw)));
    let channel_id = query
        .channel_uid
        .as_deref()
        .and_then(|raw| problems.parse(["channelUid"], uuid_of(raw)));
    let status = query.status.as_deref().and_then(|raw| {
        problems.parse(
            ["status"],
            FlowStatus::parse(raw).ok_or("is not a flow status"),
        )
    });
    problems.finish()?;
    let (cursor, limit) = cursor_from(query.cursor.as_deref(), query.limit)?;
    let identity_id = match query.contact_uid.as_deref() {
        Some(raw) => match resolve_identity(&state.db, caller.workspace_id, raw).await? {
            Some(found) => Some(found.id),
            // Nobody by that contact: no flow reaches them.
            None => Some(Uuid::nil()),
        },
        None => None,
    };
    let filter = FlowFilter {
        campaign_id,
        channel_id,
        identity_id,
        status,
    };
    let page = flows::list(&state.db, caller.workspace_id, filter, cursor, limit).await?;
    let mut items = Vec::with_capacity(page.items.len());
    for found in page.items {
        items.push(record(&state.db, found).await?);
    }
    let records = CursorPage {
        items,
        next: page.next,
        prev: page.prev,
        total: page.total,
    };
    Ok(CursorResponse::new(
        "Flows retrieved successfully",
        records,
        |r| r,
    ))
}

pub(super) async fn find_flow(state: &AppState, caller: &Caller, raw: &str) -> Result<flow::Model> {
    let id = parse_uuid(raw, "uid")?;
    flows::find(&state.db, caller.workspace_id, id)
        .await?
        .ok_or(ApiError::NotFound("Flow"))
}

/// Read a flow and its live statistics.
///
/// Its status, `statistics` and `metadata` (error counts, the last failures, start and end).
/// The statistics are a funnel: `sent` counts every recipient Meta accepted, `delivered` those
/// delivered or read, `read` those read; `deliveryRate` is delivered / sent and `readRate`
/// read / delivered (0 to 1, four decimals); `total`, `pending`, `failed`, `skipped` and
/// `retries` (attempts beyond each recipient's first) count recipients as they stand.
#[utoipa::path(
    get,
    path = "/flows/{uid}",
    tag = "flows",
    params(("uid" = String, Path, format = Uuid, description = "Flow id")),
    responses((status = 200, body = Envelope<FlowRecord>)),
)]
#[tracing::instrument(skip_all, fields(workspace_id = caller.workspace_id))]
async fn get_flow(
    caller: Caller,
    State(state): State<AppState>,
    Path(uid): Path<String>,
) -> Result<Envelope<FlowRecord>> {
    caller.require(Permission::Read)?;
    let found = find_flow(&state, &caller, &uid).await?;
    Ok(Envelope::ok(
        "Flow retrieved successfully",
        record(&state.db, found).await?,
    ))
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
struct UpdateFlowBody {
    /// The state to move to; a move the flow's state does not allow is a 409
    /// `invalid_transition`.
    #[schema(value_type = Option<FlowStatus>)]
    status: Option<String>,
    #[serde(default, deserialize_with = "crate::http::validation::present")]
    #[schema(value_type = Option<String>, max_length = 2000)]
    description: Option<Option<String>>,
}

/// Start, pause, resume or cancel a flow.
///
/// Or change its description.
#[utoipa::path(
    patch,
    path = "/flows/{uid}",
    tag = "flows",
    params(("uid" = String, Path, format = Uuid, description = "Flow id")),
    request_body = UpdateFlowBody,
    responses((status = 200, body = Envelope<FlowRecord>)),
)]
#[tracing::instrument(skip_all, fields(workspace_id = caller.workspace_id))]
async fn update_flow(
    caller: Caller,
    State(state): State<AppState>,
    Path(uid): Path<String>,
    Json(body): Json<UpdateFlowBody>,
) -> Result<Envelope<FlowRecord>> {
    caller.require(Permission::Write)?;
    let mut problems = Problems::default();
    let to = body.status.as_deref().and_then(|raw| {
        problems.parse(
            ["status"],
            FlowStatus::parse(raw).ok_or("is not a flow status"),
        )
    });
    if let Some(Some(description)) = &body.description
        && description.chars().count() > MAX_DESCRIPTION
    {
        problems.add(
            ["description"],
            format!("must be at most {MAX_DESCRIPTION} characters"),
        );
    }
    problems.finish()?;
    let mut found = find_flow(&state, &caller, &uid).await?;
    if let Some(to) = to {
        found = state.actors.flows().set_status(&found, to).await?;
    }
    if let Some(description) = body.description {
        found = flows::describe(&state.db, found, description, clock::now()).await?;
    }
    Ok(Envelope::ok(
        "Flow updated successfully",
        record(&state.db, found).await?,
    ))
}

/// Delete a flow.
///
/// A flow that is sending is refused (409): pause or cancel it first.
#[utoipa::path(
    delete,
    path = "/flows/{uid}",
    tag = "flows",
    params(("uid" = String, Path, format = Uuid, description = "Flow id")),
    responses((status = 200, body = Envelope<Value>)),
)]
#[tracing::instrument(skip_all, fields(workspace_id = caller.workspace_id))]
async fn delete_flow(
    caller: Caller,
    State(state): State<AppState>,
    Path(uid): Path<String>,
) -> Result<Envelope<Value>> {
    caller.require(Permission::Write)?;
    let found = find_flow(&state, &caller, &uid).await?;
    if matches!(found.status, FlowStatus::Running | FlowStatus::Queued) {
        return Err(ApiError::ConflictCode {
            code: "flow_active",
            message: format!(
                "The flow is {}; pause or cancel it before deleting it",
                found.status.as_str()
            ),
        });
    }
    flows::delete(&state.db, found.id).await?;
    tell(&state, found.id);
    Ok(Envelope::ok(
        "Flow deleted successfully",
        json!({"uid": found.id}),
    ))
}
