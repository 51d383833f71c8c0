//! ConversationActor: one per live identity. It serialises that identity's turns across
//! channels, caches what a turn reads about its identity (the identity, its memory, its
//! recent messages) until a [`Change`] says otherwise, reads what all actors read alike (the
//! workspace's stages, each channel's route to its assistants) from [`shared`], merges a burst
//! of messages into one turn when the assistant asks for it (`debounce_ms`), and rests after a
//! few quiet seconds: it stops, and the registry keeps its cache (no task, no mailbox) until
//! the idle timeout, and spawns it again with that cache on the next message.

mod context;
mod deps;
mod handle;
mod handoff;
mod history;
mod local;
pub(crate) mod registry;
pub mod remote;
mod request;
mod resting;
mod route;
mod sealed;
mod shared;
mod tools;
mod turn;

use std::sync::Arc;
use std::time::{Duration, Instant};

use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use uuid::Uuid;

use self::context::Context;
pub use self::deps::{ConversationDeps, ConversationSettings};
pub use self::handle::Conversations;
pub use self::handoff::ModeChange;
pub use self::registry::LiveConversations;
use self::registry::RegistryMsg;
pub use self::request::{
    ToolCallRecord, TurnError, TurnEvent, TurnOrigin, TurnOutcome, TurnRequest,
};
pub use self::resting::{Announced, AnnouncedSoFar};
use self::route::Routed;
use self::sealed::Sealed;
use self::shared::Shared;
pub use self::tools::BUILTIN_TOOLS;
use crate::changes::Change;
use crate::tree::ActorPath;

/// Identifies a conversation actor: workspace and identity.
pub type ConversationKey = (i64, Uuid);

/// Behaviour of the per-identity actor.
pub(crate) struct ConversationActor;

/// What it starts with.
pub(crate) struct ConversationArgs {
    pub(crate) key: ConversationKey,
    pub(crate) deps: Arc<ConversationDeps>,
    pub(crate) shared: Arc<Shared>,
    pub(crate) registry: ActorRef<RegistryMsg>,
    /// What the identity's last actor cached (kept by the registry while it rested), or what
    /// its creator handed over.
    pub(crate) context: Option<Context>,
    /// When the identity's last turn arrived.
    pub(crate) last_activity: Instant,
    /// How long this actor waits for a turn before it rests
    /// ([`ConversationSettings::rest_when`]).
    pub(crate) rest: Duration,
}

/// What the registry keeps of an identity whose actor rests: the cache, sealed into one block,
/// and when its last turn arrived. No task, no mailbox.
pub(crate) struct Rested {
    pub(crate) context: Sealed,
    pub(crate) last_activity: Instant,
}

/// A turn waiting for its debounce window to close.
struct Pending {
    request: TurnRequest,
    routed: Routed,
    reply: RpcReplyPort<Result<TurnOutcome, TurnError>>,
}

/// State of the per-identity actor.
pub(crate) struct ConversationState {
    /// Workspace and identity.
    key: ConversationKey,
    /// Where it sits in the tree, for its log lines.
    path: ActorPath,
    /// Database, model, settings.
    deps: Arc<ConversationDeps>,
    /// Asked to passivate this actor, so that no new turn is routed here while it drains.
    registry: ActorRef<RegistryMsg>,
    /// The routes and stages all actors share.
    shared: Arc<Shared>,
    /// The identity and its memory; `None` until the first turn or after a change.
    context: Option<Context>,
    /// Turns collected in the current debounce window.
    pending: Vec<Pending>,
    /// Bumped by every debounced turn; a flush for an older generation is stale.
    generation: u64,
    /// Last time a turn arrived, for passivation.
    last_activity: Instant,
    /// Quiet time after which it asks to rest, set when it started.
    rest: Duration,
}

/// Messages of the per-identity actor.
pub(crate) enum ConversationMsg {
    /// Answer a message.
    Turn(TurnRequest, RpcReplyPort<Result<TurnOutcome, TurnError>>),
    /// Change who answers the identity's conversation on a channel; answers the conversation.
    Mode(
        ModeChange,
        RpcReplyPort<Result<parley_persistence::entities::conversation::Model, TurnError>>,
    ),
    /// The debounce window of this generation closed.
    Flush(u64),
    /// Something this actor may cache changed.
    Changed(Change),
    /// Time to see whether the actor has been quiet long enough to rest.
    RestCheck,
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
        myself.send_after(args.rest, || ConversationMsg::RestCheck);
        Ok(ConversationState {
            path: ActorPath::conversation(args.key.1),
            key: args.key,
            deps: args.deps,
            registry: args.registry,
            shared: args.shared,
            context: args.context,
            pending: Vec::new(),
            generation: 0,
            last_activity: args.last_activity,
            rest: args.rest,
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

    #[tracing::instrument(name = "conversation", skip_all, fields(actor = %state.path, workspace_id = state.key.0, identity_id = %state.key.1))]
    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        message: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        // A turn's future (model call, tool calls, statements) is large, and ractor keeps
        // the actor's loop, this future's largest state included, in one allocation for the
        // actor's whole life: boxed, an idle actor holds a few bytes instead of a turn.
        match message {
            ConversationMsg::Turn(request, reply) => {
                tracing::debug!(channel_id = %request.channel_id, "turn received");
                Box::pin(turn_arrived(state, &myself, request, reply)).await;
            }
            ConversationMsg::Mode(change, reply) => {
                let _ = reply.send(Box::pin(handoff::change(state, change)).await);
            }
            ConversationMsg::Flush(generation) => {
                if generation == state.generation {
                    Box::pin(flush(state)).await;
                }
            }
            ConversationMsg::Changed(change) => forget(state, &change),
            ConversationMsg::RestCheck => rest_check(state, &myself),
            #[cfg(test)]
            ConversationMsg::Crash => return Err("crash requested".into()),
        }
        Ok(())
    }
}

/// Routes a new message and answers it now, or holds it for the debounce window.
async fn turn_arrived(
    state: &mut ConversationState,
    myself: &ActorRef<ConversationMsg>,
    request: TurnRequest,
    reply: RpcReplyPort<Result<TurnOutcome, TurnError>>,
) {
    state.last_activity = Instant::now();
    let routed = match prepare(state, &request).await {
        Ok(routed) => routed,
        Err(error) => {
            let gone = matches!(error, TurnError::IdentityNotFound);
            let _ = reply.send(Err(error));
            if gone {
                myself.stop(Some("identity deleted".to_owned()));
            }
            return;
        }
    };
    if let Some(events) = request.events() {
        // A caller that went away does not stop the turn.
        let _ = events.send(TurnEvent::Accepted).await;
    }
    let debounce = routed.settings.debounce_ms;
    if debounce == 0 && state.pending.is_empty() {
        let outcome = answer(state, &routed, &[request]).await;
        let _ = reply.send(outcome);
        return;
    }
    state.pending.push(Pending {
        request,
        routed,
        reply,
    });
    state.generation += 1;
    let generation = state.generation;
    myself.send_after(Duration::from_millis(debounce), move || {
        ConversationMsg::Flush(generation)
    });
}

/// Loads the identity's context when it is not cached and picks the assistant for the
/// request's channel; refuses an API caller's turn in a conversation a person has (before a
/// streaming caller hears that its turn was accepted).
#[tracing::instrument(name = "prepare", level = "debug", skip_all)]
async fn prepare(
    state: &mut ConversationState,
    request: &TurnRequest,
) -> Result<Routed, TurnError> {
    let workspace_id = state.key.0;
    // The identity first: an unknown identity is refused before an unknown channel.
    state.context().await?;
    let route = state
        .shared
        .route(&state.deps.db, workspace_id, request.channel_id)
        .await?;
    let deps = Arc::clone(&state.deps);
    let context = state.context().await?;
    let routed = route.choose(context.language().as_deref())?;
    if matches!(request.origin, TurnOrigin::Api { .. })
        && turn::place::open_on(&deps, context, request.channel_id)
            .await?
            .is_some_and(|open| open.mode == parley_persistence::ConversationMode::Human)
    {
        return Err(TurnError::HumanMode);
    }
    Ok(routed)
}

async fn answer(
    state: &mut ConversationState,
    routed: &Routed,
    batch: &[TurnRequest],
) -> Result<TurnOutcome, TurnError> {
    let stages = state.shared.stages(&state.deps.db, state.key.0).await?;
    let Some(context) = state.context.as_mut() else {
        return Err(TurnError::IdentityNotFound);
    };
    let started = std::time::Instant::now();
    let outcome = turn::run(&state.deps, context, &stages, routed, batch).await;
    let result = match &outcome {
        Ok(done) if done.fallback => "fallback",
        Ok(_) => "ok",
        Err(_) => "error",
    };
    let origin = batch.first().map_or("api", |r| r.origin.label());
    crate::measure::turn(origin, result, started.elapsed());
    if let Err(error) = &outcome {
        tracing::warn!(%error, "turn failed");
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
        let routed = group[0].routed.clone();
        let batch: Vec<TurnRequest> = group.iter().map(|p| p.request.clone()).collect();
        let outcome = answer(state, &routed, &batch).await;
        for waiting in group {
            let _ = waiting.reply.send(outcome.clone());
        }
    }
}

/// Drops what `change` made stale; the next turn reloads it. (The registry has already
/// told [`Shared`].)
fn forget(state: &mut ConversationState, change: &Change) {
    if let Some(context) = state.context.as_mut()
        && !context.changed(change)
    {
        state.context = None;
    }
}

/// Asks the registry to let this actor rest once no turn came for the rest time and none
/// waits for its debounce window; looks again later otherwise.
fn rest_check(state: &ConversationState, myself: &ActorRef<ConversationMsg>) {
    let rest = state.rest;
    let quiet = state.last_activity.elapsed();
    if quiet >= rest && state.pending.is_empty() {
        let _ = state
            .registry
            .send_message(RegistryMsg::Rest(state.key, myself.get_id()));
    } else {
        let wait = rest.saturating_sub(quiet).max(Duration::from_millis(10));
        myself.send_after(wait, || ConversationMsg::RestCheck);
    }
}

impl ConversationState {
    /// The identity's context, read when it is not cached.
    ///
    /// # Errors
    /// [`TurnError::IdentityNotFound`] when the identity no longer exists, or a storage error.
    async fn context(&mut self) -> Result<&mut Context, TurnError> {
        let (workspace_id, identity_id) = self.key;
        if self.context.is_none() {
            self.context = Some(
                Context::load(&self.deps.db, workspace_id, identity_id)
                    .await?
                    .ok_or(TurnError::IdentityNotFound)?,
            );
        }
        self.context.as_mut().ok_or(TurnError::IdentityNotFound)
    }

    /// What the registry keeps once this actor stopped to rest: its cache, if it has one, and
    /// when its last turn arrived.
    fn into_cache(self) -> Option<(Context, Instant)> {
        let last_activity = self.last_activity;
        self.context.map(|context| (context, last_activity))
    }
}
