//! One turn of a conversation: store the person's message(s) in the current conversation,
//! build the prompt (rendered instructions, whole-turn history), run the model with the
//! built-in tools in a bounded loop, store and answer the reply.

mod reply;
mod toolbox;

use litemap::Entry;
use parley_persistence::conversations::{self, NewMessage};
use parley_persistence::entities::{conversation, message, stage};
use parley_persistence::{GroupCommit, clock, deliveries};
use serde_json::Value;
use tokio::sync::mpsc;
use tracing::Instrument;
use uuid::Uuid;

use self::reply::ReplyPlan;
use self::toolbox::Toolbox;
use super::context::Context;
use super::history::{KeptHistory, last_turns};
use super::route::Routed;
use super::tools;
use super::{ConversationDeps, ToolCallRecord, TurnError, TurnEvent, TurnOutcome, TurnRequest};
use crate::llm::{ChatMessage, ChatRequest, Completion, LlmError, RequestSent, TokenSink, Usage};
use crate::mcp::CallContext;
use crate::outbound::Parcel;
use crate::thread::{self, Thread};

/// Stored messages read back to build history; far more than any `history_turns` needs.
const HISTORY_WINDOW: u64 = 400;

/// How long after a streamed turn's request has gone to the model the person's messages are
/// stored. The request's trip to the model is the first token's; a commit started at once
/// (and, on PostgreSQL, its server process) took the cores it needed on a 2-core machine. A
/// streamed model takes far longer than this to its first token, so the store still ends
/// long before the reply's. A synchronous chat turn stores at once: its model may answer
/// within the delay, and the turn waits for both.
const STREAMED_STORE_AFTER: std::time::Duration = std::time::Duration::from_millis(2);

/// Where the person's side of a turn goes, found before anything of it is stored.
struct Found {
    conversation: conversation::Model,
    /// Whether this turn started the conversation: it has no messages yet.
    started: bool,
    /// The batch's message an earlier attempt stored already (a re-dispatched event).
    resumed: Option<message::Model>,
}

/// Where a turn's messages go, or that they were answered already.
enum Place {
    /// The conversation to store the person's messages in and answer.
    Found(Found),
    /// A re-dispatched message an earlier attempt answered: its stored reply.
    Answered(TurnOutcome),
}

/// Runs one turn for `batch` (one message, or a debounced burst on one channel).
pub(crate) async fn run(
    deps: &ConversationDeps,
    context: &mut Context,
    stages: &[stage::Model],
    routed: &Routed,
    batch: &[TurnRequest],
) -> Result<TurnOutcome, TurnError> {
    let found = match find_thread(deps, &mut *context, routed, batch).await? {
        Place::Found(found) => found,
        Place::Answered(answered) => return Ok(answered),
    };
    let conversation = &found.conversation;
    let mut messages = prompt(deps, &mut *context, stages, routed, &found, batch).await?;
    let context_of_call = CallContext {
        workspace_id: context.identity.workspace_id,
        assistant_id: Some(routed.assistant.id),
        identity_id: Some(context.identity.id),
        conversation_id: Some(conversation.id),
    };
    let toolbox = Toolbox::assemble(&deps.mcp, routed, stages, context_of_call)
        .instrument(tracing::debug_span!("toolbox"))
        .await;
    let specs = &toolbox.specs;
    let streams: Vec<mpsc::Sender<TurnEvent>> =
        batch.iter().filter_map(|r| r.events().cloned()).collect();
    let rounds = deps.settings.max_tool_rounds;
    // The last round offers no tools, so the model has to answer in words.
    let offer = |round: u32| if round < rounds { &specs[..] } else { &[] };
    let request = |round: u32, messages: &[ChatMessage]| ChatRequest {
        model: routed.assistant.model.clone(),
        messages: messages.to_vec(),
        tools: offer(round).to_vec(),
        temperature: routed.settings.temperature,
        max_tokens: routed.settings.max_tokens,
    };

    // The person's messages are stored while the model reads them (the prompt does not need
    // their rows): a turn does not wait for a commit before its first token. The store starts
    // once the model's request has gone, so that on a busy machine it does not hold the request
    // up; in a streamed turn, a moment after ([`STREAMED_STORE_AFTER`]). Both finish before
    // anything else happens, so a reply is never stored before what it answers, and a model
    // that fails leaves the person's messages stored.
    let first_request = request(0, &messages);
    let (sent, request_gone) = RequestSent::channel();
    let (stored, first) = tokio::join!(
        async {
            let _ = request_gone.await;
            if !streams.is_empty() {
                tokio::time::sleep(STREAMED_STORE_AFTER).await;
            }
            store_inbound(&deps.writer, &found, batch).await
        },
        call_model(deps, &first_request, &streams, sent),
    );
    let new_ids = remember_stored(context, routed, &found, stored?);
    let plan = ReplyPlan::new(batch, new_ids.last().copied(), context.identity.id);
    let mut first = Some(first);

    let mut usage = Usage::default();
    let mut records = Vec::new();
    for round in 0..=rounds {
        let answered = match first.take() {
            Some(answered) => answered,
            None => {
                let request = request(round, &messages);
                call_model(deps, &request, &streams, RequestSent::default()).await
            }
        };
        let completion = match answered {
            Ok(completion) => completion,
            Err(error) => {
                // The fallback (if any) is stored without passing through the kept history.
                context.missed(clock::now());
                return reply::fall_back(deps, conversation, routed, &streams, error, &plan)
                    .await
                    .map(|outcome| TurnOutcome {
                        usage,
                        tool_calls: records,
                        ..outcome
                    });
            }
        };
        usage += completion.usage;
        if completion.tool_calls.is_empty() || offer(round).is_empty() {
            let stored_reply = plan
                .store(&deps.writer, conversation, &completion)
                .instrument(tracing::debug_span!("store_reply"))
                .await?;
            context.wrote(&stored_reply);
            return Ok(TurnOutcome {
                conversation_id: conversation.id,
                message_id: stored_reply.id,
                reply: completion.content,
                tool_calls: records,
                usage,
                fallback: false,
                parcel: Parcel::of(&stored_reply),
            });
        }
        let call = ToolRound {
            deps,
            context: &mut *context,
            stages,
            conversation,
            toolbox: &toolbox,
        };
        records.extend(call.run(&completion, &mut messages).await?);
    }
    Err(TurnError::Storage(
        "the tool loop ended without a reply".to_owned(),
    ))
}

/// The conversation the person's messages go to. A re-dispatched WhatsApp message resumes
/// where the last attempt stopped: answered already, it gives the stored reply back (`Err`)
/// instead of asking the model again.
#[tracing::instrument(name = "find_thread", level = "debug", skip_all)]
async fn find_thread(
    deps: &ConversationDeps,
    context: &mut Context,
    routed: &Routed,
    batch: &[TurnRequest],
) -> Result<Place, TurnError> {
    let db = &deps.db;
    let mut resumed: Option<message::Model> = None;
    for wamid in batch.iter().filter_map(TurnRequest::wamid_to_resume) {
        if let Some(stored) = deliveries::find_by_platform_id(db, routed.channel.id, wamid).await? {
            if let Some(reply) = deliveries::reply_to(db, stored.id).await? {
                return Ok(Place::Answered(TurnOutcome {
                    conversation_id: reply.conversation_id,
                    message_id: reply.id,
                    reply: reply.content,
                    tool_calls: Vec::new(),
                    usage: Usage::default(),
                    fallback: reply.error.is_some(),
                    parcel: None,
                }));
            }
            // Stored by an earlier attempt: the kept history may not have it.
            context.missed(stored.created_at);
            resumed = Some(stored);
        }
    }
    let current = match &resumed {
        Some(stored) => thread::Current {
            conversation: conversations::find(
                db,
                context.identity.workspace_id,
                stored.conversation_id,
            )
            .await?
            .ok_or_else(|| {
                TurnError::Storage("the resumed message lost its conversation".to_owned())
            })?,
            started: false,
        },
        None => {
            let idle_after = deps.settings.idle_after;
            let now = clock::now();
            let cached = context
                .conversations
                .get(&routed.channel.id)
                .filter(|c| !thread::is_idle(c, idle_after, now));
            match cached {
                Some(active) => thread::Current {
                    conversation: active.clone(),
                    started: false,
                },
                None => {
                    let here = Thread {
                        workspace_id: context.identity.workspace_id,
                        identity_id: context.identity.id,
                        channel_id: routed.channel.id,
                    };
                    let assistant = Some(routed.assistant.id);
                    // Read on the pool, unless the context knows there is none to find (a
                    // new sender's first message); a start is committed by the writer with
                    // the other writes.
                    let none_open = context.conversations_known
                        && context.conversations.get(&routed.channel.id).is_none();
                    let found = if none_open {
                        thread::Found::Start { close: None }
                    } else {
                        thread::find(db, here, idle_after, now).await?
                    };
                    match found {
                        thread::Found::Open(conversation) => thread::Current {
                            conversation,
                            started: false,
                        },
                        thread::Found::Start { close } => {
                            deps.writer
                                .write_atomic(move |db| {
                                    Box::pin(thread::start(db, here, close, assistant, now))
                                })
                                .await?
                        }
                    }
                }
            }
        }
    };
    Ok(Place::Found(Found {
        conversation: current.conversation,
        started: current.started,
        resumed,
    }))
}

/// Stores the batch's messages from the person that no earlier attempt stored; answers the id
/// of every message of the batch (stored now or before) and the rows stored now.
#[tracing::instrument(name = "store_inbound", level = "debug", skip_all)]
async fn store_inbound(
    writer: &GroupCommit,
    found: &Found,
    batch: &[TurnRequest],
) -> Result<(Vec<Uuid>, Vec<message::Model>), TurnError> {
    let mut ids = Vec::with_capacity(batch.len());
    let mut stored_now = Vec::with_capacity(batch.len());
    for request in batch.iter().filter(|r| r.follow_up().is_none()) {
        let wamid = request.wamid();
        if let Some(stored) = found
            .resumed
            .as_ref()
            .filter(|m| m.platform_message_id.as_deref() == wamid && wamid.is_some())
        {
            ids.push(stored.id);
            continue;
        }
        let mut message = NewMessage::from_person(request.text.clone());
        message.platform_message_id = wamid.map(str::to_owned);
        message.metadata = request.metadata.clone();
        let stored =
            conversations::store_message(writer, &found.conversation, message, clock::now())
                .await?;
        ids.push(stored.id);
        stored_now.push(stored);
    }
    Ok((ids, stored_now))
}

/// Keeps what [`store_inbound`] stored: in the history, and as the channel's current
/// conversation (its `last_message_at` is the newest message's time); answers the ids.
fn remember_stored(
    context: &mut Context,
    routed: &Routed,
    found: &Found,
    (ids, stored_now): (Vec<Uuid>, Vec<message::Model>),
) -> Vec<Uuid> {
    for stored in &stored_now {
        context.wrote(stored);
    }
    if found.resumed.is_none() {
        let mut current = found.conversation.clone();
        if let Some(newest) = stored_now.last() {
            current.last_message_at = newest.created_at;
        }
        context.conversations.insert(routed.channel.id, current);
    }
    ids
}

/// The model's messages: rendered instructions, the last whole turns, the new text. Built
/// before the batch's messages are stored.
#[tracing::instrument(name = "prompt", level = "debug", skip_all)]
async fn prompt(
    deps: &ConversationDeps,
    context: &mut Context,
    stages: &[stage::Model],
    routed: &Routed,
    found: &Found,
    batch: &[TurnRequest],
) -> Result<Vec<ChatMessage>, TurnError> {
    let turns = routed.settings.history_turns();
    let kept = kept_history(deps, context, routed.channel.id, found).await?;
    // The batch's messages are stored after this (or, resumed, may be kept already).
    let resumed = found.resumed.as_ref().map(|m| m.id);
    let earlier: Vec<_> = kept
        .messages()
        .iter()
        .filter(|m| Some(m.id) != resumed)
        .cloned()
        .collect();
    // What the next turn needs: this turn's messages and the turns before them.
    kept.keep_last_turns(turns.saturating_add(batch.len()));
    let system = routed
        .instructions
        .render(context.template_context(stages))
        .map_err(TurnError::Template)?;
    let mut messages = vec![ChatMessage::system(system)];
    messages.extend(last_turns(&earlier, turns));
    let text: Vec<&str> = batch
        .iter()
        .filter(|r| r.follow_up().is_none())
        .map(|r| r.text.as_str())
        .collect();
    if !text.is_empty() {
        messages.push(ChatMessage::user(text.join("\n")));
    }
    for instructions in batch.iter().filter_map(TurnRequest::follow_up) {
        messages.push(ChatMessage::system(format!(
            "Write a follow-up message to the person now, without waiting for them to write. \
             Instructions: {instructions}"
        )));
    }
    Ok(messages)
}

/// The conversation's recent messages as the actor keeps them: the whole window the first
/// time (or when the conversation changed), then only what others stored since, when they did.
/// A conversation this turn started has no messages to read; whatever others store in it from
/// now on is announced like any other.
#[tracing::instrument(name = "kept_history", level = "debug", skip_all)]
async fn kept_history<'c>(
    deps: &ConversationDeps,
    context: &'c mut Context,
    channel_id: Uuid,
    found: &Found,
) -> Result<&'c mut KeptHistory, TurnError> {
    let conversation_id = found.conversation.id;
    let window = || async {
        if found.started {
            return Ok(Vec::new());
        }
        conversations::recent_messages(&deps.db, conversation_id, HISTORY_WINDOW).await
    };
    let kept = match context.histories.entry(channel_id) {
        Entry::Occupied(kept) if kept.get().conversation_id == conversation_id => kept.into_mut(),
        Entry::Occupied(mut kept) => {
            kept.insert(KeptHistory::loaded(conversation_id, window().await?));
            kept.into_mut()
        }
        Entry::Vacant(slot) => slot.insert(KeptHistory::loaded(conversation_id, window().await?)),
    };
    if let Some(since) = kept.refresh_from() {
        kept.add(conversations::messages_since(&deps.db, conversation_id, since).await?);
    }
    Ok(kept)
}

/// One round of tool calls the model asked for.
struct ToolRound<'a> {
    deps: &'a ConversationDeps,
    context: &'a mut Context,
    stages: &'a [stage::Model],
    conversation: &'a conversation::Model,
    toolbox: &'a Toolbox,
}

impl ToolRound<'_> {
    /// Stores the model's request, runs each call, stores and hands back each result.
    async fn run(
        self,
        completion: &Completion,
        messages: &mut Vec<ChatMessage>,
    ) -> Result<Vec<ToolCallRecord>, TurnError> {
        let db = &self.deps.db;
        let calls_json = serde_json::to_value(&completion.tool_calls).unwrap_or(Value::Null);
        let mut request = NewMessage::to_person(
            completion.content.clone(),
            parley_persistence::MessageStatus::Sent,
        );
        request.usage = serde_json::to_value(completion.usage).ok();
        request.tool_calls = Some(calls_json);
        let stored =
            conversations::append_message(db, self.conversation, request, clock::now()).await?;
        self.context.wrote(&stored);
        let content = (!completion.content.is_empty()).then(|| completion.content.clone());
        messages.push(ChatMessage::tool_request(
            content,
            completion.tool_calls.clone(),
        ));
        let mut records = Vec::with_capacity(completion.tool_calls.len());
        for call in &completion.tool_calls {
            let (source, result) = match self.toolbox.run_mcp(&self.deps.mcp, call).await {
                Some(result) => ("mcp", result),
                None => (
                    "builtin",
                    tools::execute(db, self.context, self.stages, self.conversation.id, call)
                        .await?,
                ),
            };
            let refused = result.get("error").is_some()
                || result["ok"] == Value::Bool(false)
                || result["isError"] == Value::Bool(true);
            crate::measure::tool_call(source, !refused);
            let text = result.to_string();
            let result_message = NewMessage::tool_result(call.id.clone(), text.clone());
            let stored =
                conversations::append_message(db, self.conversation, result_message, clock::now())
                    .await?;
            self.context.wrote(&stored);
            messages.push(ChatMessage::tool_result(&call.id, text));
            records.push(ToolCallRecord {
                name: call.function.name.clone(),
                arguments: serde_json::from_str(&call.function.arguments)
                    .unwrap_or_else(|_| Value::String(call.function.arguments.clone())),
                result,
            });
        }
        Ok(records)
    }
}

/// Calls the model, streaming its tokens to every listener when there are listeners.
#[tracing::instrument(name = "call_model", level = "debug", skip_all)]
async fn call_model(
    deps: &ConversationDeps,
    request: &ChatRequest,
    streams: &[mpsc::Sender<TurnEvent>],
    sent: RequestSent,
) -> Result<Completion, LlmError> {
    if streams.is_empty() {
        return deps.llm.complete_telling(request, sent).await;
    }
    deps.llm
        .stream_telling(request, &Listeners(streams), sent)
        .await
}

/// The turn's listeners as the model's token sink: each fragment goes to every one of them as
/// it arrives, with no task in between.
struct Listeners<'a>(&'a [mpsc::Sender<TurnEvent>]);

impl TokenSink for Listeners<'_> {
    async fn token(&self, fragment: String) {
        for listener in self.0 {
            // A listener that went away does not stop the turn.
            let _ = listener.send(TurnEvent::Token(fragment.clone())).await;
        }
    }
}
