//! What operators do around a conversation besides answering: assign it (themselves, or
//! anyone when they supervise), keep private notes on it, read its older history, and send a
//! saved reply by its shortcut.

use askama::Template;
use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::response::Response;
use axum::routing::{get, post};
use parley_actors::assignment::{self, Why};
use parley_persistence::entities::conversation;
use parley_persistence::operators::{self, notes, saved_replies};
use parley_persistence::{clock, conversations};
use serde::Deserialize;
use serde_json::Value;
use uuid::Uuid;

use crate::http::AppState;
use crate::http::error::ApiError;
use crate::http::validation::{Problems, parse_uuid, text_field};

use super::super::session::Console;
use super::super::view::{Shell, when};
use super::super::{CarriesCsrf, Failure, acting, page, see_other};
use super::lines::Line;
use super::lines::line;
use super::{SHOWN, find};

pub(super) fn router() -> Router<AppState> {
    Router::new()
        .route("/console/conversations/{id}/assign", post(assign))
        .route("/console/conversations/{id}/notes", post(add_note))
        .route("/console/conversations/{id}/history", get(history))
}

/// A private note as the page shows it.
pub(in crate::http::console) struct NoteLine {
    pub(in crate::http::console) who: String,
    pub(in crate::http::console) text: String,
    pub(in crate::http::console) at: String,
}

/// Who `found` is assigned to (by name), and its notes.
pub(super) async fn assignee_and_notes(
    state: &AppState,
    found: &conversation::Model,
) -> Result<(Option<String>, Vec<NoteLine>), Failure> {
    let kept = notes::of_conversation(&state.db, found.id).await?;
    let mut writers: Vec<Uuid> = kept.iter().filter_map(|n| n.operator_id).collect();
    writers.extend(found.assigned_operator_id);
    let names = operators::names(&state.db, &writers).await?;
    let name_of = |id: Option<Uuid>| {
        id.map(|id| {
            names
                .get(&id)
                .cloned()
                .unwrap_or_else(|| "someone".to_owned())
        })
    };
    let assignee = name_of(found.assigned_operator_id);
    let lines = kept
        .into_iter()
        .map(|n| NoteLine {
            who: name_of(n.operator_id).unwrap_or_else(|| "An admin".to_owned()),
            text: n.text,
            at: when(n.created_at),
        })
        .collect();
    Ok((assignee, lines))
}

/// Assigns `conversation` to the operator signed in (on take-over).
pub(super) async fn assign_to_self(
    state: &AppState,
    console: &Console,
    conversation: &conversation::Model,
) -> Result<(), Failure> {
    let Some(me) = console.operator_id() else {
        return Ok(());
    };
    if conversation.assigned_operator_id == Some(me) {
        return Ok(());
    }
    let operator = operators::find(&state.db, conversation.workspace_id, me).await?;
    let actors = &state.actors;
    assignment::assign(
        &state.db,
        actors.events(),
        actors.changes(),
        conversation,
        operator.as_ref(),
        Why::Assigned,
    )
    .await?;
    Ok(())
}

#[derive(Debug, Deserialize)]
struct AssignForm {
    #[serde(default)]
    csrf: String,
    /// `me`, an operator's id, or empty (no one).
    #[serde(default)]
    operator: String,
}

impl CarriesCsrf for AssignForm {
    fn csrf(&self) -> &str {
        &self.csrf
    }
}

/// Assigns the conversation: an agent to themselves only; a supervisor (or a key that may
/// write) to anyone of the workspace, or to no one.
async fn assign(
    State(state): State<AppState>,
    console: Console,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<Response, Failure> {
    let fields: AssignForm = acting(&console, &body)?;
    let found = find(&state, &console, &id).await?;
    let me = console.operator_id();
    let to = match fields.operator.as_str() {
        "me" => Some(me.ok_or_else(|| {
            Failure::new(
                &console,
                ApiError::invalid_field(["operator"], "a key's session is no operator"),
            )
        })?),
        "" => None,
        raw => Some(parse_uuid(raw, "operator").map_err(|e| Failure::new(&console, e))?),
    };
    let own = to.is_some() && to == me || to.is_none() && found.assigned_operator_id == me;
    if !own && !console.may_supervise() {
        return Err(Failure::new(
            &console,
            ApiError::Forbidden(
                "Only a supervisor assigns conversations to others; you may assign one to \
                 yourself."
                    .to_owned(),
            ),
        ));
    }
    let operator = match to {
        Some(id) => Some(
            operators::find(&state.db, found.workspace_id, id)
                .await?
                .filter(|o| o.disabled_at.is_none() && o.password_hash.is_some())
                .ok_or_else(|| Failure::new(&console, ApiError::NotFound("Operator")))?,
        ),
        None => None,
    };
    let why = if operator.is_some() {
        Why::Assigned
    } else {
        Why::Unassigned
    };
    let actors = &state.actors;
    assignment::assign(
        &state.db,
        actors.events(),
        actors.changes(),
        &found,
        operator.as_ref(),
        why,
    )
    .await?;
    Ok(see_other(&format!(
        "/console/conversations/{}?done=assigned",
        found.id
    )))
}

#[derive(Debug, Deserialize)]
struct NoteForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    text: String,
}

impl CarriesCsrf for NoteForm {
    fn csrf(&self) -> &str {
        &self.csrf
    }
}

/// Keeps a private note on the conversation: for operators only, never sent, never in the
/// model's history.
async fn add_note(
    State(state): State<AppState>,
    console: Console,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<Response, Failure> {
    let fields: NoteForm = acting(&console, &body)?;
    let found = find(&state, &console, &id).await?;
    let mut problems = Problems::default();
    let text = text_field(&mut problems, "text", Some(&Value::String(fields.text)));
    problems
        .finish()
        .map_err(|error| Failure::new(&console, error))?;
    notes::add(&state.db, &found, console.operator_id(), text, clock::now()).await?;
    state
        .actors
        .changes()
        .announce(&parley_actors::Change::Inbox {
            workspace_id: found.workspace_id,
        });
    Ok(see_other(&format!(
        "/console/conversations/{}?done=noted",
        found.id
    )))
}

#[derive(Template)]
#[template(path = "console/history.html")]
struct HistoryPage {
    shell: Shell,
    id: Uuid,
    lines: Vec<Line>,
    older: Option<Uuid>,
}

#[derive(Debug, Deserialize)]
struct HistoryQuery {
    #[serde(default)]
    before: String,
}

/// The conversation's messages just before message `before`, a page at a time.
async fn history(
    State(state): State<AppState>,
    console: Console,
    Path(id): Path<String>,
    Query(query): Query<HistoryQuery>,
) -> Result<Response, Failure> {
    let found = find(&state, &console, &id).await?;
    let before_id = parse_uuid(&query.before, "before").map_err(|e| Failure::new(&console, e))?;
    let before = conversations::find_message(&state.db, before_id)
        .await?
        .filter(|m| m.conversation_id == found.id)
        .ok_or_else(|| Failure::new(&console, ApiError::NotFound("Message")))?;
    let (lines, older) = history_page(&state, found.id, Some(&before)).await?;
    Ok(page(&HistoryPage {
        shell: Shell::new(&console, "conversations"),
        id: found.id,
        lines,
        older,
    }))
}

/// The reply to send for `text`: a saved reply's text when `text` is its shortcut alone
/// (`/greeting`), else `text` itself. An unknown shortcut is refused, so that `/greting`
/// never reaches the person.
pub(super) async fn expand_shortcut(
    state: &AppState,
    console: &Console,
    text: String,
) -> Result<String, Failure> {
    let trimmed = text.trim();
    let Some(shortcut) = trimmed
        .strip_prefix('/')
        .filter(|s| !s.is_empty() && s.chars().all(super::super::saved_replies::shortcut_char))
    else {
        return Ok(text);
    };
    match saved_replies::find(&state.db, console.caller.workspace_id, shortcut).await? {
        Some(saved) => Ok(saved.text),
        None => Err(Failure::new(
            console,
            ApiError::invalid_field(
                ["text"],
                format!("/{shortcut} is no saved reply of this workspace"),
            ),
        )),
    }
}

/// One page of the conversation's messages (the newest [`SHOWN`], or those just before
/// `before`), with who wrote each, and the oldest shown when older ones exist.
pub(super) async fn history_page(
    state: &AppState,
    conversation_id: Uuid,
    before: Option<&parley_persistence::entities::message::Model>,
) -> Result<(Vec<Line>, Option<Uuid>), Failure> {
    let mut messages =
        conversations::messages_before(&state.db, conversation_id, before, SHOWN + 1).await?;
    let older = if messages.len() > usize::try_from(SHOWN).unwrap_or(usize::MAX) {
        messages.remove(0);
        messages.first().map(|m| m.id)
    } else {
        None
    };
    let ids: Vec<Uuid> = messages.iter().map(|m| m.id).collect();
    let mut files = parley_persistence::attachments::of_messages(&state.db, &ids).await?;
    let writers: Vec<Uuid> = messages.iter().filter_map(|m| m.operator_id).collect();
    let names = parley_persistence::operators::names(&state.db, &writers).await?;
    let lines = messages
        .into_iter()
        .map(|m| {
            let carried = files.remove(&m.id).unwrap_or_default();
            let by = m.operator_id.and_then(|id| names.get(&id).cloned());
            let mut shown = line(m, carried);
            shown.by = by.unwrap_or_default();
            shown
        })
        .collect();
    Ok((lines, older))
}
