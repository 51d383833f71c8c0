//! Saved replies: text a workspace's operators send by its shortcut (`/greeting`), listed,
//! added and deleted here.

use askama::Template;
use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::response::Response;
use axum::routing::{get, post};
use parley_persistence::entities::saved_reply;
use parley_persistence::operators::saved_replies;
use parley_persistence::{PersistenceError, clock};
use serde::Deserialize;
use serde_json::Value;

use crate::http::AppState;
use crate::http::error::ApiError;
use crate::http::validation::{Problems, parse_uuid, text_field};

use super::session::Console;
use super::view::{Done, Shell};
use super::{CarriesCsrf, Failure, Plain, acting, page, see_other};

/// The longest shortcut.
const SHORTCUT_LIMIT: usize = 40;

const DONE: &[(&str, &str)] = &[
    ("saved", "The reply is saved."),
    ("deleted", "The reply is deleted."),
];

pub(super) fn router() -> Router<AppState> {
    Router::new()
        .route("/console/saved-replies", get(list).post(create))
        .route("/console/saved-replies/{id}/delete", post(delete))
}

/// Whether `c` may stand in a shortcut.
pub(super) fn shortcut_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '-' || c == '_'
}

#[derive(Template)]
#[template(path = "console/saved_replies.html")]
struct SavedRepliesPage {
    shell: Shell,
    replies: Vec<saved_reply::Model>,
}

async fn list(
    State(state): State<AppState>,
    console: Console,
    Query(query): Query<Done>,
) -> Result<Response, Failure> {
    let replies = saved_replies::list(&state.db, console.caller.workspace_id).await?;
    Ok(page(&SavedRepliesPage {
        shell: Shell::new(&console, "saved-replies").told(query.done.as_deref(), DONE),
        replies,
    }))
}

#[derive(Debug, Deserialize)]
struct SaveForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    shortcut: String,
    #[serde(default)]
    text: String,
}

impl CarriesCsrf for SaveForm {
    fn csrf(&self) -> &str {
        &self.csrf
    }
}

async fn create(
    State(state): State<AppState>,
    console: Console,
    body: Bytes,
) -> Result<Response, Failure> {
    let fields: SaveForm = acting(&console, &body)?;
    let shortcut = fields.shortcut.trim().trim_start_matches('/').to_owned();
    let mut problems = Problems::default();
    if shortcut.is_empty()
        || shortcut.len() > SHORTCUT_LIMIT
        || !shortcut.chars().all(shortcut_char)
    {
        problems.add(
            ["shortcut"],
            "must be 1 to 40 letters, digits, hyphens or underscores",
        );
    }
    let text = text_field(&mut problems, "text", Some(&Value::String(fields.text)));
    problems
        .finish()
        .map_err(|error| Failure::new(&console, error))?;
    saved_replies::create(
        &state.db,
        console.caller.workspace_id,
        &shortcut,
        text,
        clock::now(),
    )
    .await
    .map_err(|error| match error {
        PersistenceError::Conflict(_) => Failure::new(
            &console,
            ApiError::Conflict(format!("/{shortcut} is saved already; delete it first")),
        ),
        other => Failure::new(&console, other),
    })?;
    Ok(see_other("/console/saved-replies?done=saved"))
}

async fn delete(
    State(state): State<AppState>,
    console: Console,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<Response, Failure> {
    let _: Plain = acting(&console, &body)?;
    let id = parse_uuid(&id, "id").map_err(|e| Failure::new(&console, e))?;
    if !saved_replies::delete(&state.db, console.caller.workspace_id, id).await? {
        return Err(Failure::new(&console, ApiError::NotFound("Saved reply")));
    }
    Ok(see_other("/console/saved-replies?done=deleted"))
}
