//! Answering an invitation: the one-time link `/console/invitation/{token}` shows a form where
//! the invited operator chooses their name and password (argon2id); used once, within 48 hours.
//! A link used twice, expired or unknown is refused with a sentence; a weak password with what
//! it lacks.

use askama::Template;
use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::get;
use parley_persistence::entities::operator;
use parley_persistence::{clock, operators};
use serde::Deserialize;

use crate::http::AppState;

use super::session::digest;
use super::{Failure, page_with, password, see_other};

pub(super) fn router() -> Router<AppState> {
    Router::new().route(
        "/console/invitation/{token}",
        get(invitation_page).post(accept),
    )
}

#[derive(Template)]
#[template(path = "console/invitation.html")]
struct InvitationPage {
    token: String,
    /// The invited address; `None` when the link is refused (no form then).
    email: Option<String>,
    name: String,
    problem: Option<String>,
}

/// The operator a link invites, or the page refusing it.
async fn invited(
    state: &AppState,
    token: &str,
) -> Result<Result<operator::Model, Box<Response>>, Failure> {
    let refused = |status, sentence: &str| {
        Err(Box::new(page_with(
            status,
            &InvitationPage {
                token: String::new(),
                email: None,
                name: String::new(),
                problem: Some(sentence.to_owned()),
            },
        )))
    };
    let Some((invitation, operator)) =
        operators::find_invitation(&state.db, &digest(token)).await?
    else {
        return Ok(refused(
            StatusCode::NOT_FOUND,
            "This invitation link is not known: check that it was copied whole, or ask your \
             workspace's admin for a new one.",
        ));
    };
    if invitation.used_at.is_some() {
        return Ok(refused(
            StatusCode::GONE,
            "This invitation link was already used; sign in with your password, or ask your \
             workspace's admin for a new link.",
        ));
    }
    if invitation.expires_at <= clock::now() {
        return Ok(refused(
            StatusCode::GONE,
            "This invitation link expired (links last 48 hours); ask your workspace's admin \
             for a new one.",
        ));
    }
    if operator.disabled_at.is_some() {
        return Ok(refused(
            StatusCode::GONE,
            "This operator was disabled; ask your workspace's admin.",
        ));
    }
    Ok(Ok(operator))
}

async fn invitation_page(
    State(state): State<AppState>,
    Path(token): Path<String>,
) -> Result<Response, Failure> {
    let operator = match invited(&state, &token).await? {
        Ok(operator) => operator,
        Err(page) => return Ok(*page),
    };
    Ok(page_with(
        StatusCode::OK,
        &InvitationPage {
            token,
            email: Some(operator.email),
            name: operator.name,
            problem: None,
        },
    ))
}

#[derive(Debug, Default, Deserialize)]
struct AcceptForm {
    #[serde(default)]
    name: String,
    #[serde(default)]
    password: String,
    #[serde(default)]
    confirm: String,
}

/// Sets the operator's name and password, once; then to the sign-in page.
async fn accept(
    State(state): State<AppState>,
    Path(token): Path<String>,
    body: Bytes,
) -> Result<Response, Failure> {
    let operator = match invited(&state, &token).await? {
        Ok(operator) => operator,
        Err(page) => return Ok(*page),
    };
    let fields: AcceptForm = serde_urlencoded::from_bytes(&body).unwrap_or_default();
    let name = fields.name.trim().to_owned();
    let again = |problem: String| {
        page_with(
            StatusCode::BAD_REQUEST,
            &InvitationPage {
                token: token.clone(),
                email: Some(operator.email.clone()),
                name: if name.is_empty() {
                    operator.name.clone()
                } else {
                    name.clone()
                },
                problem: Some(problem),
            },
        )
    };
    if name.is_empty() || name.chars().count() > 100 || name.contains('\0') {
        return Ok(again(
            "Enter your name (at most 100 characters).".to_owned(),
        ));
    }
    let missing = password::missing(&fields.password, &operator.email);
    if !missing.is_empty() {
        return Ok(again(format!(
            "That password is too weak: it needs {}.",
            missing.join(", ")
        )));
    }
    if fields.password != fields.confirm {
        return Ok(again(
            "The two passwords differ; type the same password twice.".to_owned(),
        ));
    }
    let hash = password::hash(fields.password).await?;
    let accepted = operators::accept(
        &state.db,
        &digest(&token),
        operator.id,
        &name,
        hash,
        clock::now(),
    )
    .await?;
    if !accepted {
        return Ok(page_with(
            StatusCode::GONE,
            &InvitationPage {
                token: String::new(),
                email: None,
                name: String::new(),
                problem: Some(
                    "This invitation link was already used; sign in with your password.".to_owned(),
                ),
            },
        ));
    }
    tracing::info!(operator_id = %operator.id, "an operator set their password");
    Ok(see_other("/console/sign-in?why=welcome"))
}
