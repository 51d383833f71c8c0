//! Who answers a conversation, decided inside the identity's actor between its turns: handed
//! to a person (by the API, or by the model's `handoff_to_human`), given back (by the API, or
//! by the sweep once the person has been quiet for the assistant's `handoff_timeout_minutes`).
//! Because the actor runs one thing at a time, a message racing a handoff is answered before it
//! or kept for the person, never answered after it. On the way back, the conversation gets a
//! note for the model saying a person handled it meanwhile, so that the assistant answers
//! again instead of taking its last words before the handoff for its instructions.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use chrono::{DateTime, Utc};
use parley_persistence::entities::conversation;
use parley_persistence::{
    ConversationMode, DatabaseConnection, EventType, PersistenceError, clock, handoff,
};
use serde_json::json;
use uuid::Uuid;

use super::context::Context;
use super::turn::place;
use super::{ConversationDeps, ConversationState, TurnError};
use crate::domain::SweptSettings;

/// A change of who answers an identity's conversation on a channel.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case", tag = "change")]
pub enum ModeChange {
    /// Hand it to a person, starting the conversation when none is open.
    HandOver {
        /// The channel.
        channel_id: Uuid,
        /// Why, as the operator (or the model) said.
        reason: Option<String>,
    },
    /// Give it back to the assistant.
    GiveBack {
        /// The channel.
        channel_id: Uuid,
    },
    /// Give it back if no person acted in it since before `before` (the sweep).
    GiveBackIfQuiet {
        /// The channel.
        channel_id: Uuid,
        /// The person's last act must be older than this.
        before: DateTime<Utc>,
    },
}

/// Applies `change` to the identity of `state`; answers the conversation as it is now.
///
/// # Errors
/// [`TurnError::ChannelNotFound`] for a channel of another workspace,
/// [`TurnError::NoConversation`] when there is nothing open to give back, or a storage error.
pub(super) async fn change(
    state: &mut ConversationState,
    change: ModeChange,
) -> Result<conversation::Model, TurnError> {
    let (workspace_id, _) = state.key;
    let deps = Arc::clone(&state.deps);
    match change {
        ModeChange::HandOver { channel_id, reason } => {
            // The identity, then the channel, must be the workspace's; the assistant that
            // would answer starts the conversation when there is none (none when the channel
            // has no assistant).
            state.context().await?;
            let route = state
                .shared
                .route(&deps.db, workspace_id, channel_id)
                .await?;
            let context = state.context().await?;
            let assistant = route
                .choose(context.language().as_deref())
                .ok()
                .map(|routed| routed.assistant.id);
            let current = place::current(&deps, context, channel_id, assistant).await?;
            hand_over(&deps, context, &current.conversation, reason, "api").await
        }
        ModeChange::GiveBack { channel_id } => {
            // The identity, then the channel, must be the workspace's.
            state.context().await?;
            state
                .shared
                .route(&deps.db, workspace_id, channel_id)
                .await?;
            give_back_open(state, &deps, channel_id, None).await
        }
        ModeChange::GiveBackIfQuiet { channel_id, before } => {
            give_back_open(state, &deps, channel_id, Some(before)).await
        }
    }
}

/// Gives the channel's open conversation back (see [`give_back`]); answers it as it is now.
async fn give_back_open(
    state: &mut ConversationState,
    deps: &ConversationDeps,
    channel_id: Uuid,
    quiet_before: Option<DateTime<Utc>>,
) -> Result<conversation::Model, TurnError> {
    let context = state.context().await?;
    let open = place::open_on(deps, context, channel_id)
        .await?
        .ok_or(TurnError::NoConversation)?;
    Ok(give_back(deps, context, &open, quiet_before)
        .await?
        .unwrap_or(open))
}

/// Hands `conversation` to a person and keeps it so in the context; `by` (`api`, `tool`) is
/// counted.
pub(super) async fn hand_over(
    deps: &ConversationDeps,
    context: &mut Context,
    conversation: &conversation::Model,
    reason: Option<String>,
    by: &'static str,
) -> Result<conversation::Model, TurnError> {
    if conversation.mode == ConversationMode::Human {
        return Ok(conversation.clone());
    }
    let (conversation, now) = (conversation.clone(), clock::now());
    let event = deps.events.event(
        conversation.workspace_id,
        EventType::ConversationHandoff,
        || told(&conversation, json!({"reason": reason, "by": by})),
    );
    let handed = deps
        .events
        .write_with(&deps.writer, event.into_iter().collect(), move |db| {
            let (conversation, reason) = (conversation.clone(), reason.clone());
            Box::pin(async move { handoff::hand_over(db, &conversation, reason, now).await })
        })
        .await?;
    context
        .conversations
        .insert(handed.channel_id, handed.clone());
    deps.inbox_moved(handed.workspace_id);
    crate::measure::handoff(by);
    tracing::info!(conversation_id = %handed.id, by, "conversation handed to a person");
    Ok(handed)
}

/// Gives `conversation` back to the assistant (when a person has it and, with `quiet_before`,
/// has not acted since), storing the note for the model; answers the row when it changed.
async fn give_back(
    deps: &ConversationDeps,
    context: &mut Context,
    conversation: &conversation::Model,
    quiet_before: Option<DateTime<Utc>>,
) -> Result<Option<conversation::Model>, TurnError> {
    if conversation.mode != ConversationMode::Human {
        return Ok(None);
    }
    let now = clock::now();
    let note = note(conversation.mode_changed_at.unwrap_or(now), now);
    let conversation = conversation.clone();
    let why = if quiet_before.is_some() {
        "timeout"
    } else {
        "api"
    };
    let event = deps.events.event(
        conversation.workspace_id,
        EventType::ConversationResumed,
        || told(&conversation, json!({"why": why})),
    );
    // The event is written only with the give-back: a give-back whose condition no longer
    // holds fails its write, which undoes the event with it.
    let given = deps
        .events
        .write_atomic_with(&deps.writer, event.into_iter().collect(), move |db| {
            let (conversation, note) = (conversation.clone(), note.clone());
            Box::pin(async move {
                handoff::give_back(db, &conversation, note, quiet_before, now)
                    .await?
                    .ok_or(PersistenceError::Vanished(NOT_GIVEN_BACK.to_owned()))
            })
        })
        .await
        .map(Some)
        .or_else(|error| match error {
            PersistenceError::Vanished(why) if why == NOT_GIVEN_BACK => Ok(None),
            other => Err(other),
        })?;
    let Some((back, stored)) = given else {
        return Ok(None);
    };
    context.conversations.insert(back.channel_id, back.clone());
    context.wrote(&stored);
    deps.inbox_moved(back.workspace_id);
    crate::measure::resume(why);
    tracing::info!(conversation_id = %back.id, why, "conversation given back to the assistant");
    Ok(Some(back))
}

/// Why a conditional give-back wrote nothing (its condition no longer held).
const NOT_GIVEN_BACK: &str = "the conversation was not given back";

/// An event's data about `conversation`, with `more`.
fn told(conversation: &conversation::Model, more: serde_json::Value) -> serde_json::Value {
    let mut data = json!({
        "conversation_id": conversation.id,
        "identity_id": conversation.identity_id,
        "channel_id": conversation.channel_id,
    });
    if let (Some(data), Some(more)) = (data.as_object_mut(), more.as_object()) {
        data.extend(more.clone());
    }
    data
}

/// The note the model reads on the way back.
fn note(from: DateTime<Utc>, until: DateTime<Utc>) -> String {
    let at = |t: DateTime<Utc>| t.format("%Y-%m-%d %H:%M UTC").to_string();
    format!(
        "A person from the business handled this conversation from {} to {}; the messages \
         in between were theirs, not yours. You are answering the person again from now on.",
        at(from),
        at(until)
    )
}

/// Most conversations one sweep looks at.
const SWEEP_BATCH: u64 = 500;

/// One sweep: every open conversation whose person has been quiet for its assistant's
/// `handoff_timeout_minutes` (720 without an assistant), as `(workspace, identity, channel,
/// quiet before)`, for the identity's actor to give back.
pub(super) async fn due(
    db: &DatabaseConnection,
) -> Result<Vec<(i64, Uuid, Uuid, DateTime<Utc>)>, TurnError> {
    let now = clock::now();
    // No timeout is shorter than a minute: nothing quieter is due.
    let quiet = handoff::quiet_since(db, now - chrono::Duration::minutes(1), SWEEP_BATCH).await?;
    let mut due = Vec::new();
    let mut settings = SweptSettings::default();
    for conversation in quiet {
        let timeout = settings.of(db, &conversation).await?.handoff_timeout();
        let before = now - timeout;
        if conversation.human_active_at.is_some_and(|at| at < before) {
            due.push((
                conversation.workspace_id,
                conversation.identity_id,
                conversation.channel_id,
                before,
            ));
        }
    }
    Ok(due)
}

/// Whether a sweep is running, so that a slow one is not joined by the next.
#[derive(Debug, Default)]
pub(super) struct Sweeping(AtomicBool);

/// A running sweep; the next may start once it is dropped (a sweep that fails included).
pub(super) struct Sweep(Arc<Sweeping>);

impl Sweeping {
    /// Takes the sweep; `None` while another holds it.
    pub(super) fn start(self: &Arc<Self>) -> Option<Sweep> {
        (!self.0.swap(true, Ordering::AcqRel)).then(|| Sweep(Arc::clone(self)))
    }
}

impl Drop for Sweep {
    fn drop(&mut self) {
        (self.0).0.store(false, Ordering::Release);
    }
}
