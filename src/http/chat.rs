//! Driving a conversation over HTTP: `POST /conversation/{identity_id}/chat/{channel_id}`
//! (synchronous) and `GET /conversation/{identity_id}/streaming?channel_id=&message=` (Server-Sent
//! Events). Both run the turn in the identity's conversation actor, which is the one authority
//! on whether the identity, the channel and an assistant exist; neither sends the reply through
//! WhatsApp. A streaming client that disconnects does not cancel the turn, and a stream starts
//! only once the actor accepted the turn, so refusals keep their HTTP status.

use std::convert::Infallible;
use std::time::Duration;

use axum::extract::State;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use parley_actors::llm::Usage;
use parley_actors::{ToolCallRecord, TurnError, TurnEvent, TurnOrigin, TurnOutcome, TurnRequest};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio::task::JoinError;
use uuid::Uuid;

use crate::domain::Permission;
use crate::http::AppState;
use crate::http::auth::Caller;
use crate::http::envelope::Envelope;
use crate::http::error::Refusal;
use crate::http::error::{ApiError, Result};
use crate::http::extract::{Json, Path, Query};
use crate::http::lookup::identity_id_of;
use crate::http::validation::{Problems, object_or_empty, parse_uuid, text_field};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
/// Comment lines that keep idle proxies from closing a stream.
const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// How long after the actor accepted a streamed turn its response starts, unless the turn
/// has something to say sooner (a token, its end). Accepted, the turn is about to send its
/// request to the model: writing the response head at that moment (and the client reading
/// it) takes the cores that request needs on its way: about 0.07 ms of each first token on
/// a 2-core machine (benches/README.md). Nothing waits for the head itself.
const HEAD_AFTER: Duration = Duration::from_millis(5);

pub(crate) fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(chat))
        .routes(routes!(stream))
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
struct ChatBody {
    /// What the person says: not blank, at most 4096 characters.
    #[schema(required = true, value_type = String, min_length = 1, max_length = 4096)]
    message: Option<Value>,
    #[schema(value_type = Option<Object>)]
    metadata: Option<Value>,
}

/// The chat answer's `data`.
#[derive(Debug, Serialize, utoipa::ToSchema)]
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

/// Talk to an assistant and wait for its answer.
///
/// The person's memory and stage join the assistant's instructions; the answer is kept in the
/// conversation.
#[utoipa::path(
    post,
    path = "/conversation/{identity_id}/chat/{channel_id}",
    tag = "conversation",
    params(("identity_id" = String, Path, description = "Identity: its id, or a path resolving to one (`external_id`, phone, e-mail)"), ("channel_id" = String, Path, format = Uuid, description = "Channel id")),
    request_body = ChatBody,
    responses((status = 200, body = Envelope<ChatData>), (status = 502, body = Refusal), (status = 504, body = Refusal)),
)]
#[tracing::instrument(skip_all, fields(workspace_id = caller.workspace_id, channel_id = %channel_id))]
async fn chat(
    caller: Caller,
    State(state): State<AppState>,
    Path((identity_id, channel_id)): Path<(String, String)>,
    Json(body): Json<ChatBody>,
) -> Result<Response> {
    caller.require(Permission::Write)?;
    let mut problems = Problems::default();
    let text = text_field(&mut problems, "message", body.message.as_ref());
    let metadata = body
        .metadata
        .map(|m| object_or_empty(&mut problems, "metadata", Some(m)));
    problems.finish()?;
    let channel_id = parse_uuid(&channel_id, "channel_id")?;
    let identity = identity_id_of(&state, &caller, &identity_id).await?;
    let request = TurnRequest {
        channel_id,
        text,
        origin: TurnOrigin::Api { events: None },
        metadata,
        attachments: Vec::new(),
    };
    let outcome = state
        .actors
        .conversations()
        .turn(caller.workspace_id, identity, request)
        .await
        .map_err(ApiError::from)?;
    Ok(Envelope::ok(outcome.reply.clone(), ChatData::from(outcome)).into_response())
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
struct StreamQuery {
    #[param(required = true, value_type = uuid::Uuid)]
    channel_id: Option<String>,
    /// What the person says: not blank, at most 4096 characters.
    #[param(required = true, value_type = String, min_length = 1, max_length = 4096)]
    message: Option<String>,
}

/// Talk to an assistant and stream its answer.
///
/// Server-Sent Events of the kinds `token` (one per piece of the answer), then `complete` with
/// the whole reply, or `error`: each names its kind (`event: token`) and its data is JSON with
/// the same `type`.
#[utoipa::path(
    get,
    path = "/conversation/{identity_id}/streaming",
    tag = "conversation",
    params(("identity_id" = String, Path, description = "Identity: its id, or a path resolving to one (`external_id`, phone, e-mail)"), StreamQuery),
    responses(
        (status = 200, content_type = "text/event-stream", body = String,
         description = "Server-Sent Events: `token` events with text, then one `complete` event \
                        with the stored reply, or one `error` event"),
        (status = 409, body = Refusal),
    ),
)]
#[tracing::instrument(skip_all, fields(workspace_id = caller.workspace_id))]
async fn stream(
    caller: Caller,
    State(state): State<AppState>,
    Path(identity_id): Path<String>,
    Query(query): Query<StreamQuery>,
) -> Result<Response> {
    caller.require(Permission::Write)?;
    let mut problems = Problems::default();
    if query
        .channel_id
        .as_deref()
        .is_none_or(|c| c.trim().is_empty())
    {
        problems.add(["channel_id"], "is required");
    }
    let text = text_field(
        &mut problems,
        "message",
        query.message.map(Value::String).as_ref(),
    );
    problems.finish()?;
    let channel_id = query.channel_id.unwrap_or_default();
    let channel_id = parse_uuid(&channel_id, "channel_id")?;
    let identity = identity_id_of(&state, &caller, &identity_id).await?;
    let conversations = state.actors.conversations().clone();

    // The turn runs in the identity's actor whatever happens to this connection; the stream
    // only relays what it produces.
    let (turn_events, mut heard) = mpsc::channel::<TurnEvent>(256);
    let request = TurnRequest {
        channel_id,
        text,
        origin: TurnOrigin::Api {
            events: Some(turn_events),
        },
        metadata: None,
        attachments: Vec::new(),
    };
    let workspace_id = caller.workspace_id;
    let turn =
        tokio::spawn(async move { conversations.turn(workspace_id, identity, request).await });
    // Until the actor accepts the turn, a refusal (unknown channel, no assistant) is still an
    // HTTP status rather than an event.
    if heard.recv().await != Some(TurnEvent::Accepted) {
        let outcome = turn
            .await
            .map_err(|e| ApiError::Internal(anyhow::anyhow!("the turn task failed: {e}")))?;
        let error = outcome.err().unwrap_or_else(|| {
            TurnError::Storage("the turn ended without being accepted".to_owned())
        });
        return Err(error.into());
    }

    // An event that comes before the head is due goes out with it.
    let early = tokio::time::timeout(HEAD_AFTER, heard.recv()).await.ok();

    // The connection polls the turn's events itself: tokens as they come, then the ending.
    let stream = futures_util::stream::unfold(Some((early, heard, turn)), |relay| async move {
        let (early, mut heard, turn) = relay?;
        let next = match early {
            Some(early) => early,
            None => heard.recv().await,
        };
        if let Some(TurnEvent::Token(token)) = next {
            let token = event("token", &json!({"type": "token", "content": token}));
            return Some((Ok::<_, Infallible>(token), Some((None, heard, turn))));
        }
        let (kind, data) = ending(turn.await);
        Some((Ok(event(kind, &data)), None))
    });
    let events =
        Sse::new(stream).keep_alive(KeepAlive::new().interval(KEEP_ALIVE).text("keep-alive"));
    Ok(events.into_response())
}

/// The last event of a stream, with its kind: the stored reply (`complete`), or why there is
/// none (`error`).
fn ending(
    turn: std::result::Result<std::result::Result<TurnOutcome, TurnError>, JoinError>,
) -> (&'static str, Value) {
    let data = match turn {
        Ok(Ok(outcome)) => json!({
            "type": "complete",
            "content": outcome.reply,
            "conversation_id": outcome.conversation_id,
            "message_id": outcome.message_id,
            "fallback": outcome.fallback,
        }),
        Ok(Err(error)) => {
            let error = ApiError::from(error);
            json!({"type": "error", "content": error.public_message(), "code": error.code()})
        }
        Err(error) => {
            tracing::error!(%error, "the turn task failed");
            json!({"type": "error", "content": "The turn failed", "code": "internal_error"})
        }
    };
    let kind = if data["type"] == "complete" {
        "complete"
    } else {
        "error"
    };
    (kind, data)
}

/// An event of `kind` (the specification's `token`, `complete`, `error`), its data carrying
/// the same `type` for clients that read only the data.
fn event(kind: &'static str, data: &Value) -> Event {
    Event::default().event(kind).data(data.to_string())
}
