//! The workspace's operators, for an admin signed in with a key: who they are, inviting one
//! (the page shows the one-time link, mailed too when a relay is set), disabling and enabling
//! (a disabled operator's sessions end at once), and a new link for one who lost theirs.

use askama::Template;
use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::HeaderMap;
use axum::response::Response;
use axum::routing::{get, post};
use parley_persistence::operators::{self, OperatorChange};
use parley_persistence::{Page, clock};
use serde::Deserialize;
use uuid::Uuid;

use crate::domain::Permission;
use crate::http::AppState;
use crate::http::error::ApiError;
use crate::http::validation::{invitation_refused, new_operator, parse_uuid};
use crate::invitations::{self, Invited};

use super::session::Console;
use super::view::{Done, Shell};
use super::{CarriesCsrf, Failure, Plain, acting, page, see_other};

const DONE: &[(&str, &str)] = &[
    (
        "disabled",
        "The operator is disabled: their sessions ended and their conversations returned to the queue.",
    ),
    ("enabled", "The operator may sign in again."),
];

pub(super) fn router() -> Router<AppState> {
    Router::new()
        .route("/console/operators", get(list).post(invite))
        .route("/console/operators/{id}/disable", post(disable))
        .route("/console/operators/{id}/enable", post(enable))
        .route("/console/operators/{id}/invitation", post(renew))
}

/// An operator as the page lists them.
struct Row {
    id: Uuid,
    name: String,
    email: String,
    role: String,
    status: &'static str,
}

#[derive(Template)]
#[template(path = "console/operators.html")]
struct OperatorsPage {
    shell: Shell,
    operators: Vec<Row>,
    /// A link just made: whose, the link, whether it was mailed.
    link: Option<(String, String, bool)>,
}

/// 403 unless an admin's key signed in.
fn admin(console: &Console) -> Result<(), Failure> {
    if console.caller.permissions.contains(Permission::Admin) {
        return Ok(());
    }
    Err(Failure::new(
        console,
        ApiError::Forbidden("Only an admin manages the workspace's operators.".to_owned()),
    ))
}

async fn render(
    state: &AppState,
    console: &Console,
    shell: Shell,
    invited: Option<Invited>,
) -> Result<Response, Failure> {
    let listed = operators::list(
        &state.db,
        console.caller.workspace_id,
        Page {
            page: 1,
            limit: 1000,
        },
    )
    .await?;
    let operators = listed
        .items
        .into_iter()
        .map(|o| Row {
            status: o.status(),
            id: o.id,
            name: o.name,
            email: o.email,
            role: o.role,
        })
        .collect();
    Ok(page(&OperatorsPage {
        shell,
        operators,
        link: invited.map(|i| (i.operator.email, i.url, i.mailed)),
    }))
}

async fn list(
    State(state): State<AppState>,
    console: Console,
    Query(query): Query<Done>,
) -> Result<Response, Failure> {
    admin(&console)?;
    let shell = Shell::new(&console, "operators").told(query.done.as_deref(), DONE);
    render(&state, &console, shell, None).await
}

#[derive(Debug, Deserialize)]
struct InviteForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    email: String,
    #[serde(default)]
    name: String,
    #[serde(default)]
    role: String,
}

impl CarriesCsrf for InviteForm {
    fn csrf(&self) -> &str {
        &self.csrf
    }
}

async fn invite(
    State(state): State<AppState>,
    console: Console,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, Failure> {
    let fields: InviteForm = acting(&console, &body)?;
    admin(&console)?;
    let name = Some(fields.name.trim()).filter(|n| !n.is_empty());
    let new = new_operator(
        console.caller.workspace_id,
        Some(fields.email.trim()),
        name,
        Some(fields.role.as_str()),
    )
    .map_err(|error| Failure::new(&console, error))?;
    let base = invitations::base_url(&state.settings, &headers);
    let invited = invitations::invite(&state.db, &state.settings, &base, new)
        .await
        .map_err(|error| Failure::new(&console, invitation_refused(error)))?;
    render(
        &state,
        &console,
        Shell::new(&console, "operators"),
        Some(invited),
    )
    .await
}

/// Disables or enables operator `id`.
async fn set_disabled(
    state: &AppState,
    console: &Console,
    id: &str,
    disabled: bool,
) -> Result<Response, Failure> {
    admin(console)?;
    let id = parse_uuid(id, "id").map_err(|e| Failure::new(console, e))?;
    let change = OperatorChange {
        disabled: Some(disabled),
        ..OperatorChange::default()
    };
    let workspace_id = console.caller.workspace_id;
    operators::change(&state.db, workspace_id, id, change, clock::now())
        .await?
        .ok_or_else(|| Failure::new(console, ApiError::NotFound("Operator")))?;
    if disabled {
        state
            .actors
            .changes()
            .announce(&parley_actors::Change::Inbox { workspace_id });
    }
    let done = if disabled { "disabled" } else { "enabled" };
    Ok(see_other(&format!("/console/operators?done={done}")))
}

async fn disable(
    State(state): State<AppState>,
    console: Console,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<Response, Failure> {
    let _: Plain = acting(&console, &body)?;
    set_disabled(&state, &console, &id, true).await
}

async fn enable(
    State(state): State<AppState>,
    console: Console,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<Response, Failure> {
    let _: Plain = acting(&console, &body)?;
    set_disabled(&state, &console, &id, false).await
}

async fn renew(
    State(state): State<AppState>,
    console: Console,
    headers: HeaderMap,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<Response, Failure> {
    let _: Plain = acting(&console, &body)?;
    admin(&console)?;
    let id = parse_uuid(&id, "id").map_err(|e| Failure::new(&console, e))?;
    let found = operators::find(&state.db, console.caller.workspace_id, id)
        .await?
        .ok_or_else(|| Failure::new(&console, ApiError::NotFound("Operator")))?;
    let base = invitations::base_url(&state.settings, &headers);
    let invited = invitations::renew(&state.db, &state.settings, &base, found).await?;
    render(
        &state,
        &console,
        Shell::new(&console, "operators"),
        Some(invited),
    )
    .await
}
