//! One turn of a conversation: route the message to an assistant, store it, build the prompt
//! (rendered instructions, whole-turn history), run the model with the built-in tools in a
//! bounded loop, store and answer the reply.

use chrono::Utc;
use parley_persistence::conversations::{self, NewMessage, OPEN};
use parley_persistence::entities::{assistant, channel, conversation};
use parley_persistence::{
    DatabaseConnection, PersistenceError, assistants, channels, clock, deliveries,
};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use uuid::Uuid;

use super::context::Context;
use super::history::last_turns;
use super::tools;
use super::{Deps, ToolCallRecord, TurnError, TurnOutcome, TurnRequest};
use crate::llm::{ChatMessage, ChatRequest, Completion, LlmError, Usage};
use crate::templating;

/// Stored messages read back to build history; far more than any `history_turns` needs.
const HISTORY_WINDOW: u64 = 400;

/// Where a message goes: the channel and the assistant chosen for the identity.
#[derive(Clone, Debug)]
pub(crate) struct Route {
    pub(crate) channel: channel::Model,
    pub(crate) assistant: assistant::Model,
}

impl Route {
    /// A setting of the assistant, read leniently (settings were validated when written).
    fn setting(&self, name: &str) -> &Value {
        &self.assistant.settings[name]
    }

    /// The debounce window of the assistant, in milliseconds.
    pub(crate) fn debounce_ms(&self) -> u64 {
        self.setting("debounce_ms").as_u64().unwrap_or(0)
    }
}

impl From<PersistenceError> for TurnError {
    fn from(error: PersistenceError) -> Self {
        Self::Storage(error.to_string())
    }
}

/// Finds the channel's worker's assistant for this identity: the oldest whose languages
/// include the identity's language, else the oldest.
pub(crate) async fn route(
    db: &DatabaseConnection,
    workspace_id: i64,
    channel_id: Uuid,
    context: &Context,
) -> Result<Route, TurnError> {
    let channel = channels::find(db, workspace_id, channel_id)
        .await?
        .ok_or(TurnError::ChannelNotFound)?;
    let worker_id = channel.worker_id.ok_or(TurnError::NoAssistant)?;
    let candidates = assistants::list_for_worker(db, workspace_id, worker_id).await?;
    let language = context.language();
    let speaks = |a: &assistant::Model| {
        language.as_deref().is_some_and(|lang| {
            a.languages
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .any(|tag| tag.get(..2) == Some(lang))
        })
    };
    let assistant = candidates
        .iter()
        .find(|a| speaks(a))
        .or_else(|| candidates.first())
        .cloned()
        .ok_or(TurnError::NoAssistant)?;
    Ok(Route { channel, assistant })
}

/// Runs one turn for `batch` (one message, or a debounced burst on one channel).
pub(crate) async fn run(
    deps: &Deps,
    context: &mut Context,
    route: &Route,
    batch: &[TurnRequest],
) -> Result<TurnOutcome, TurnError> {
    let db = &deps.db;
    // A re-dispatched WhatsApp message resumes where the last attempt stopped.
    let mut resumed = None;
    for id in batch
        .iter()
        .filter_map(|r| r.platform_message_id.as_deref())
    {
        if let Some(stored) = deliveries::find_by_platform_id(db, route.channel.id, id).await? {
            if let Some(reply) = deliveries::reply_to(db, stored.id).await? {
                return Ok(TurnOutcome {
                    conversation_id: reply.conversation_id,
                    message_id: reply.id,
                    reply: reply.content,
                    tool_calls: Vec::new(),
                    usage: Usage::default(),
                    fallback: reply.error.is_some(),
                });
            }
            resumed = Some(stored);
        }
    }
    let conversation = match &resumed {
        Some(stored) => {
            conversations::find(db, context.identity.workspace_id, stored.conversation_id)
                .await?
                .ok_or_else(|| {
                    TurnError::Storage("the resumed message lost its conversation".to_owned())
                })?
        }
        None => current_conversation(deps, context, route).await?,
    };
    let mut new_ids = Vec::with_capacity(batch.len());
    for request in batch {
        if let Some(stored) = resumed
            .as_ref()
            .filter(|m| m.platform_message_id == request.platform_message_id)
        {
            new_ids.push(stored.id);
            continue;
        }
        let mut message = user_message(&request.text);
        message.platform_message_id = request.platform_message_id.clone();
        let stored =
            conversations::append_message(db, &conversation, message, clock::now()).await?;
        new_ids.push(stored.id);
    }
    let replying_to = new_ids.last().copied();
    // A WhatsApp reply waits, stored, for its channel to send it.
    let reply_status = if batch.iter().any(|r| r.platform_message_id.is_some()) {
        deliveries::PENDING
    } else {
        "sent"
    };

    let earlier: Vec<_> = conversations::recent_messages(db, conversation.id, HISTORY_WINDOW)
        .await?
        .into_iter()
        .filter(|m| !new_ids.contains(&m.id))
        .collect();
    let history_turns = route.setting("history_turns").as_u64().unwrap_or(20);
    let system = templating::render(&route.assistant.instructions, &context.template_context())
        .map_err(TurnError::Template)?;
    let mut messages = vec![ChatMessage::text("system", system)];
    messages.extend(last_turns(
        &earlier,
        usize::try_from(history_turns).unwrap_or(usize::MAX),
    ));
    let text: Vec<&str> = batch.iter().map(|r| r.text.as_str()).collect();
    messages.push(ChatMessage::text("user", text.join("\n")));

    let memory_enabled = route.setting("memory_enabled").as_bool().unwrap_or(true);
    let tool_specs = if memory_enabled {
        let names: Vec<String> = tools::stage_list(db, context.identity.workspace_id)
            .await?
            .into_iter()
            .map(|s| s.name)
            .collect();
        tools::specs(&names)
    } else {
        Vec::new()
    };
    let streams: Vec<mpsc::Sender<String>> =
        batch.iter().filter_map(|r| r.stream.clone()).collect();

    let mut usage = Usage::default();
    let mut records = Vec::new();
    let rounds = deps.settings.max_tool_rounds;
    for round in 0..=rounds {
        // The last round offers no tools, so the model has to answer in words.
        let offer_tools = round < rounds && !tool_specs.is_empty();
        let request = ChatRequest {
            model: route.assistant.model.clone(),
            messages: messages.clone(),
            tools: if offer_tools {
                tool_specs.clone()
            } else {
                Vec::new()
            },
            temperature: route.setting("temperature").as_f64(),
            max_tokens: route
                .setting("max_tokens")
                .as_u64()
                .and_then(|t| u32::try_from(t).ok()),
        };
        let completion = match call_model(deps, &request, &streams).await {
            Ok(completion) => completion,
            Err(error) => {
                let reply = Reply {
                    to: replying_to,
                    status: reply_status,
                };
                return fall_back(
                    deps,
                    &conversation,
                    route,
                    &streams,
                    error,
                    usage,
                    records,
                    reply,
                )
                .await;
            }
        };
        usage += completion.usage;
        if completion.tool_calls.is_empty() || !offer_tools {
            let mut message = assistant_message(completion.content.clone(), &completion, None);
            message.status = reply_status;
            message.reply_to_message_id = replying_to;
            let stored =
                conversations::append_message(db, &conversation, message, clock::now()).await?;
            return Ok(TurnOutcome {
                conversation_id: conversation.id,
                message_id: stored.id,
                reply: completion.content,
                tool_calls: records,
                usage,
                fallback: false,
            });
        }
        let calls_json = serde_json::to_value(&completion.tool_calls).unwrap_or(Value::Null);
        conversations::append_message(
            db,
            &conversation,
            assistant_message(completion.content.clone(), &completion, Some(calls_json)),
            clock::now(),
        )
        .await?;
        let content = (!completion.content.is_empty()).then(|| completion.content.clone());
        messages.push(ChatMessage::tool_request(
            content,
            completion.tool_calls.clone(),
        ));
        for call in &completion.tool_calls {
            let result = tools::execute(db, context, conversation.id, call).await?;
            let result_text = result.to_string();
            conversations::append_message(
                db,
                &conversation,
                NewMessage {
                    direction: "outbound",
                    role: "tool",
                    content: result_text.clone(),
                    status: "sent",
                    platform_message_id: None,
                    usage: None,
                    tool_calls: None,
                    tool_call_id: Some(call.id.clone()),
                    error: None,
                    reply_to_message_id: None,
                },
                clock::now(),
            )
            .await?;
            messages.push(ChatMessage::tool_result(&call.id, result_text));
            records.push(ToolCallRecord {
                name: call.function.name.clone(),
                arguments: serde_json::from_str(&call.function.arguments)
                    .unwrap_or_else(|_| Value::String(call.function.arguments.clone())),
                result,
            });
        }
    }
    Err(TurnError::Storage(
        "the tool loop ended without a reply".to_owned(),
    ))
}

/// The open conversation of this identity on this channel, or a new one when there is none or
/// it has been idle for longer than `conversation_idle_hours` (memory and stage carry over;
/// history does not).
async fn current_conversation(
    deps: &Deps,
    context: &Context,
    route: &Route,
) -> Result<conversation::Model, TurnError> {
    let db = &deps.db;
    let now = clock::now();
    if let Some(latest) =
        conversations::latest_for(db, context.identity.id, route.channel.id).await?
        && latest.status == OPEN
    {
        if now.signed_duration_since(latest.last_message_at) < deps.settings.idle_after {
            return Ok(latest);
        }
        conversations::close(db, latest.id).await?;
    }
    Ok(conversations::start(
        db,
        context.identity.workspace_id,
        context.identity.id,
        route.channel.id,
        Some(route.assistant.id),
        now,
    )
    .await?)
}

async fn call_model(
    deps: &Deps,
    request: &ChatRequest,
    streams: &[mpsc::Sender<String>],
) -> Result<Completion, LlmError> {
    if streams.is_empty() {
        return deps.llm.complete(request).await;
    }
    let (tx, mut rx) = mpsc::channel::<String>(64);
    let listeners = streams.to_vec();
    let forward = tokio::spawn(async move {
        while let Some(token) = rx.recv().await {
            for listener in &listeners {
                // A listener that went away does not stop the turn.
                let _ = listener.send(token.clone()).await;
            }
        }
    });
    let outcome = deps.llm.stream(request, &tx).await;
    drop(tx);
    let _ = forward.await;
    outcome
}

/// How a final reply is stored.
struct Reply {
    /// The message it answers.
    to: Option<Uuid>,
    /// `pending` when a channel will send it, `sent` when the API caller gets it.
    status: &'static str,
}

/// The model failed after its retries: answer the assistant's fallback message when it has one
/// (stored with the error), else the error. Either way the person's message stays stored.
#[allow(clippy::too_many_arguments)]
async fn fall_back(
    deps: &Deps,
    conversation: &conversation::Model,
    route: &Route,
    streams: &[mpsc::Sender<String>],
    error: LlmError,
    usage: Usage,
    records: Vec<ToolCallRecord>,
    reply: Reply,
) -> Result<TurnOutcome, TurnError> {
    tracing::warn!(%error, conversation_id = %conversation.id, "language model failed");
    let Some(fallback) = route
        .setting("fallback_message")
        .as_str()
        .map(str::to_owned)
    else {
        return Err(TurnError::Llm(error));
    };
    let code = if matches!(error, LlmError::Timeout(_)) {
        "upstream_timeout"
    } else {
        "upstream_failed"
    };
    let mut message = assistant_message(fallback.clone(), &Completion::default(), None);
    message.error = Some(json!({"code": code, "message": error.to_string(), "at": Utc::now()}));
    message.status = reply.status;
    message.reply_to_message_id = reply.to;
    let stored =
        conversations::append_message(&deps.db, conversation, message, clock::now()).await?;
    for listener in streams {
        let _ = listener.send(fallback.clone()).await;
    }
    Ok(TurnOutcome {
        conversation_id: conversation.id,
        message_id: stored.id,
        reply: fallback,
        tool_calls: records,
        usage,
        fallback: true,
    })
}

fn user_message(text: &str) -> NewMessage {
    NewMessage {
        direction: "inbound",
        role: "user",
        content: text.to_owned(),
        status: "received",
        platform_message_id: None,
        usage: None,
        tool_calls: None,
        tool_call_id: None,
        error: None,
        reply_to_message_id: None,
    }
}

fn assistant_message(
    content: String,
    completion: &Completion,
    tool_calls: Option<Value>,
) -> NewMessage {
    NewMessage {
        direction: "outbound",
        role: "assistant",
        content,
        status: "sent",
        platform_message_id: None,
        usage: serde_json::to_value(completion.usage).ok(),
        tool_calls,
        tool_call_id: None,
        error: None,
        reply_to_message_id: None,
    }
}
