//! Operators, the people who answer conversations in the console: `POST /workspace/operators`
//! invites one (the answer carries a one-time link to set a password, mailed too when an SMTP
//! relay is configured), `GET /workspace/operators` lists them, `PATCH
//! /workspace/operators/{operator_id}` renames, changes the role, or disables one (their
//! sessions end at once), `POST /workspace/operators/{operator_id}/invitation` makes a new
//! link. All need the `admin` permission.

use axum::extract::State;
use axum::http::HeaderMap;
use chrono::{DateTime, Utc};
use parley_persistence::clock;
use parley_persistence::entities::operator;
use parley_persistence::operators::{self, OperatorChange};
use serde::{Deserialize, Serialize};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use uuid::Uuid;

use crate::domain::{Name, Permission};
use crate::http::AppState;
use crate::http::auth::Caller;
use crate::http::envelope::Envelope;
use crate::http::error::{ApiError, Result};
use crate::http::extract::{Json, Path, Query};
use crate::http::pagination::{PageResponse, page_from};
use crate::http::validation::{
    Problems, invitation_refused, new_operator, operator_role, parse_uuid,
};
use crate::invitations::{self, Invited};

pub(crate) fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_operators, invite_operator))
        .routes(routes!(change_operator))
        .routes(routes!(new_invitation))
}

/// An operator as the API shows it (never their password).
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub(crate) struct OperatorRecord {
    id: Uuid,
    email: String,
    name: String,
    /// `agent` or `supervisor`.
    role: String,
    /// `invited` (no password yet), `active` or `disabled`.
    status: &'static str,
    created_at: DateTime<Utc>,
    disabled_at: Option<DateTime<Utc>>,
    /// Present when the answer made a link: the one-time link to set a password.
    #[serde(skip_serializing_if = "Option::is_none")]
    invitation: Option<InvitationRecord>,
}

/// A one-time link to set a password.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub(crate) struct InvitationRecord {
    url: String,
    expires_at: DateTime<Utc>,
    /// Whether it was also sent by e-mail.
    mailed: bool,
}

impl From<operator::Model> for OperatorRecord {
    fn from(o: operator::Model) -> Self {
        Self {
            status: o.status(),
            id: o.id,
            email: o.email,
            name: o.name,
            role: o.role,
            created_at: o.created_at,
            disabled_at: o.disabled_at,
            invitation: None,
        }
    }
}

impl OperatorRecord {
    /// The record of an operator just invited, with its link.
    fn with_link(invited: Invited) -> Self {
        let mut record = Self::from(invited.operator);
        record.invitation = Some(InvitationRecord {
            url: invited.url,
            expires_at: invited.expires_at,
            mailed: invited.mailed,
        });
        record
    }
}

crate::http::openapi::string_schema!(
    /// An operator's role: an `agent` answers; a `supervisor` also assigns conversations to
    /// others.
    OperatorRole, one_of = ["agent", "supervisor"]
);

#[derive(Debug, Deserialize, utoipa::ToSchema)]
struct InviteBody {
    #[schema(format = "email")]
    email: Option<String>,
    #[schema(min_length = 1, max_length = 100)]
    name: Option<String>,
    #[schema(value_type = Option<OperatorRole>)]
    role: Option<String>,
}

/// Invite an operator.
///
/// Answers the operator and a one-time link (`invitation.url`, valid 48 hours) where they set
/// their password; the link is mailed too when `mail.smtp_url` is set.
#[utoipa::path(
    post,
    path = "/workspace/operators",
    tag = "operators",
    request_body = InviteBody,
    responses((status = 201, body = Envelope<OperatorRecord>)),
)]
#[tracing::instrument(skip_all, fields(workspace_id = caller.workspace_id))]
async fn invite_operator(
    caller: Caller,
    State(state): State<AppState>,
    headers: HeaderMap,
    Json(body): Json<InviteBody>,
) -> Result<Envelope<OperatorRecord>> {
    caller.require(Permission::Admin)?;
    let new = new_operator(
        caller.workspace_id,
        body.email.as_deref(),
        body.name.as_deref(),
        body.role.as_deref(),
    )?;
    let base = invitations::base_url(&state.settings, &headers);
    let invited = invitations::invite(&state.db, &state.settings, &base, new)
        .await
        .map_err(invitation_refused)?;
    let record = OperatorRecord::with_link(invited);
    Ok(Envelope::created("Operator invited", record))
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
struct ListQuery {
    #[param(minimum = 1, maximum = 1_000_000_000_000_000_u64, default = 1)]
    page: Option<u64>,
    #[param(minimum = 1, maximum = 100)]
    limit: Option<u64>,
}

/// List operators.
///
/// The workspace's operators, oldest first.
#[utoipa::path(
    get,
    path = "/workspace/operators",
    tag = "operators",
    params(ListQuery),
    responses((status = 200, body = PageResponse<OperatorRecord>)),
)]
#[tracing::instrument(skip_all, fields(workspace_id = caller.workspace_id))]
async fn list_operators(
    caller: Caller,
    State(state): State<AppState>,
    Query(query): Query<ListQuery>,
) -> Result<PageResponse<OperatorRecord>> {
    caller.require(Permission::Admin)?;
    let page = page_from(query.page, query.limit)?;
    let paged = operators::list(&state.db, caller.workspace_id, page).await?;
    Ok(PageResponse::new(
        "Operators retrieved successfully",
        page,
        paged,
        OperatorRecord::from,
    ))
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
struct ChangeBody {
    #[schema(min_length = 1, max_length = 100)]
    name: Option<String>,
    #[schema(value_type = Option<OperatorRole>)]
    role: Option<String>,
    /// `true` disables the operator (their sessions end at once and their conversations
    /// return to the queue); `false` enables them again.
    disabled: Option<bool>,
}

/// Change an operator.
///
/// Renames, changes the role, or disables (sessions end at once) or enables an operator.
#[utoipa::path(
    patch,
    path = "/workspace/operators/{operator_id}",
    tag = "operators",
    params(("operator_id" = String, Path, format = Uuid, description = "Operator id")),
    request_body = ChangeBody,
    responses((status = 200, body = Envelope<OperatorRecord>)),
)]
#[tracing::instrument(skip_all, fields(workspace_id = caller.workspace_id))]
async fn change_operator(
    caller: Caller,
    State(state): State<AppState>,
    Path(operator_id): Path<String>,
    Json(body): Json<ChangeBody>,
) -> Result<Envelope<OperatorRecord>> {
    caller.require(Permission::Admin)?;
    let id = parse_uuid(&operator_id, "operator_id")?;
    let mut problems = Problems::default();
    let name = body
        .name
        .as_deref()
        .and_then(|raw| problems.parse(["name"], Name::try_from(raw)));
    let role = operator_role(&mut problems, body.role.as_deref());
    problems.finish()?;
    let change = OperatorChange {
        name: name.map(|n| n.into_inner()),
        role,
        disabled: body.disabled,
    };
    let changed = operators::change(&state.db, caller.workspace_id, id, change, clock::now())
        .await?
        .ok_or(ApiError::NotFound("Operator"))?;
    if body.disabled == Some(true) {
        // Their open pages end at once, on every node.
        state
            .actors
            .changes()
            .announce(&parley_actors::Change::Inbox {
                workspace_id: caller.workspace_id,
            });
        tracing::info!(operator_id = %id, "operator disabled");
    }
    Ok(Envelope::ok(
        "Operator updated",
        OperatorRecord::from(changed),
    ))
}

/// Make a new invitation link.
///
/// For an operator whose link expired or was lost: the earlier links stop working.
#[utoipa::path(
    post,
    path = "/workspace/operators/{operator_id}/invitation",
    tag = "operators",
    params(("operator_id" = String, Path, format = Uuid, description = "Operator id")),
    responses((status = 201, body = Envelope<OperatorRecord>)),
)]
#[tracing::instrument(skip_all, fields(workspace_id = caller.workspace_id))]
async fn new_invitation(
    caller: Caller,
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(operator_id): Path<String>,
) -> Result<Envelope<OperatorRecord>> {
    caller.require(Permission::Admin)?;
    let id = parse_uuid(&operator_id, "operator_id")?;
    let found = operators::find(&state.db, caller.workspace_id, id)
        .await?
        .ok_or(ApiError::NotFound("Operator"))?;
    let base = invitations::base_url(&state.settings, &headers);
    let invited = invitations::renew(&state.db, &state.settings, &base, found).await?;
    let record = OperatorRecord::with_link(invited);
    Ok(Envelope::created("Invitation made", record))
}
