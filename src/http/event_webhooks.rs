//! Event webhook endpoints (admin): `POST /workspace/webhooks` answers the signing secret once,
//! `GET` lists and reads them with the secret masked, `PATCH` changes the URL, the events, the
//! description or `enabled`, `DELETE` removes one with its deliveries, and
//! `POST …/rotate-secret` answers a new secret while the old one keeps signing for a day. Their
//! deliveries are in [`deliveries`]. Every change reloads the routes facts are written by.

mod deliveries;

use axum::extract::State;
use chrono::{DateTime, Utc};
use parley_actors::events::sign;
use parley_persistence::entities::event_webhook;
use parley_persistence::event_webhooks::{self, EndpointUpdate, NewEndpoint};
use parley_persistence::{EventType, clock};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use uuid::Uuid;

use crate::domain::Permission;
use crate::http::AppState;
use crate::http::auth::Caller;
use crate::http::envelope::{DeletedRecord, Envelope};
use crate::http::error::{ApiError, PathSegment, Refusal, Result};
use crate::http::extract::{Json, Path, Query};
use crate::http::pagination::{ListQuery, PageResponse};
use crate::http::validation::{Problems, optional_text, parse_uuid, present, tenant_url};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

/// Longest description, in characters.
const MAX_DESCRIPTION: usize = 1024;
/// How long a rotated-out secret keeps signing beside the new one.
const ROTATION_OVERLAP: chrono::Duration = chrono::Duration::hours(24);

pub(crate) fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_endpoints, create_endpoint))
        .routes(routes!(get_endpoint, update_endpoint, delete_endpoint))
        .routes(routes!(rotate_secret))
        .merge(deliveries::router())
}

/// An endpoint as the API shows it: the secret masked, except in the answers that make one.
#[derive(Debug, Serialize, utoipa::ToSchema)]
struct EndpointRecord {
    id: Uuid,
    url: String,
    description: Option<String>,
    /// Event types it takes, or `["*"]`.
    events: Value,
    enabled: bool,
    /// `whsec_…` with its last four characters; whole only when created or rotated.
    secret: String,
    /// Until when the previous secret signs beside this one, after a rotation.
    previous_secret_until: Option<DateTime<Utc>>,
    /// Since when every delivery to it has failed.
    failing_since: Option<DateTime<Utc>>,
    /// Why Parley disabled it (410 Gone, or five days of failures).
    disabled_reason: Option<String>,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
}

impl EndpointRecord {
    /// The record of `endpoint`, its secret shown as `secret` (masked unless just made).
    fn new(endpoint: event_webhook::Model, secret: String) -> Self {
        Self {
            id: endpoint.id,
            url: endpoint.url,
            description: endpoint.description,
            events: endpoint.events,
            enabled: endpoint.enabled,
            secret,
            previous_secret_until: endpoint.previous_secret_until,
            failing_since: endpoint.failing_since,
            disabled_reason: endpoint.disabled_reason,
            created_at: endpoint.created_at,
            updated_at: endpoint.updated_at,
        }
    }

    /// The record with its secret masked.
    fn masked(state: &AppState, endpoint: event_webhook::Model) -> Self {
        let secret = state
            .secrets
            .open(&endpoint.secret)
            .map_or_else(|_| sign::SECRET_PREFIX.to_owned(), |s| sign::masked(&s));
        Self::new(endpoint, secret)
    }
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
struct CreateBody {
    /// Where events are posted: http or https; not an inside address.
    #[schema(required = true, value_type = String, max_length = 2048, example = "https://crm.example.com/parley")]
    url: Option<String>,
    /// Event types, or `["*"]` for all.
    #[schema(required = true, value_type = Vec<String>, example = json!(["message.received", "message.failed"]))]
    events: Option<Value>,
    #[schema(max_length = 1024)]
    description: Option<String>,
}

/// Checks `events`: a non-empty list of known types, or `["*"]`.
fn checked_events(problems: &mut Problems, events: Option<Value>) -> Option<Value> {
    let Some(events) = events else {
        problems.add(["events"], "is required");
        return None;
    };
    let Some(list) = events.as_array().filter(|l| !l.is_empty()) else {
        problems.add(
            ["events"],
            "must be a non-empty list of event types, or [\"*\"]",
        );
        return None;
    };
    let mut types: Vec<String> = Vec::with_capacity(list.len());
    for (i, item) in list.iter().enumerate() {
        match item.as_str() {
            Some("*") => types.push("*".to_owned()),
            Some(name) if EventType::parse(name).is_some() => types.push(name.to_owned()),
            _ => {
                let known: Vec<&str> = EventType::ALL.iter().map(|t| t.as_str()).collect();
                let message = format!("must be one of {} or *", known.join(", "));
                problems.add([PathSegment::from("events"), PathSegment::from(i)], message);
                return None;
            }
        }
    }
    types.dedup();
    if types.iter().any(|t| t == "*") {
        types = vec!["*".to_owned()];
    }
    Some(json!(types))
}

/// Create an event webhook endpoint.
///
/// Answers the signing secret once (`whsec_…`); reads afterwards show it masked. Deliveries are
/// signed by Standard Webhooks 1.0 (`webhook-id`, `webhook-timestamp`, `webhook-signature`).
#[utoipa::path(
    post,
    path = "/workspace/webhooks",
    tag = "event-webhooks",
    request_body = CreateBody,
    responses((status = 201, body = Envelope<EndpointRecord>)),
)]
#[tracing::instrument(skip_all, fields(workspace_id = caller.workspace_id))]
async fn create_endpoint(
    caller: Caller,
    State(state): State<AppState>,
    Json(body): Json<CreateBody>,
) -> Result<Envelope<EndpointRecord>> {
    caller.require(Permission::Admin)?;
    let mut problems = Problems::default();
    let url = match body.url {
        Some(url) => problems.checked(tenant_url(state.actors.mcp().egress(), url)),
        None => {
            problems.add(["url"], "is required");
            None
        }
    };
    let events = checked_events(&mut problems, body.events);
    let description = optional_text(
        &mut problems,
        "description",
        body.description,
        MAX_DESCRIPTION,
    );
    problems.finish()?;
    let (Some(url), Some(events)) = (url, events) else {
        return Err(ApiError::invalid_field(["url"], "is required"));
    };
    let secret = sign::new_secret();
    let new = NewEndpoint {
        url,
        events,
        description,
        sealed_secret: state.secrets.seal(&secret),
    };
    let store = state.actors.store();
    let created = store
        .create_endpoint(caller.workspace_id, new, clock::now())
        .await?;
    Ok(Envelope::created(
        "Webhook endpoint created; keep its secret, it is shown only now",
        EndpointRecord::new(created, secret),
    ))
}

/// List event webhook endpoints.
#[utoipa::path(
    get,
    path = "/workspace/webhooks",
    tag = "event-webhooks",
    params(ListQuery),
    responses((status = 200, body = PageResponse<EndpointRecord>)),
)]
#[tracing::instrument(skip_all, fields(workspace_id = caller.workspace_id))]
async fn list_endpoints(
    caller: Caller,
    State(state): State<AppState>,
    Query(query): Query<ListQuery>,
) -> Result<PageResponse<EndpointRecord>> {
    caller.require(Permission::Admin)?;
    let page = query.page()?;
    let paged = event_webhooks::list(&state.db, caller.workspace_id, page).await?;
    Ok(PageResponse::new(
        "Webhook endpoints retrieved successfully",
        page,
        paged,
        |e| EndpointRecord::masked(&state, e),
    ))
}

/// Read an event webhook endpoint.
#[utoipa::path(
    get,
    path = "/workspace/webhooks/{webhook_id}",
    tag = "event-webhooks",
    params(("webhook_id" = String, Path, format = Uuid, description = "Endpoint id")),
    responses((status = 200, body = Envelope<EndpointRecord>)),
)]
#[tracing::instrument(skip_all, fields(workspace_id = caller.workspace_id))]
async fn get_endpoint(
    caller: Caller,
    State(state): State<AppState>,
    Path(webhook_id): Path<String>,
) -> Result<Envelope<EndpointRecord>> {
    caller.require(Permission::Admin)?;
    let found = find_endpoint(&state, &caller, &webhook_id).await?;
    Ok(Envelope::ok(
        "Webhook endpoint retrieved successfully",
        EndpointRecord::masked(&state, found),
    ))
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
struct UpdateBody {
    #[schema(value_type = Option<String>, max_length = 2048, example = "https://crm.example.com/parley")]
    url: Option<String>,
    #[schema(value_type = Option<Vec<String>>, example = json!(["*"]))]
    events: Option<Value>,
    /// `null` clears it.
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<String>, max_length = 1024)]
    description: Option<Option<String>>,
    /// Enabling an endpoint Parley disabled clears why, and it is delivered to again.
    enabled: Option<bool>,
}

/// Update an event webhook endpoint.
#[utoipa::path(
    patch,
    path = "/workspace/webhooks/{webhook_id}",
    tag = "event-webhooks",
    params(("webhook_id" = String, Path, format = Uuid, description = "Endpoint id")),
    request_body = UpdateBody,
    responses((status = 200, body = Envelope<EndpointRecord>)),
)]
#[tracing::instrument(skip_all, fields(workspace_id = caller.workspace_id))]
async fn update_endpoint(
    caller: Caller,
    State(state): State<AppState>,
    Path(webhook_id): Path<String>,
    Json(body): Json<UpdateBody>,
) -> Result<Envelope<EndpointRecord>> {
    caller.require(Permission::Admin)?;
    let found = find_endpoint(&state, &caller, &webhook_id).await?;
    let mut problems = Problems::default();
    let url = body
        .url
        .and_then(|url| problems.checked(tenant_url(state.actors.mcp().egress(), url)));
    let events = match body.events {
        Some(events) => checked_events(&mut problems, Some(events)),
        None => None,
    };
    let description = body
        .description
        .map(|d| optional_text(&mut problems, "description", d, MAX_DESCRIPTION));
    problems.finish()?;
    let update = EndpointUpdate {
        url,
        events,
        description,
        enabled: body.enabled,
    };
    let store = state.actors.store();
    let updated = store.update_endpoint(found, update, clock::now()).await?;
    Ok(Envelope::ok(
        "Webhook endpoint updated successfully",
        EndpointRecord::masked(&state, updated),
    ))
}

/// Delete an event webhook endpoint.
///
/// Its deliveries go with it.
#[utoipa::path(
    delete,
    path = "/workspace/webhooks/{webhook_id}",
    tag = "event-webhooks",
    params(("webhook_id" = String, Path, format = Uuid, description = "Endpoint id")),
    responses((status = 200, body = Envelope<DeletedRecord>)),
)]
#[tracing::instrument(skip_all, fields(workspace_id = caller.workspace_id))]
async fn delete_endpoint(
    caller: Caller,
    State(state): State<AppState>,
    Path(webhook_id): Path<String>,
) -> Result<Envelope<DeletedRecord>> {
    caller.require(Permission::Admin)?;
    let id = parse_uuid(&webhook_id, "webhook_id")?;
    let store = state.actors.store();
    if !store.delete_endpoint(caller.workspace_id, id).await? {
        return Err(ApiError::NotFound("Webhook endpoint"));
    }
    Ok(Envelope::ok(
        "Webhook endpoint deleted successfully",
        DeletedRecord { id },
    ))
}

/// Rotate an event webhook endpoint's secret.
///
/// Answers the new secret once; the old one keeps signing beside it for 24 hours
/// (`webhook-signature` then carries both), so receivers can switch without losing a delivery.
/// Rotating again within those 24 hours would drop the old one early: 409 `rotation_too_soon`.
#[utoipa::path(
    post,
    path = "/workspace/webhooks/{webhook_id}/rotate-secret",
    tag = "event-webhooks",
    params(("webhook_id" = String, Path, format = Uuid, description = "Endpoint id")),
    responses((status = 200, body = Envelope<EndpointRecord>), (status = 409, body = Refusal)),
)]
#[tracing::instrument(skip_all, fields(workspace_id = caller.workspace_id))]
async fn rotate_secret(
    caller: Caller,
    State(state): State<AppState>,
    Path(webhook_id): Path<String>,
) -> Result<Envelope<EndpointRecord>> {
    caller.require(Permission::Admin)?;
    let found = find_endpoint(&state, &caller, &webhook_id).await?;
    let now = clock::now();
    // The secret before the current one still signs (receivers may not have the current one
    // yet): rotating again now would drop it.
    if let Some(until) = found.previous_secret_until.filter(|until| *until > now) {
        return Err(ApiError::ConflictCode {
            code: "rotation_too_soon",
            message: format!(
                "The secret was rotated less than 24 hours ago and the one before it signs \
                 until {}; rotate again after that",
                until.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
            ),
        });
    }
    let secret = sign::new_secret();
    let sealed = state.secrets.seal(&secret);
    let rotated = state
        .actors
        .store()
        .rotate_endpoint_secret(found, sealed, now + ROTATION_OVERLAP, now)
        .await?;
    Ok(Envelope::ok(
        "Secret rotated; keep the new one, it is shown only now",
        EndpointRecord::new(rotated, secret),
    ))
}

/// The caller's endpoint `raw` (404 unknown or another workspace's).
async fn find_endpoint(
    state: &AppState,
    caller: &Caller,
    raw: &str,
) -> Result<event_webhook::Model> {
    let id = parse_uuid(raw, "webhook_id")?;
    event_webhooks::find(&state.db, caller.workspace_id, id)
        .await?
        .ok_or(ApiError::NotFound("Webhook endpoint"))
}
