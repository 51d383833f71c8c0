//! An endpoint's deliveries: `GET /workspace/webhooks/{id}/deliveries` (newest first) and
//! `POST …/deliveries/{delivery_id}/retry`, which makes one due now whatever its status.

use axum::extract::State;
use chrono::{DateTime, Utc};
use parley_persistence::entities::event_delivery;
use parley_persistence::event_deliveries::RetryNow;
use parley_persistence::{DeliveryStatus, clock, event_deliveries};
use serde::Serialize;
use uuid::Uuid;

use super::find_endpoint;
use crate::domain::Permission;
use crate::http::AppState;
use crate::http::auth::Caller;
use crate::http::envelope::Envelope;
use crate::http::error::{ApiError, Refusal, Result};
use crate::http::extract::{Path, Query};
use crate::http::pagination::{ListQuery, PageResponse};
use crate::http::validation::parse_uuid;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub(super) fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_deliveries))
        .routes(routes!(retry_delivery))
}

/// A delivery as the API shows it.
#[derive(Debug, Serialize, utoipa::ToSchema)]
struct DeliveryRecord {
    id: Uuid,
    /// The event's id: `webhook-id`, the same on every attempt.
    event_id: Uuid,
    event_type: String,
    status: DeliveryStatus,
    attempts: i32,
    last_status_code: Option<i32>,
    last_error: Option<String>,
    /// When the next attempt is due (for a pending delivery).
    next_attempt_at: Option<DateTime<Utc>>,
    created_at: DateTime<Utc>,
}

impl From<event_delivery::Model> for DeliveryRecord {
    fn from(d: event_delivery::Model) -> Self {
        Self {
            id: d.id,
            event_id: d.event_id,
            event_type: d.event_type,
            next_attempt_at: (d.status == DeliveryStatus::Pending).then_some(d.next_attempt_at),
            status: d.status,
            attempts: d.attempts,
            last_status_code: d.last_status_code,
            last_error: d.last_error,
            created_at: d.created_at,
        }
    }
}

/// List an endpoint's deliveries.
///
/// Newest first, with each one's status, attempts and the endpoint's last answer.
#[utoipa::path(
    get,
    path = "/workspace/webhooks/{webhook_id}/deliveries",
    tag = "event-webhooks",
    params(("webhook_id" = String, Path, format = Uuid, description = "Endpoint id"), ListQuery),
    responses((status = 200, body = PageResponse<DeliveryRecord>)),
)]
#[tracing::instrument(skip_all, fields(workspace_id = caller.workspace_id))]
async fn list_deliveries(
    caller: Caller,
    State(state): State<AppState>,
    Path(webhook_id): Path<String>,
    Query(query): Query<ListQuery>,
) -> Result<PageResponse<DeliveryRecord>> {
    caller.require(Permission::Admin)?;
    let page = query.page()?;
    let endpoint = find_endpoint(&state, &caller, &webhook_id).await?;
    let paged = event_deliveries::list(&state.db, endpoint.id, page).await?;
    Ok(PageResponse::new(
        "Deliveries retrieved successfully",
        page,
        paged,
        DeliveryRecord::from,
    ))
}

/// Send a delivery again now.
///
/// Whatever its status (a failed one included), it is due at once; it keeps its `webhook-id`.
/// One attempt at a time: a delivery due already (waiting for its attempt, or being
/// attempted) is a 409 `delivery_already_due`.
#[utoipa::path(
    post,
    path = "/workspace/webhooks/{webhook_id}/deliveries/{delivery_id}/retry",
    tag = "event-webhooks",
    params(
        ("webhook_id" = String, Path, format = Uuid, description = "Endpoint id"),
        ("delivery_id" = String, Path, format = Uuid, description = "Delivery id"),
    ),
    responses((status = 200, body = Envelope<DeliveryRecord>), (status = 409, body = Refusal)),
)]
#[tracing::instrument(skip_all, fields(workspace_id = caller.workspace_id))]
async fn retry_delivery(
    caller: Caller,
    State(state): State<AppState>,
    Path((webhook_id, delivery_id)): Path<(String, String)>,
) -> Result<Envelope<DeliveryRecord>> {
    caller.require(Permission::Admin)?;
    let endpoint = find_endpoint(&state, &caller, &webhook_id).await?;
    let id = parse_uuid(&delivery_id, "delivery_id")?;
    let due = match event_deliveries::retry_now(&state.db, endpoint.id, id, clock::now()).await? {
        RetryNow::Due(due) => due,
        RetryNow::AlreadyDue => {
            return Err(ApiError::ConflictCode {
                code: "delivery_already_due",
                message: "The delivery is already due and waits for its attempt (or is being \
                          attempted); ask again once it has been tried"
                    .to_owned(),
            });
        }
        RetryNow::Unknown => return Err(ApiError::NotFound("Delivery")),
    };
    state.actors.events().wake();
    Ok(Envelope::ok("Delivery due again now", due.into()))
}
