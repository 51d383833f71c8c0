//! The model's messages for a turn: the rendered instructions (with the memory and stage
//! when they do not place them), the last whole turns of the conversation as the actor keeps
//! them, and the person's new words (with what the turn understood of their files).

use litemap::Entry;
use parley_persistence::conversations;
use parley_persistence::entities::stage;
use uuid::Uuid;

use super::place::Found;
use super::understand::Understood;
use crate::conversation::context::Context;
use crate::conversation::history::{KeptHistory, last_turns};
use crate::conversation::route::Routed;
use crate::conversation::{ConversationDeps, TurnError, TurnRequest};
use crate::llm::ChatMessage;

/// Stored messages read back to build history; far more than any `history_turns` needs.
const HISTORY_WINDOW: u64 = 400;

/// The model's messages: rendered instructions, the last whole turns, the new text. Built
/// before the batch's messages are stored.
#[tracing::instrument(name = "prompt", level = "debug", skip_all)]
pub(super) async fn prompt(
    deps: &ConversationDeps,
    context: &mut Context,
    stages: &[stage::Model],
    routed: &Routed,
    found: &Found,
    batch: &[TurnRequest],
    understood: Option<&Understood>,
) -> Result<Vec<ChatMessage>, TurnError> {
    let turns = routed.settings.history_turns();
    let kept = kept_history(deps, context, routed.channel.id, found).await?;
    // The batch's messages are stored after this (or, resumed, may be kept already; or,
    // with files to understand, were stored before it).
    let resumed = found.resumed.as_ref().map(|m| m.id);
    let this_turn =
        |id: Uuid| Some(id) == resumed || understood.is_some_and(|u| u.stored.contains(&id));
    let earlier: Vec<_> = kept
        .messages()
        .iter()
        .filter(|m| !this_turn(m.id))
        .cloned()
        .collect();
    // What the next turn needs: this turn's messages and the turns before them.
    kept.keep_last_turns(turns.saturating_add(batch.len()));
    let mut system = routed
        .instructions
        .render(context.template_context(stages))
        .map_err(TurnError::Template)?;
    // Instructions that do not place the memory and stage themselves still get them, after.
    if !routed.instructions.places_context()
        && let Some(block) = context.context_block(stages)
    {
        system.push_str("\n\n");
        system.push_str(&block);
    }
    let mut messages = vec![ChatMessage::system(system)];
    messages.extend(last_turns(&earlier, turns));
    let text: Vec<&str> = batch
        .iter()
        .filter(|r| r.follow_up().is_none())
        .enumerate()
        .map(|(i, r)| {
            understood
                .and_then(|u| u.said_by(i))
                .unwrap_or(r.text.as_str())
        })
        .collect();
    if !text.is_empty() {
        let mut said = ChatMessage::user(text.join("\n"));
        if let Some(understood) = understood {
            said.images.clone_from(&understood.images);
        }
        messages.push(said);
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
