//! `GET /flows/{uid}/recipients`: a flow's recipients and how each one's send went.

use axum::extract::State;
use chrono::{DateTime, Utc};
use parley_persistence::entities::flow_recipient;
use parley_persistence::{RecipientStatus, flows};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use uuid::Uuid;

use super::find_flow;
use crate::domain::Permission;
use crate::http::AppState;
use crate::http::auth::Caller;
use crate::http::error::Result;
use crate::http::extract::{Path, Query};
use crate::http::pagination::{CursorResponse, cursor_from};

/// One recipient as the API shows it.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub(super) struct RecipientRecord {
    contact_uid: String,
    identity_id: Uuid,
    status: RecipientStatus,
    attempts: i32,
    platform_message_id: Option<String>,
    error: Option<Value>,
    updated_at: DateTime<Utc>,
}

impl From<flow_recipient::Model> for RecipientRecord {
    fn from(r: flow_recipient::Model) -> Self {
        let error = match (r.error_code, r.error) {
            (None, None) => None,
            (code, message) => Some(json!({"code": code, "message": message})),
        };
        Self {
            contact_uid: r.contact,
            identity_id: r.identity_id,
            status: r.status,
            attempts: r.attempts,
            platform_message_id: r.platform_message_id,
            error,
            updated_at: r.updated_at,
        }
    }
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(super) struct RecipientQuery {
    cursor: Option<String>,
    #[param(minimum = 1, maximum = 100)]
    limit: Option<u64>,
}

/// List a flow's recipients.
///
/// Each with its status, attempts and message.
#[utoipa::path(
    get,
    path = "/flows/{uid}/recipients",
    tag = "flows",
    params(("uid" = String, Path, format = Uuid, description = "Flow id"), RecipientQuery),
    responses((status = 200, body = CursorResponse<RecipientRecord>)),
)]
#[tracing::instrument(skip_all, fields(workspace_id = caller.workspace_id))]
pub(super) async fn list_recipients(
    caller: Caller,
    State(state): State<AppState>,
    Path(uid): Path<String>,
    Query(query): Query<RecipientQuery>,
) -> Result<CursorResponse<RecipientRecord>> {
    caller.require(Permission::Read)?;
    let found = find_flow(&state, &caller, &uid).await?;
    let (cursor, limit) = cursor_from(query.cursor.as_deref(), query.limit)?;
    let page = flows::recipients(&state.db, found.id, cursor, limit).await?;
    Ok(CursorResponse::new(
        "Flow recipients retrieved successfully",
        page,
        RecipientRecord::from,
    ))
}
