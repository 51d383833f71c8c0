//! ConversationActor: one per live identity. It serialises that identity's turns across
//! channels, caches its identity, stage and memory, merges a burst of messages into one turn
//! when the assistant asks for it (`debounce_ms`), and passivates after an idle timeout; the
//! registry spawns it again on the next message.

mod context;
mod history;
mod tools;
mod turn;

use std::sync::Arc;
use std::time::{Duration, Instant};

use parley_persistence::DatabaseConnection;
use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use serde::Serialize;
use serde_json::Value;
use tokio::sync::mpsc;
use uuid::Uuid;

use self::context::Context;
use self::turn::Route;
use crate::llm::{LlmClient, LlmError, Usage};
use crate::registry::RegistryMsg;

/// How conversations behave; from configuration.
#[derive(Clone, Debug)]
pub struct ConversationSettings {
    /// After this long without messages the next message starts a new conversation.
    pub idle_after: chrono::Duration,
    /// A conversation actor with no turn for this long stops itself.
    pub actor_idle: Duration,
    /// Most model calls with tool use in one turn before it must answer in words.
    pub max_tool_rounds: u32,
    /// Longest an API caller waits for a turn.
    pub turn_timeout: Duration,
}

/// What the conversation actors need.
#[derive(Clone, Debug)]
pub struct Deps {
    /// Connection pool.
    pub db: DatabaseConnection,
    /// The language model.
    pub llm: LlmClient,
    /// Behaviour settings.
    pub settings: ConversationSettings,
}

/// One message of an identity to answer.
#[derive(Clone, Debug)]
pub struct TurnRequest {
    /// The channel it arrived on (or is addressed to).
    pub channel_id: Uuid,
    /// Its text.
    pub text: String,
    /// Where to send reply tokens as they are generated, for streaming callers.
    pub stream: Option<mpsc::Sender<String>>,
    /// WhatsApp's id of the inbound message. The reply is then stored `pending` for the channel
    /// to send, and a turn for an id already answered answers the stored reply instead of
    /// asking the model again.
    pub platform_message_id: Option<String>,
}

/// A tool the assistant used during a turn.
#[derive(Clone, Debug, Serialize)]
pub struct ToolCallRecord {
    /// Tool name.
    pub name: String,
    /// Arguments as the model gave them (parsed when they were JSON).
    pub arguments: Value,
    /// What the tool answered.
    pub result: Value,
}

/// The answer of a turn.
#[derive(Clone, Debug)]
pub struct TurnOutcome {
    /// The conversation the turn belongs to.
    pub conversation_id: Uuid,
    /// The stored reply.
    pub message_id: Uuid,
    /// The reply's text.
    pub reply: String,
    /// Tools used on the way.
    pub tool_calls: Vec<ToolCallRecord>,
    /// Tokens used by every model call of the turn.
    pub usage: Usage,
    /// Whether the reply is the assistant's fallback message because the model failed.
    pub fallback: bool,
}

/// Why a turn produced no reply.
#[derive(Clone, Debug, thiserror::Error)]
pub enum TurnError {
    /// The identity does not exist (any more).
    #[error("identity not found")]
    IdentityNotFound,
    /// The channel does not exist in the identity's workspace.
    #[error("channel not found")]
    ChannelNotFound,
    /// The channel has no synced worker, or the worker no assistant.
    #[error("the channel has no synced worker with an assistant")]
    NoAssistant,
    /// The model failed and the assistant has no fallback message.
    #[error(transparent)]
    Llm(LlmError),
    /// The instructions could not be rendered.
    #[error("the assistant's instructions could not be rendered: {0}")]
    Template(String),
    /// The database failed.
    #[error("storage failed: {0}")]
    Storage(String),
    /// The turn did not finish within the caller's patience; it goes on and is stored.
    #[error("the turn did not finish in time")]
    Timeout,
    /// The conversation actor could not be reached or failed during the turn.
    #[error("the conversation actor is unavailable: {0}")]
    Unavailable(String),
}

/// Identifies a conversation actor: workspace and identity.
pub type ConversationKey = (i64, Uuid);

/// Behaviour of the per-identity actor.
pub(crate) struct ConversationActor;

/// What it starts with.
pub(crate) struct ConversationArgs {
    pub(crate) key: ConversationKey,
    pub(crate) deps: Arc<Deps>,
    pub(crate) registry: ActorRef<RegistryMsg>,
}

/// A turn waiting for its debounce window to close.
struct Pending {
    request: TurnRequest,
    route: Route,
    reply: RpcReplyPort<Result<TurnOutcome, TurnError>>,
}

/// State of the per-identity actor.
pub(crate) struct ConversationState {
    /// Workspace and identity.
    key: ConversationKey,
    /// Database, model, settings.
    deps: Arc<Deps>,
    /// Asked to passivate this actor, so that no new turn is routed here while it drains.
    registry: ActorRef<RegistryMsg>,
    /// Cached identity, stage and memory; `None` until the first turn or after a reload.
    context: Option<Context>,
    /// Turns collected in the current debounce window.
    pending: Vec<Pending>,
    /// Bumped by every debounced turn; a flush for an older generation is stale.
    generation: u64,
    /// Last time a turn arrived, for passivation.
    last_activity: Instant,
}

/// Messages of the per-identity actor.
pub(crate) enum ConversationMsg {
    /// Answer a message.
    Turn(TurnRequest, RpcReplyPort<Result<TurnOutcome, TurnError>>),
    /// The debounce window of this generation closed.
    Flush(u64),
    /// The identity, its stage or its memory changed elsewhere: reload before the next turn.
    Reload,
    /// Time to see whether the actor has been idle long enough to stop.
    IdleCheck,
    /// Fail on purpose, so that tests can watch a crash stay contained.
    #[cfg(test)]
    Crash,
}

impl Actor for ConversationActor {
    type Msg = ConversationMsg;
    type State = ConversationState;
    type Arguments = ConversationArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<Self::Msg>,
        args: ConversationArgs,
    ) -> Result<Self::State, ActorProcessingErr> {
        myself.send_after(args.deps.settings.actor_idle, || ConversationMsg::IdleCheck);
        Ok(ConversationState {
            key: args.key,
            deps: args.deps,
            registry: args.registry,
            context: None,
            pending: Vec::new(),
            generation: 0,
            last_activity: Instant::now(),
        })
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        // A debounce window still open when the actor stops is answered now, not dropped.
        flush(state).await;
        Ok(())
    }

    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        message: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            ConversationMsg::Turn(request, reply) => {
                state.last_activity = Instant::now();
                let route = match prepare(state, &request).await {
                    Ok(route) => route,
                    Err(error) => {
                        let gone = matches!(error, TurnError::IdentityNotFound);
                        let _ = reply.send(Err(error));
                        if gone {
                            myself.stop(Some("identity deleted".to_owned()));
                        }
                        return Ok(());
                    }
                };
                let debounce = route.debounce_ms();
                if debounce == 0 && state.pending.is_empty() {
                    let outcome = answer(state, &route, &[request]).await;
                    let _ = reply.send(outcome);
                } else {
                    state.pending.push(Pending {
                        request,
                        route,
                        reply,
                    });
                    state.generation += 1;
                    let generation = state.generation;
                    myself.send_after(Duration::from_millis(debounce), move || {
                        ConversationMsg::Flush(generation)
                    });
                }
            }
            ConversationMsg::Flush(generation) => {
                if generation == state.generation {
                    flush(state).await;
                }
            }
            ConversationMsg::Reload => state.context = None,
            ConversationMsg::IdleCheck => {
                let idle = state.deps.settings.actor_idle;
                let quiet = state.last_activity.elapsed();
                if quiet >= idle && state.pending.is_empty() {
                    let _ = state
                        .registry
                        .send_message(RegistryMsg::Passivate(state.key, myself.get_id()));
                } else {
                    let wait = idle.saturating_sub(quiet).max(Duration::from_millis(10));
                    myself.send_after(wait, || ConversationMsg::IdleCheck);
                }
            }
            #[cfg(test)]
            ConversationMsg::Crash => return Err("crash requested".into()),
        }
        Ok(())
    }
}

/// Loads the context if needed and routes the request.
async fn prepare(state: &mut ConversationState, request: &TurnRequest) -> Result<Route, TurnError> {
    let (workspace_id, identity_id) = state.key;
    if state.context.is_none() {
        state.context = Some(
            Context::load(&state.deps.db, workspace_id, identity_id)
                .await?
                .ok_or(TurnError::IdentityNotFound)?,
        );
    }
    let context = state.context.as_ref().ok_or(TurnError::IdentityNotFound)?;
    turn::route(&state.deps.db, workspace_id, request.channel_id, context).await
}

async fn answer(
    state: &mut ConversationState,
    route: &Route,
    batch: &[TurnRequest],
) -> Result<TurnOutcome, TurnError> {
    let Some(context) = state.context.as_mut() else {
        return Err(TurnError::IdentityNotFound);
    };
    let outcome = turn::run(&state.deps, context, route, batch).await;
    if let Err(error) = &outcome {
        tracing::warn!(identity_id = %state.key.1, %error, "turn failed");
        if matches!(error, TurnError::Storage(_)) {
            // The cache may be ahead of or behind the database now.
            state.context = None;
        }
    }
    outcome
}

/// Runs the debounced turns, one turn per channel in order of first arrival, and answers every
/// caller of a channel with that channel's outcome.
async fn flush(state: &mut ConversationState) {
    let mut pending = std::mem::take(&mut state.pending);
    while !pending.is_empty() {
        let channel_id = pending[0].request.channel_id;
        let (group, rest): (Vec<Pending>, Vec<Pending>) = pending
            .into_iter()
            .partition(|p| p.request.channel_id == channel_id);
        pending = rest;
        let route = group[0].route.clone();
        let batch: Vec<TurnRequest> = group.iter().map(|p| p.request.clone()).collect();
        let outcome = answer(state, &route, &batch).await;
        for waiting in group {
            let _ = waiting.reply.send(outcome.clone());
        }
    }
}
