//! Conversation reads: `GET /conversations` (filter by `identity_id`, `channel_id`, `mode`),
//! `GET /conversations/{id}` and `GET /conversations/{id}/messages`; and who answers them
//! ([`handoff`]).

mod handoff;

use std::collections::HashMap;

use axum::extract::State;
use chrono::{DateTime, Utc};
use parley_actors::thread;
use parley_persistence::attachments;
use parley_persistence::clock;
use parley_persistence::conversations::{self, ConversationFilter};
use parley_persistence::entities::{attachment, conversation, message};
use parley_persistence::{ConversationMode, ConversationStatus, Direction, MessageStatus, Role};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use uuid::Uuid;

use crate::domain::Permission;
use crate::http::AppState;
use crate::http::auth::Caller;
use crate::http::envelope::Envelope;
use crate::http::error::{ApiError, Result};
use crate::http::extract::{Path, Query};
use crate::http::lookup::find_channel;
use crate::http::lookup::find_identity;
use crate::http::pagination::{ListQuery, PageResponse, page_from};
use crate::http::response::AttachmentRecord;
use crate::http::validation::{Problems, parse_uuid};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub(crate) fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_conversations))
        .routes(routes!(get_conversation))
        .routes(routes!(list_messages))
        .merge(handoff::router())
}

/// A conversation as the API shows it.
#[derive(Debug, Serialize, utoipa::ToSchema)]
struct ConversationRecord {
    id: Uuid,
    identity_id: Uuid,
    channel_id: Uuid,
    assistant_id: Option<Uuid>,
    status: ConversationStatus,
    started_at: DateTime<Utc>,
    last_message_at: DateTime<Utc>,
    /// Who answers it: `assistant`, or `human` once handed to a person.
    mode: ConversationMode,
    /// When `mode` last changed (`null` while it never has).
    mode_changed_at: Option<DateTime<Utc>>,
    /// Why it was last handed to a person.
    handoff_reason: Option<String>,
    /// The model's prompt tokens spent on it, in all.
    prompt_tokens: i64,
    /// The model's completion tokens spent on it, in all.
    completion_tokens: i64,
}

impl ConversationRecord {
    /// The record of `c` as of `now`: a conversation idle for `idle_after` or longer is closed,
    /// whatever its row says (the next message starts a new one).
    fn new(c: conversation::Model, idle_after: chrono::Duration, now: DateTime<Utc>) -> Self {
        let status = if thread::is_idle(&c, idle_after, now) {
            ConversationStatus::Closed
        } else {
            c.status
        };
        Self {
            id: c.id,
            identity_id: c.identity_id,
            channel_id: c.channel_id,
            assistant_id: c.assistant_id,
            status,
            started_at: c.started_at,
            last_message_at: c.last_message_at,
            mode: c.mode,
            mode_changed_at: c.mode_changed_at,
            handoff_reason: c.handoff_reason,
            prompt_tokens: c.prompt_tokens,
            completion_tokens: c.completion_tokens,
        }
    }
}

fn idle_after(state: &AppState) -> chrono::Duration {
    state.settings.actors.conversation_idle()
}

/// A message as the API shows it.
#[derive(Debug, Serialize, utoipa::ToSchema)]
struct MessageRecord {
    id: Uuid,
    conversation_id: Uuid,
    /// `inbound` from the person, `outbound` to them; `null` for what never left Parley (the
    /// assistant's tool requests, the tools' results, notes for the model).
    direction: Option<Direction>,
    role: Role,
    content: String,
    /// Where a message from or to the person stands; `null` for what never left Parley.
    status: Option<MessageStatus>,
    platform_message_id: Option<String>,
    error: Option<Value>,
    usage: Option<Value>,
    tool_calls: Option<Value>,
    metadata: Option<Value>,
    /// The files it carries (pictures, voice notes, videos, documents, stickers).
    attachments: Vec<AttachmentRecord>,
    /// For an operator's message, who wrote it (`null` for anyone else, or an admin's key).
    operator: Option<OperatorRef>,
    created_at: DateTime<Utc>,
}

/// An operator, as a message names them.
#[derive(Debug, Serialize, utoipa::ToSchema)]
struct OperatorRef {
    id: Uuid,
    name: String,
}

impl MessageRecord {
    /// The record of `m`, taking its attachments out of `files` (by message).
    /// The record of `m`, taking its attachments out of `files` (by message) and its
    /// operator's name from `names`.
    fn with_files(
        m: message::Model,
        files: &mut HashMap<Uuid, Vec<attachment::Model>>,
        names: &HashMap<Uuid, String>,
    ) -> Self {
        let attachments = files
            .remove(&m.id)
            .unwrap_or_default()
            .into_iter()
            .map(AttachmentRecord::from)
            .collect();
        let operator = m.operator_id.map(|id| OperatorRef {
            id,
            name: names.get(&id).cloned().unwrap_or_default(),
        });
        Self {
            attachments,
            operator,
            ..Self::from(m)
        }
    }
}

impl From<message::Model> for MessageRecord {
    fn from(m: message::Model) -> Self {
        let reached_person = m.reached_person();
        Self {
            id: m.id,
            conversation_id: m.conversation_id,
            direction: reached_person.then_some(m.direction),
            role: m.role,
            content: m.content,
            status: reached_person.then_some(m.status),
            platform_message_id: m.platform_message_id,
            error: m.error,
            usage: m.usage,
            tool_calls: m.tool_calls,
            metadata: m.metadata,
            attachments: Vec::new(),
            operator: None,
            created_at: m.created_at,
        }
    }
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
struct ConversationQuery {
    /// An identity: its id, or a path resolving to one (`external_id`, phone, e-mail).
    identity_id: Option<String>,
    #[param(value_type = Option<uuid::Uuid>)]
    channel_id: Option<String>,
    /// Only conversations answered this way: `assistant`, or `human` (handed to a person).
    #[param(value_type = Option<ConversationMode>)]
    mode: Option<String>,
    #[param(minimum = 1, maximum = 1_000_000_000_000_000_u64, default = 1)]
    page: Option<u64>,
    #[param(minimum = 1, maximum = 100)]
    limit: Option<u64>,
}

/// List conversations.
///
/// Most recently active first; filter by identity, channel and mode.
#[utoipa::path(
    get,
    path = "/conversations",
    tag = "conversations",
    params(ConversationQuery),
    responses((status = 200, body = PageResponse<ConversationRecord>)),
)]
#[tracing::instrument(skip_all, fields(workspace_id = caller.workspace_id))]
async fn list_conversations(
    caller: Caller,
    State(state): State<AppState>,
    Query(query): Query<ConversationQuery>,
) -> Result<PageResponse<ConversationRecord>> {
    caller.require(Permission::Read)?;
    let mut problems = Problems::default();
    let mode = query.mode.as_deref().and_then(|raw| {
        problems.parse(
            ["mode"],
            ConversationMode::parse(raw).ok_or("must be assistant or human"),
        )
    });
    problems.finish()?;
    let page = page_from(query.page, query.limit)?;
    let identity_id = match &query.identity_id {
        Some(raw) => Some(find_identity(&state.db, caller.workspace_id, raw).await?.id),
        None => None,
    };
    let channel_id = match &query.channel_id {
        Some(raw) => Some(find_channel(&state, &caller, raw).await?.id),
        None => None,
    };
    let filter = ConversationFilter {
        identity_id,
        channel_id,
        mode,
    };
    let paged = conversations::list(&state.db, caller.workspace_id, filter, page).await?;
    let (idle_after, now) = (idle_after(&state), clock::now());
    Ok(PageResponse::new(
        "Conversations retrieved successfully",
        page,
        paged,
        |c| ConversationRecord::new(c, idle_after, now),
    ))
}

/// Read a conversation.
///
/// Its identity, channel, status (`open`, or `closed` after `conversation_idle_hours` without
/// messages) and times.
#[utoipa::path(
    get,
    path = "/conversations/{conversation_id}",
    tag = "conversations",
    params(("conversation_id" = String, Path, format = Uuid, description = "Conversation id")),
    responses((status = 200, body = Envelope<ConversationRecord>)),
)]
#[tracing::instrument(skip_all, fields(workspace_id = caller.workspace_id))]
async fn get_conversation(
    caller: Caller,
    State(state): State<AppState>,
    Path(conversation_id): Path<String>,
) -> Result<Envelope<ConversationRecord>> {
    caller.require(Permission::Read)?;
    let found = find_conversation(&state, &caller, &conversation_id).await?;
    let record = ConversationRecord::new(found, idle_after(&state), clock::now());
    Ok(Envelope::ok("Conversation retrieved successfully", record))
}

/// List a conversation's messages.
///
/// Oldest first, with delivery status for outgoing ones.
#[utoipa::path(
    get,
    path = "/conversations/{conversation_id}/messages",
    tag = "conversations",
    params(("conversation_id" = String, Path, format = Uuid, description = "Conversation id"), ListQuery),
    responses((status = 200, body = PageResponse<MessageRecord>)),
)]
#[tracing::instrument(skip_all, fields(workspace_id = caller.workspace_id))]
async fn list_messages(
    caller: Caller,
    State(state): State<AppState>,
    Path(conversation_id): Path<String>,
    Query(query): Query<ListQuery>,
) -> Result<PageResponse<MessageRecord>> {
    caller.require(Permission::Read)?;
    let page = query.page()?;
    let found = find_conversation(&state, &caller, &conversation_id).await?;
    let paged = conversations::messages(&state.db, found.id, page).await?;
    let ids: Vec<Uuid> = paged.items.iter().map(|m| m.id).collect();
    let mut files = attachments::of_messages(&state.db, &ids).await?;
    let writers: Vec<Uuid> = paged.items.iter().filter_map(|m| m.operator_id).collect();
    let names = parley_persistence::operators::names(&state.db, &writers).await?;
    Ok(PageResponse::new(
        "Messages retrieved successfully",
        page,
        paged,
        |m| MessageRecord::with_files(m, &mut files, &names),
    ))
}

async fn find_conversation(
    state: &AppState,
    caller: &Caller,
    raw: &str,
) -> Result<conversation::Model> {
    let id = parse_uuid(raw, "conversation_id")?;
    conversations::find(&state.db, caller.workspace_id, id)
        .await?
        .ok_or(ApiError::NotFound("Conversation"))
}
