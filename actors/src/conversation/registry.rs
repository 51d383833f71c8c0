//! The `conversations` supervisor: at most one ConversationActor per identity, spawned on
//! demand (virtual-actor style), forgotten when it stops or fails, told about the changes that
//! concern it; and the caches of identities whose actor rests, until their idle timeout. The
//! handle the rest of Parley talks through is `handle.rs`; what lets a created identity's
//! first actor skip reading it back is `resting.rs`; the periodic return of conversations to
//! the assistant is `registry/sweeps.rs`.
//!
//! Resting goes through the registry so that an identity never has two actors: the actor asks
//! ([`RegistryMsg::Rest`]), the registry forgets it and lets it finish its mailbox, and takes
//! its cache from the state it stopped with. A turn for that identity in between waits for the
//! stop and goes to a new actor that starts with the cache; a change in between is applied to
//! the cache when it arrives.

mod sweeps;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ractor::{
    Actor, ActorId, ActorProcessingErr, ActorRef, MessagingErr, RpcReplyPort, SupervisionEvent,
    call_t, rpc::CallResult,
};
use tracing::Instrument;

use super::handoff;
use super::resting::Created;
use super::shared::Shared;
use super::{
    ConversationActor, ConversationArgs, ConversationDeps, ConversationKey, ConversationMsg,
    ConversationState, Rested, Sealed, TurnError,
};
use crate::changes::Change;
use crate::tree::{ActorPath, LiveActors, Published, RuntimeError, SupervisorKind};

/// The identities' live actors as the registry publishes them ([`Published`]), so that a turn
/// for an identity whose actor is live reaches it without waiting its turn in the registry's
/// mailbox; kept across the registry's restarts, like [`super::Announced`]. Cheap to clone.
#[derive(Clone, Default)]
pub struct LiveConversations(Published<ConversationKey, ConversationMsg>);

impl LiveConversations {
    /// The live actor of `key`, as last published.
    pub(super) fn get(&self, key: &ConversationKey) -> Option<ActorRef<ConversationMsg>> {
        self.0.get(key).map(|actor| actor.value().clone())
    }
}

impl std::fmt::Debug for LiveConversations {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LiveConversations")
            .field("live", &self.0.len())
            .finish()
    }
}

/// Behaviour of the `root/conversations` supervisor.
pub(crate) struct ConversationRegistry;

/// State of the registry.
pub(crate) struct RegistryState {
    /// Shared with every conversation actor.
    deps: Arc<ConversationDeps>,
    /// The routes and stages every conversation actor reads.
    shared: Arc<Shared>,
    /// The live actor of each identity.
    live: LiveActors<ConversationKey, ConversationMsg>,
    /// The cache of each identity whose actor rests, until its idle timeout: a sealed block
    /// and a time, so that the table's room to grow is small.
    resting: HashMap<ConversationKey, Rested>,
    /// Identities whose actor finishes its mailbox before it rests.
    stopping: HashMap<ConversationKey, Stopping>,
    /// Held while a handoff sweep runs (in a task of its own: the registry does not wait).
    sweeping: Arc<handoff::Sweeping>,
}

/// Who waits for an actor that is finishing its mailbox before it rests.
#[derive(Default)]
struct Stopping {
    /// Callers of [`RegistryMsg::Get`]: they get its successor.
    callers: Vec<ActorReply>,
    /// Changes announced meanwhile, applied to the cache it leaves.
    changes: Vec<Change>,
}

type ActorReply = RpcReplyPort<Result<ActorRef<ConversationMsg>, TurnError>>;

/// Messages of the registry.
pub(crate) enum RegistryMsg {
    /// The identity's actor, spawned when there is none (starting from the newly created
    /// identity, when one is given and still current).
    Get(ConversationKey, Option<Created>, ActorReply),
    /// The identity's actor if it is live.
    #[cfg(test)]
    Lookup(
        ConversationKey,
        RpcReplyPort<Option<ActorRef<ConversationMsg>>>,
    ),
    /// A quiet actor asks to rest: forget it first so no new turn reaches it, then let it
    /// finish what is already in its mailbox; its cache is kept when it has stopped.
    Rest(ConversationKey, ActorId),
    /// Something conversation actors may cache changed.
    Changed(Change),
    /// How many identities have a live actor and how many rest with their cache kept (of one
    /// workspace, when given), counted at one moment.
    Held(Option<i64>, RpcReplyPort<(usize, usize)>),
    /// Time to forget the identities idle for longer than the idle timeout.
    Sweep,
    /// Time to give back the conversations whose person has been quiet too long.
    SweepHandoffs,
    /// The partitions this node owns changed: identities it no longer owns are let go
    /// (their actors rest and their caches are dropped; their owner reads them afresh).
    Rebalance,
}

impl Actor for ConversationRegistry {
    type Msg = RegistryMsg;
    type State = RegistryState;
    type Arguments = Arc<ConversationDeps>;

    async fn pre_start(
        &self,
        myself: ActorRef<Self::Msg>,
        deps: Arc<ConversationDeps>,
    ) -> Result<Self::State, ActorProcessingErr> {
        // An identity is forgotten within a tenth of the idle timeout after it ran out.
        let every = (deps.settings.actor_idle / 10)
            .clamp(Duration::from_millis(100), Duration::from_secs(10));
        myself.send_interval(every, || RegistryMsg::Sweep);
        myself.send_interval(deps.settings.handoff_sweep, || RegistryMsg::SweepHandoffs);
        Ok(RegistryState {
            live: LiveActors::publishing(deps.live.0.clone()),
            deps,
            shared: Arc::default(),
            resting: HashMap::new(),
            stopping: HashMap::new(),
            sweeping: Arc::default(),
        })
    }

    async fn post_stop(
        &self,
        myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        let path = ActorPath::supervisor(SupervisorKind::Conversations);
        state.live.stop_all(&myself.get_cell(), &path).await;
        Ok(())
    }

    #[tracing::instrument(name = "conversations", skip_all)]
    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        message: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            RegistryMsg::Get(key, created, reply) => match state.stopping.get_mut(&key) {
                Some(stopping) => stopping.callers.push(reply),
                None => {
                    let _ = reply.send(get(&myself, state, key, created).await);
                }
            },
            #[cfg(test)]
            RegistryMsg::Lookup(key, reply) => {
                let _ = reply.send(state.live.get(&key).cloned());
            }
            RegistryMsg::Rest(key, id) => {
                if state.live.retire(&key, Some(id)) {
                    state.stopping.insert(key, Stopping::default());
                }
            }
            RegistryMsg::Changed(change) => fan_out(state, &change),
            RegistryMsg::Held(workspace, reply) => {
                let live = state.live.iter().map(|(key, _)| key);
                let live = count(live.chain(state.stopping.keys()), workspace);
                let _ = reply.send((live, count(state.resting.keys(), workspace)));
            }
            RegistryMsg::SweepHandoffs => {
                if let Some(sweep) = state.sweeping.start() {
                    let (registry, deps) = (myself.clone(), state.deps.clone());
                    tokio::spawn(async move {
                        sweeps::give_back_quiet(registry, deps.clone()).await;
                        sweeps::release_unanswered(&deps).await;
                        drop(sweep);
                    });
                }
            }
            RegistryMsg::Rebalance => {
                let placement = state.deps.placement.clone();
                state.live.retire_unless(|key| placement.owns(key.1));
                state.resting.retain(|key, _| placement.owns(key.1));
            }
            RegistryMsg::Sweep => {
                let idle = state.deps.settings.actor_idle;
                let before = state.resting.len();
                state
                    .resting
                    .retain(|_, rested| rested.last_activity.elapsed() < idle);
                let forgotten = before - state.resting.len();
                if forgotten > 0 {
                    tracing::debug!(forgotten, "idle identities forgotten");
                }
            }
        }
        Ok(())
    }

    async fn handle_supervisor_evt(
        &self,
        myself: ActorRef<Self::Msg>,
        event: SupervisionEvent,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        let Some((key, ending)) = state.live.ended(event) else {
            return Ok(());
        };
        ending.log_routine(
            &ActorPath::conversation(key.1),
            "the next message for this identity restarts it",
            "resting",
        );
        let stopping = state.stopping.remove(&key).unwrap_or_default();
        let cache = ending
            .into_state::<ConversationState>()
            .and_then(ConversationState::into_cache)
            .and_then(|(mut context, last_activity)| {
                let stands = stopping
                    .changes
                    .iter()
                    .all(|change| context.changed(change));
                stands.then_some((context, last_activity))
            });
        // A new actor may have started meanwhile (this one stopped on its own, or failed):
        // its own cache is the newer.
        if let Some((context, last_activity)) = cache
            && state.live.get(&key).is_none()
            && state.deps.placement.owns(key.1)
            && let Some(context) = Sealed::seal(&context)
        {
            state.resting.insert(
                key,
                Rested {
                    context,
                    last_activity,
                },
            );
        }
        if !stopping.callers.is_empty() {
            let successor = get(&myself, state, key, None).await;
            for caller in stopping.callers {
                let _ = caller.send(successor.clone());
            }
        }
        Ok(())
    }
}

/// How many of `keys` belong to `workspace` (all, for `None`).
fn count<'a>(keys: impl Iterator<Item = &'a ConversationKey>, workspace: Option<i64>) -> usize {
    keys.filter(|(ws, _)| workspace.is_none_or(|w| w == *ws))
        .count()
}

async fn get(
    myself: &ActorRef<RegistryMsg>,
    state: &mut RegistryState,
    key: ConversationKey,
    created: Option<Created>,
) -> Result<ActorRef<ConversationMsg>, TurnError> {
    if let Some(actor) = state.live.get(&key) {
        return Ok(actor.clone());
    }
    // Another node owns the identity (a partition moved): its actor lives there, never here
    // as well.
    if !state.deps.placement.owns(key.1) {
        return Err(TurnError::NotOwner);
    }
    let announced = &state.deps.announced;
    let (context, last_activity) = match state.resting.remove(&key) {
        Some(rested) => {
            let _thaw = tracing::debug_span!("thaw").entered();
            (rested.context.open(), rested.last_activity)
        }
        None => (
            created.and_then(|created| created.context_if_current(announced)),
            Instant::now(),
        ),
    };
    let args = ConversationArgs {
        key,
        deps: state.deps.clone(),
        shared: state.shared.clone(),
        registry: myself.clone(),
        context,
        last_activity,
        rest: state.deps.settings.rest_when(state.live.len()),
    };
    let path = ActorPath::conversation(key.1);
    let spawned = Actor::spawn_linked(None, ConversationActor, args, myself.get_cell())
        .instrument(tracing::debug_span!("spawn_actor"))
        .await;
    match spawned {
        Ok((actor, _)) => {
            tracing::debug!(actor = %path, "actor spawned");
            state.live.insert(key, actor.clone());
            Ok(actor)
        }
        Err(error) => {
            tracing::error!(actor = %path, %error, "actor failed to start");
            Err(RuntimeError::from(error).into())
        }
    }
}

/// Forgets what the change made stale in the shared routes and stages, then tells every
/// identity the change concerns (its own, or every identity of the workspace for a change they
/// all may cache): a live actor by message, a resting cache at once, an actor finishing its
/// mailbox when it has stopped.
fn fan_out(state: &mut RegistryState, change: &Change) {
    state.deps.announced.count(change);
    state.shared.forget(change);
    let workspace_id = change.workspace_id();
    let one = match change {
        Change::Identity { identity_id, .. } | Change::Messages { identity_id, .. } => {
            Some((workspace_id, *identity_id))
        }
        _ => None,
    };
    let concerns = |key: &ConversationKey| one.map_or(key.0 == workspace_id, |k| k == *key);
    for (_, actor) in state.live.iter().filter(|(key, _)| concerns(key)) {
        let _ = actor.send_message(ConversationMsg::Changed(change.clone()));
    }
    state
        .resting
        .retain(|key, rested| !concerns(key) || rested.context.changed(change));
    for (_, stopping) in state.stopping.iter_mut().filter(|(key, _)| concerns(key)) {
        stopping.changes.push(change.clone());
    }
}

/// Where [`ask`] finds the identity's actor: what the registry published, else the registry.
pub(super) struct Finder<'a> {
    pub(super) live: &'a LiveConversations,
    pub(super) registry: &'a ActorRef<RegistryMsg>,
}

/// Sends the identity's actor the message `make` builds and waits at most `timeout` for its
/// answer. A live actor is taken from what the registry published; any other is asked of the
/// registry, which spawns it. An actor that rested between the lookup and the send refuses the
/// message; the registry then answers with its successor (twice at most). What outlives the
/// wait goes on.
pub(super) async fn ask<T>(
    finder: Finder<'_>,
    key: ConversationKey,
    created: Option<Created>,
    timeout: Duration,
    make: impl Fn(RpcReplyPort<Result<T, TurnError>>) -> ConversationMsg,
) -> Result<T, TurnError>
where
    T: Send + 'static,
{
    let mut published = finder.live.get(&key);
    for _ in 0..2 + usize::from(published.is_some()) {
        let actor = match published.take() {
            Some(actor) => actor,
            // An identity whose actor is finishing a turn before it rests waits for that turn.
            None => {
                let wait = u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX);
                let registry = finder.registry;
                async { call_t!(registry, RegistryMsg::Get, wait, key, created.clone()) }
                    .instrument(tracing::debug_span!("find_actor"))
                    .await
                    .map_err(|e| RuntimeError::Unavailable(e.to_string()))??
            }
        };
        let sent = actor
            .call(&make, Some(timeout))
            .instrument(tracing::debug_span!("actor_turn"))
            .await;
        match sent {
            Ok(CallResult::Success(outcome)) => return outcome,
            Ok(CallResult::Timeout) => return Err(TurnError::Timeout),
            Ok(CallResult::SenderError) => {
                return Err(RuntimeError::Unavailable(
                    "the conversation actor stopped during the turn".to_owned(),
                )
                .into());
            }
            Err(MessagingErr::SendErr(_) | MessagingErr::ChannelClosed) => continue,
            Err(error) => return Err(RuntimeError::Unavailable(error.to_string()).into()),
        }
    }
    Err(RuntimeError::Unavailable("the conversation actor kept stopping".to_owned()).into())
}

#[cfg(test)]
mod tests;
