//! One conversation: its messages by role (tool calls folded), the statuses of what was sent,
//! and the controls a person uses to step in: hand over, give back, reply.

use std::time::Duration;

use askama::Template;
use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use parley_actors::outbound::FreeForm;
use parley_actors::thread::Thread;
use parley_persistence::entities::conversation;
use parley_persistence::{ConversationStatus, clock};
use parley_persistence::{conversations, identities, inbox};
use serde::Deserialize;
use serde_json::Value;
use uuid::Uuid;

use crate::http::AppState;
use crate::http::error::ApiError;
use crate::http::lookup::channel_of;
use crate::http::validation::{Problems, optional_text, text_field};

mod desk;
mod file;
mod lines;

use self::lines::Line;
use super::session::Console;
use super::view::{Done, Shell};
use super::{CarriesCsrf, Failure, Plain, acting, live, named, page, page_with, see_other};

/// Messages a conversation page shows (the newest).
const SHOWN: u64 = 200;

/// Longest reason of a handoff, as the API takes it.
const REASON_LIMIT: usize = 1024;

/// What a finished action says on the page it returns to.
const DONE: &[(&str, &str)] = &[
    (
        "handed",
        "The conversation is yours: the assistant stays quiet until you give it back.",
    ),
    ("resumed", "The assistant answers this conversation again."),
    ("sent", "Your message went out through the channel."),
    ("assigned", "The conversation's assignment changed."),
    (
        "noted",
        "Your note is kept with the conversation, for operators only.",
    ),
];

/// `file_limit`: the largest form a file reply may post (the largest file WhatsApp sends).
pub(super) fn router(file_limit: usize) -> Router<AppState> {
    Router::new()
        .route("/console/conversations/{id}", get(conversation_page))
        .route(
            "/console/conversations/{id}/messages",
            get(messages_fragment),
        )
        .route("/console/conversations/{id}/live", get(conversation_live))
        .route("/console/conversations/{id}/handoff", post(hand_over))
        .route("/console/conversations/{id}/resume", post(give_back))
        .route("/console/conversations/{id}/reply", post(reply))
        .route(
            "/console/conversations/{id}/reply/file",
            post(file::reply_with_file).layer(DefaultBodyLimit::max(file_limit)),
        )
        .route("/console/media/{id}", get(media))
        .merge(desk::router())
}

/// What the live part of the page shows: how the conversation is answered, and its messages.
pub(super) struct Live {
    id: Uuid,
    mode: &'static str,
    open: bool,
    reason: String,
    lines: Vec<Line>,
    /// The operator it is assigned to, by name.
    assignee: Option<String>,
    /// Its private notes, oldest first.
    notes: Vec<desk::NoteLine>,
    /// The oldest message shown, when older ones exist: where the history's next page starts.
    older: Option<Uuid>,
}

#[derive(Template)]
#[template(path = "console/conversation.html")]
struct ConversationPage {
    shell: Shell,
    id: Uuid,
    who: String,
    phone: String,
    channel: String,
    live: Live,
    /// Whether the session may assign the conversation to anyone.
    may_supervise: bool,
    /// Whether an operator is signed in who does not have it (and may take it).
    may_take: bool,
    /// Whom a supervisor may assign it to, and whether they have it now.
    operators: Vec<(Uuid, String, bool)>,
    /// The workspace's saved replies: shortcut and text.
    saved: Vec<(String, String)>,
}

#[derive(Template)]
#[template(path = "console/conversation_messages.html")]
struct MessagesFragment {
    live: Live,
}

async fn conversation_page(
    State(state): State<AppState>,
    console: Console,
    Path(id): Path<String>,
    Query(query): Query<Done>,
) -> Result<Response, Failure> {
    let found = find(&state, &console, &id).await?;
    let shell = Shell::new(&console, "conversations").told(query.done.as_deref(), DONE);
    render(&state, &console, found, shell, StatusCode::OK).await
}

async fn messages_fragment(
    State(state): State<AppState>,
    console: Console,
    Path(id): Path<String>,
) -> Result<Response, Failure> {
    let found = find(&state, &console, &id).await?;
    Ok(page(&MessagesFragment {
        live: live_part(&state, &found).await?,
    }))
}

/// `changed` when a message arrives, one's status moves, or the mode changes.
async fn conversation_live(
    State(state): State<AppState>,
    console: Console,
    Path(id): Path<String>,
) -> Result<impl IntoResponse, Failure> {
    let found = find(&state, &console, &id).await?;
    Ok(live::changes(
        state,
        found.workspace_id,
        console.token,
        move |state: AppState| async move { inbox::conversation_mark(&state.db, found.id).await },
    ))
}

async fn find(
    state: &AppState,
    console: &Console,
    raw: &str,
) -> Result<conversation::Model, Failure> {
    let workspace_id = console.caller.workspace_id;
    named(console, raw, "conversation_id", "Conversation", |id| {
        conversations::find(&state.db, workspace_id, id)
    })
    .await
}

/// The page of `found`, with `shell`'s notice or problem, answered with `status`.
async fn render(
    state: &AppState,
    console: &Console,
    found: conversation::Model,
    shell: Shell,
    status: StatusCode,
) -> Result<Response, Failure> {
    let workspace_id = found.workspace_id;
    let person = identities::find(&state.db, workspace_id, found.identity_id).await?;
    let phone = identities::contacts_of(&state.db, &[found.identity_id])
        .await?
        .into_iter()
        .find(|c| c.kind == parley_persistence::ContactKind::Phone)
        .map(|c| c.value)
        .unwrap_or_default();
    let channel = parley_persistence::channels::find(&state.db, workspace_id, found.channel_id)
        .await?
        .map_or_else(|| "a deleted channel".to_owned(), |c| c.name);
    let live = live_part(state, &found).await?;
    let operators = if console.may_supervise() {
        parley_persistence::operators::active(&state.db, workspace_id)
            .await?
            .into_iter()
            .filter(|o| o.password_hash.is_some())
            .map(|o| (o.id, o.name, found.assigned_operator_id == Some(o.id)))
            .collect()
    } else {
        Vec::new()
    };
    let saved = parley_persistence::operators::saved_replies::list(&state.db, workspace_id)
        .await?
        .into_iter()
        .map(|r| (r.shortcut, super::view::clipped(&r.text, 80)))
        .collect();
    Ok(page_with(
        status,
        &ConversationPage {
            shell,
            id: found.id,
            who: person
                .and_then(|p| p.name)
                .unwrap_or_else(|| "Unnamed person".to_owned()),
            phone,
            channel,
            live,
            may_supervise: console.may_supervise(),
            may_take: console
                .operator_id()
                .is_some_and(|me| found.assigned_operator_id != Some(me)),
            operators,
            saved,
        },
    ))
}

async fn live_part(state: &AppState, found: &conversation::Model) -> Result<Live, Failure> {
    let idle_since = clock::now() - state.settings.actors.conversation_idle();
    let (lines, older) = desk::history_page(state, found.id, None).await?;
    let (assignee, notes) = desk::assignee_and_notes(state, found).await?;
    Ok(Live {
        id: found.id,
        mode: found.mode.as_str(),
        open: found.status == ConversationStatus::Open && found.last_message_at > idle_since,
        reason: found.handoff_reason.clone().unwrap_or_default(),
        lines,
        assignee,
        notes,
        older,
    })
}

/// A file a person sent, from the console's session: shown in place (a picture, a voice
/// note, a video) or downloaded (a document).
async fn media(
    State(state): State<AppState>,
    console: Console,
    Path(id): Path<String>,
    headers: axum::http::HeaderMap,
) -> Result<Response, Failure> {
    let id = crate::http::validation::parse_uuid(&id, "id")?;
    let workspace_id = console.caller.workspace_id;
    Ok(crate::http::response::serve_attachment(&state, workspace_id, id, &headers).await?)
}

#[derive(Debug, Deserialize)]
struct HandoffForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    reason: String,
}

impl CarriesCsrf for HandoffForm {
    fn csrf(&self) -> &str {
        &self.csrf
    }
}

#[derive(Debug, Deserialize)]
struct ReplyForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    text: String,
}

impl CarriesCsrf for ReplyForm {
    fn csrf(&self) -> &str {
        &self.csrf
    }
}

async fn hand_over(
    State(state): State<AppState>,
    console: Console,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<Response, Failure> {
    let fields: HandoffForm = acting(&console, &body)?;
    let found = find(&state, &console, &id).await?;
    let mut problems = Problems::default();
    let reason = Some(fields.reason.trim().to_owned()).filter(|r| !r.is_empty());
    let reason = optional_text(&mut problems, "reason", reason, REASON_LIMIT);
    let conversations = state.actors.conversations();
    let changed = match problems.finish() {
        Ok(()) => conversations
            .hand_over(
                found.workspace_id,
                found.identity_id,
                found.channel_id,
                reason,
            )
            .await
            .map_err(ApiError::from),
        Err(error) => Err(error),
    };
    if let (Ok(handed), Some(_)) = (&changed, console.operator_id()) {
        desk::assign_to_self(&state, &console, handed).await?;
    }
    settle(&state, &console, found, changed.map(|c| (c.id, "handed"))).await
}

async fn give_back(
    State(state): State<AppState>,
    console: Console,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<Response, Failure> {
    let _: Plain = acting(&console, &body)?;
    let found = find(&state, &console, &id).await?;
    let conversations = state.actors.conversations();
    let changed = conversations
        .give_back(found.workspace_id, found.identity_id, found.channel_id)
        .await
        .map_err(ApiError::from);
    settle(&state, &console, found, changed.map(|c| (c.id, "resumed"))).await
}

async fn reply(
    State(state): State<AppState>,
    console: Console,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<Response, Failure> {
    let fields: ReplyForm = acting(&console, &body)?;
    let found = find(&state, &console, &id).await?;
    let text = desk::expand_shortcut(&state, &console, fields.text).await?;
    let sent = send(&state, &console, &found, text).await;
    settle(
        &state,
        &console,
        found,
        sent.map(|s| (s.conversation_id, "sent")),
    )
    .await
}

async fn send(
    state: &AppState,
    console: &Console,
    found: &conversation::Model,
    text: String,
) -> Result<parley_actors::outbound::Sent, ApiError> {
    let mut problems = Problems::default();
    let text = text_field(&mut problems, "text", Some(&Value::String(text)));
    problems.finish()?;
    let channel = channel_of(state, &console.caller, found.channel_id).await?;
    let thread = Thread {
        workspace_id: found.workspace_id,
        identity_id: found.identity_id,
        channel_id: found.channel_id,
    };
    let patience = Duration::from_secs(state.settings.server.send_timeout_secs);
    let outbox = state.actors.outbox();
    Ok(outbox
        .reply_as_operator(
            &channel,
            thread,
            FreeForm::Text(text),
            console.author(),
            patience,
        )
        .await?)
}

/// After an action: to the conversation it left (a new one when none was open), saying what
/// happened; or this page again with why it was refused.
async fn settle(
    state: &AppState,
    console: &Console,
    found: conversation::Model,
    outcome: Result<(Uuid, &'static str), ApiError>,
) -> Result<Response, Failure> {
    match outcome {
        Ok((id, done)) => Ok(see_other(&format!(
            "/console/conversations/{id}?done={done}"
        ))),
        Err(error) => {
            let status = error.status();
            let shell = Shell::new(console, "conversations").refused(error.public_message());
            render(state, console, found, shell, status).await
        }
    }
}
