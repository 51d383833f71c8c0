//! Where a turn's messages go: the conversation they belong to (the one the identity's actor
//! holds, the thread's open one, or a new one), or, for a re-dispatched WhatsApp message an
//! earlier attempt answered, that answer; and the person's messages stored there.

use parley_persistence::conversations::{self, NewMessage};
use parley_persistence::entities::{conversation, message};
use parley_persistence::{EventType, clock, deliveries};
use serde_json::json;
use uuid::Uuid;

use super::super::context::Context;
use super::super::route::Routed;
use super::super::{ConversationDeps, TurnError, TurnOutcome, TurnRequest};
use crate::events::{Handover, Recorded};
use crate::llm::Usage;
use crate::thread::{self, Thread};

/// Where the person's side of a turn goes, found before anything of it is stored.
pub(super) struct Found {
    pub(super) conversation: conversation::Model,
    /// Whether this turn started the conversation: it has no messages yet.
    pub(super) started: bool,
    /// The batch's message an earlier attempt stored already (a re-dispatched event).
    pub(super) resumed: Option<message::Model>,
}

/// Where a turn's messages go, or that they were answered already.
pub(super) enum Place {
    /// The conversation to store the person's messages in and answer.
    Found(Box<Found>),
    /// A re-dispatched message an earlier attempt answered: its stored reply.
    Answered(Box<TurnOutcome>),
}

/// The conversation the person's messages go to. A re-dispatched WhatsApp message resumes
/// where the last attempt stopped: answered already, it gives the stored reply back instead of
/// asking the model again.
#[tracing::instrument(name = "find_thread", level = "debug", skip_all)]
pub(super) async fn find_thread(
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
                return Ok(Place::Answered(Box::new(TurnOutcome {
                    conversation_id: reply.conversation_id,
                    message_id: reply.id,
                    reply: reply.content,
                    tool_calls: Vec::new(),
                    usage: Usage::default(),
                    fallback: reply.error.is_some(),
                    parcel: None,
                })));
            }
            // Stored by an earlier attempt: the kept history may not have it.
            context.missed(stored.created_at);
            resumed = Some(stored);
        }
    }
    let current = match &resumed {
        Some(stored) => {
            let ws = context.identity.workspace_id;
            let conversation = conversations::find(db, ws, stored.conversation_id)
                .await?
                .ok_or_else(|| {
                    TurnError::Storage("the resumed message lost its conversation".to_owned())
                })?;
            thread::Current {
                conversation,
                started: false,
            }
        }
        None => current(deps, context, routed.channel.id, Some(routed.assistant.id)).await?,
    };
    Ok(Place::Found(Box::new(Found {
        conversation: current.conversation,
        started: current.started,
        resumed,
    })))
}

/// The channel's current conversation: the one the context holds while it is active, else the
/// thread's open one, else a new one answered by `assistant_id` (committed by the writer with
/// the other writes).
pub(in crate::conversation) async fn current(
    deps: &ConversationDeps,
    context: &Context,
    channel_id: Uuid,
    assistant_id: Option<Uuid>,
) -> Result<thread::Current, TurnError> {
    let idle_after = deps.settings.idle_after;
    let now = clock::now();
    let held = context.conversations.get(&channel_id);
    if let Some(active) = held.filter(|c| !thread::is_idle(c, idle_after, now)) {
        return Ok(thread::Current {
            conversation: active.clone(),
            started: false,
        });
    }
    let here = Thread {
        workspace_id: context.identity.workspace_id,
        identity_id: context.identity.id,
        channel_id,
    };
    // Read on the pool, unless the context knows there is none to find (a new sender's first
    // message).
    let found = if context.conversations_known && held.is_none() {
        thread::Found::Start { close: None }
    } else {
        thread::find(&deps.db, here, idle_after, now).await?
    };
    Ok(match found {
        thread::Found::Open(conversation) => thread::Current {
            conversation,
            started: false,
        },
        thread::Found::Start { close } => {
            thread::start_by(&deps.writer, here, close, assistant_id, now).await?
        }
    })
}

/// The channel's active conversation, as [`current`] finds it, without starting one: `None`
/// when the next message would start a new one. One read from the table is kept in the
/// context for the turn that follows.
pub(in crate::conversation) async fn open_on(
    deps: &ConversationDeps,
    context: &mut Context,
    channel_id: Uuid,
) -> Result<Option<conversation::Model>, TurnError> {
    let idle_after = deps.settings.idle_after;
    let now = clock::now();
    let held = context.conversations.get(&channel_id);
    if let Some(active) = held.filter(|c| !thread::is_idle(c, idle_after, now)) {
        return Ok(Some(active.clone()));
    }
    if context.conversations_known && held.is_none() {
        return Ok(None);
    }
    let here = Thread {
        workspace_id: context.identity.workspace_id,
        identity_id: context.identity.id,
        channel_id,
    };
    Ok(match thread::find(&deps.db, here, idle_after, now).await? {
        thread::Found::Open(conversation) => {
            context
                .conversations
                .insert(channel_id, conversation.clone());
            Some(conversation)
        }
        thread::Found::Start { .. } => None,
    })
}

/// Stores the batch's messages from the person that no earlier attempt stored; answers the id
/// of every message of the batch (stored now or before) and the rows stored now.
#[tracing::instrument(name = "store_inbound", level = "debug", skip_all)]
pub(super) async fn store_inbound(
    deps: &ConversationDeps,
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
        let received = clock::now();
        message.attachments = request
            .attachments
            .iter()
            .filter_map(|media| crate::media::new_attachment(media, received))
            .collect();
        let with_files = !message.attachments.is_empty();
        let stored = store_received(deps, &found.conversation, message).await?;
        if with_files {
            deps.media.ring();
        }
        ids.push(stored.id);
        stored_now.push(stored);
    }
    if !stored_now.is_empty() {
        deps.inbox_moved(found.conversation.workspace_id);
    }
    Ok((ids, stored_now))
}

/// Stores a person's message, with its `message.received` event for the endpoints that take
/// it.
async fn store_received(
    deps: &ConversationDeps,
    conversation: &conversation::Model,
    mut message: NewMessage,
) -> Result<message::Model, TurnError> {
    let id = *message.id.get_or_insert_with(Uuid::now_v7);
    let event = deps.events.event(
        conversation.workspace_id,
        EventType::MessageReceived,
        || {
            json!({
                "message_id": id,
                "conversation_id": conversation.id,
                "identity_id": conversation.identity_id,
                "channel_id": conversation.channel_id,
                "content": message.content,
                "platform_message_id": message.platform_message_id,
                "attachments": message.attachments.iter().map(crate::media::pending_record).collect::<Vec<_>>(),
            })
        },
    );
    let told: Vec<_> = event.into_iter().map(Recorded::into_addressed).collect();
    let handover = Handover::of(&told);
    // Stored with the other messages waiting, its event's deliveries with it.
    let stored =
        conversations::store_message(&deps.writer, conversation, message, clock::now(), told)
            .await?;
    deps.events.committed(handover);
    Ok(stored)
}

/// Keeps what [`store_inbound`] stored: in the history, and as the channel's current
/// conversation (its `last_message_at` is the newest message's time); answers the ids.
pub(super) fn remember_stored(
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
