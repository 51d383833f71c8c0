//! Driving a conversation over HTTP: `POST /conversation/{identity_id}/chat/{channel_id}`
//! (synchronous) and `GET /conversation/{identity_id}/streaming?channel_id=&message=` (Server-Sent
//! Events). Both run the turn in the identity's conversation actor; neither sends the reply
//! through WhatsApp. A streaming client that disconnects does not cancel the turn.

use std::convert::Infallible;
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::routing::{get, post};
use parley_actors::llm::{LlmError, Usage};
use parley_actors::{Conversations, ToolCallRecord, TurnError, TurnOutcome, TurnRequest};
use parley_persistence::assistants;
use parley_persistence::entities::channel;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_stream::Stream;
use tokio_stream::wrappers::ReceiverStream;
use uuid::Uuid;

use crate::domain::Permission;
use crate::http::AppState;
use crate::http::auth::Caller;
use crate::http::channels::find_channel;
use crate::http::envelope::Envelope;
use crate::http::error::{ApiError, Result};
use crate::http::extract::{Json, Path, Query};
use crate::http::identities::require;
use crate::http::validation::{Problems, object_or_empty};

/// Longest message accepted, in characters (WhatsApp's text limit).
const MAX_MESSAGE_CHARS: usize = 4096;
/// Comment lines that keep idle proxies from closing a stream.
const KEEP_ALIVE: Duration = Duration::from_secs(15);

pub(crate) fn router() -> Router<AppState> {
    Router::new()
        .route("/conversation/{identity_id}/chat/{channel_id}", post(chat))
        .route("/conversation/{identity_id}/streaming", get(stream))
}

#[derive(Debug, Deserialize)]
struct ChatBody {
    message: Option<Value>,
    metadata: Option<Value>,
}

/// The chat answer's `data`.
#[derive(Debug, Serialize)]
struct ChatData {
    conversation_id: Uuid,
    message_id: Uuid,
    reply: String,
    tool_calls: Vec<ToolCallRecord>,
    usage: Usage,
    /// Whether `reply` is the assistant's fallback message because the model failed.
    fallback: bool,
}

impl From<TurnOutcome> for ChatData {
    fn from(o: TurnOutcome) -> Self {
        Self {
            conversation_id: o.conversation_id,
            message_id: o.message_id,
            reply: o.reply,
            tool_calls: o.tool_calls,
            usage: o.usage,
            fallback: o.fallback,
        }
    }
}

#[tracing::instrument(skip_all, fields(workspace_id = caller.workspace_id, channel_id = %channel_id))]
async fn chat(
    caller: Caller,
    State(state): State<AppState>,
    Path((identity_id, channel_id)): Path<(String, String)>,
    Json(body): Json<ChatBody>,
) -> Result<Envelope<ChatData>> {
    caller.require(Permission::Write)?;
    let mut problems = Problems::default();
    let text = message_text(&mut problems, body.message.as_ref());
    object_or_empty(&mut problems, "metadata", body.metadata);
    problems.finish()?;
    let (identity, channel) = resolve(&state, &caller, &identity_id, &channel_id).await?;
    let outcome = conversations(&state)?
        .turn(
            caller.workspace_id,
            identity,
            TurnRequest {
                channel_id: channel.id,
                text,
                stream: None,
                platform_message_id: None,
            },
        )
        .await
        .map_err(turn_error)?;
    Ok(Envelope::ok(outcome.reply.clone(), outcome.into()))
}

#[derive(Debug, Deserialize)]
struct StreamQuery {
    channel_id: Option<String>,
    message: Option<String>,
}

#[tracing::instrument(skip_all, fields(workspace_id = caller.workspace_id))]
async fn stream(
    caller: Caller,
    State(state): State<AppState>,
    Path(identity_id): Path<String>,
    Query(query): Query<StreamQuery>,
) -> Result<Sse<impl Stream<Item = std::result::Result<Event, Infallible>>>> {
    caller.require(Permission::Write)?;
    let mut problems = Problems::default();
    if query
        .channel_id
        .as_deref()
        .is_none_or(|c| c.trim().is_empty())
    {
        problems.add(["channel_id"], "is required");
    }
    let text = message_text(&mut problems, query.message.map(Value::String).as_ref());
    problems.finish()?;
    let channel_id = query.channel_id.unwrap_or_default();
    let (identity, channel) = resolve(&state, &caller, &identity_id, &channel_id).await?;
    let conversations = conversations(&state)?;

    let (events_tx, events_rx) = mpsc::channel::<Event>(256);
    let (tokens_tx, mut tokens_rx) = mpsc::channel::<String>(256);
    let workspace_id = caller.workspace_id;
    // The turn runs in the identity's actor whatever happens to this connection; this task
    // only relays what it produces.
    tokio::spawn(async move {
        let relay_events = events_tx.clone();
        let relay = tokio::spawn(async move {
            while let Some(token) = tokens_rx.recv().await {
                let _ = relay_events
                    .send(event(&json!({"type": "token", "content": token})))
                    .await;
            }
        });
        let request = TurnRequest {
            channel_id: channel.id,
            text,
            stream: Some(tokens_tx),
            platform_message_id: None,
        };
        let outcome = conversations.turn(workspace_id, identity, request).await;
        let _ = relay.await;
        let last = match outcome {
            Ok(outcome) => json!({
                "type": "complete",
                "content": outcome.reply,
                "conversation_id": outcome.conversation_id,
                "message_id": outcome.message_id,
                "fallback": outcome.fallback,
            }),
            Err(error) => {
                let error = turn_error(error);
                json!({"type": "error", "content": error.to_string(), "code": error.code()})
            }
        };
        let _ = events_tx.send(event(&last)).await;
    });
    let stream = tokio_stream::StreamExt::map(ReceiverStream::new(events_rx), Ok);
    Ok(Sse::new(stream).keep_alive(KeepAlive::new().interval(KEEP_ALIVE).text("keep-alive")))
}

fn event(data: &Value) -> Event {
    Event::default().data(data.to_string())
}

/// The message text: present, a string, not blank, at most 4096 characters.
fn message_text(problems: &mut Problems, value: Option<&Value>) -> String {
    match value {
        Some(Value::String(text)) if text.trim().is_empty() => {
            problems.add(["message"], "must not be empty");
        }
        Some(Value::String(text)) if text.chars().count() > MAX_MESSAGE_CHARS => {
            problems.add(
                ["message"],
                format!("must be at most {MAX_MESSAGE_CHARS} characters"),
            );
        }
        Some(Value::String(text)) => return text.clone(),
        Some(_) => problems.add(["message"], "must be a string"),
        None => problems.add(["message"], "is required"),
    }
    String::new()
}

/// The identity and channel of a conversation call, refusing up front what the actor would:
/// 404 for an unknown identity or channel, 409 when no assistant answers on the channel.
async fn resolve(
    state: &AppState,
    caller: &Caller,
    identity_id: &str,
    channel_id: &str,
) -> Result<(Uuid, channel::Model)> {
    let identity = require(&state.db, caller.workspace_id, identity_id).await?;
    let channel = find_channel(state, caller, channel_id).await?;
    let has_assistant = match channel.worker_id {
        Some(worker) => !assistants::list_for_worker(&state.db, caller.workspace_id, worker)
            .await?
            .is_empty(),
        None => false,
    };
    if !has_assistant {
        return Err(ApiError::Conflict(
            "The channel has no synced worker with an assistant".to_owned(),
        ));
    }
    Ok((identity.id, channel))
}

fn conversations(state: &AppState) -> Result<Conversations> {
    state
        .actors
        .conversations()
        .map_err(|e| ApiError::Unavailable {
            code: "not_ready",
            message: e.to_string(),
        })
}

fn turn_error(error: TurnError) -> ApiError {
    match error {
        TurnError::IdentityNotFound => ApiError::NotFound("Identity"),
        TurnError::ChannelNotFound => ApiError::NotFound("Channel"),
        TurnError::NoAssistant => ApiError::Conflict(error.to_string()),
        TurnError::Llm(LlmError::NotConfigured) => ApiError::Unavailable {
            code: "llm_not_configured",
            message: LlmError::NotConfigured.to_string(),
        },
        TurnError::Llm(e @ LlmError::Timeout(_)) => ApiError::UpstreamTimeout(e.to_string()),
        TurnError::Llm(e) => ApiError::UpstreamFailed(e.to_string()),
        TurnError::Timeout => ApiError::UpstreamTimeout(
            "The turn did not finish in time; it goes on and its reply will be stored".to_owned(),
        ),
        TurnError::Template(_) | TurnError::Storage(_) | TurnError::Unavailable(_) => {
            ApiError::Internal(anyhow::anyhow!(error))
        }
    }
}
