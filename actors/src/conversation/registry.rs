//! The `conversations` supervisor and registry: at most one ConversationActor per identity,
//! spawned on demand (virtual-actor style), forgotten when it stops or fails, told about the
//! changes that concern it; the caches of identities whose actor rests, until their idle
//! timeout; and the [`Conversations`] handle the rest of Parley talks through.
//!
//! Resting goes through the registry so that an identity never has two actors: the actor asks
//! ([`RegistryMsg::Rest`]), the registry forgets it and lets it finish its mailbox, and takes
//! its cache from the state it stopped with. A turn for that identity in between waits for the
//! stop and goes to a new actor that starts with the cache; a change in between is applied to
//! the cache when it arrives.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use parley_persistence::entities::{conversation, identity};

use ractor::{
    Actor, ActorId, ActorProcessingErr, ActorRef, MessagingErr, RpcReplyPort, SupervisionEvent,
    call_t, rpc::CallResult,
};
use tracing::Instrument;
use uuid::Uuid;

use super::context::Context;
use super::handoff::{self, ModeChange};
use super::shared::Shared;
use super::{
    ConversationActor, ConversationArgs, ConversationDeps, ConversationKey, ConversationMsg,
    ConversationState, Rested, TurnError, TurnOrigin, TurnOutcome, TurnRequest,
};
use crate::changes::{Change, Listener};
use crate::cluster::Ownership;
use crate::tree::{ActorPath, LiveActors, RuntimeError, Slot, SupervisorKind};

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
    /// The cache of each identity whose actor rests, until its idle timeout. Boxed: the table
    /// keeps room to grow, and that room is a pointer per slot instead of a whole cache.
    resting: HashMap<ConversationKey, Box<Rested>>,
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

type ActorReply = RpcReplyPort<Result<ActorRef<ConversationMsg>, RuntimeError>>;

/// How many changes the registry has applied that a cache of an identity it has not seen
/// yet could miss, kept across its restarts ([`ConversationDeps::announced`]): a caller that
/// has just created an identity hands it over with the counts it read before, and the
/// registry takes from it only what no change came in between to contradict.
#[derive(Debug, Default)]
pub struct Announced {
    /// Identity changes (an identity, its stage, contacts or memory), of any identity.
    identities: AtomicU64,
    /// Messages stored outside a conversation actor (which may start a conversation), for any
    /// identity.
    messages: AtomicU64,
}

/// The counts of [`Announced`] at one moment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AnnouncedSoFar {
    identities: u64,
    messages: u64,
}

impl Announced {
    fn so_far(&self) -> AnnouncedSoFar {
        AnnouncedSoFar {
            identities: self.identities.load(Ordering::Acquire),
            messages: self.messages.load(Ordering::Acquire),
        }
    }

    /// Counts `change`, before it is applied.
    fn count(&self, change: &Change) {
        match change {
            Change::Identity { .. } => self.identities.fetch_add(1, Ordering::AcqRel),
            Change::Messages { .. } => self.messages.fetch_add(1, Ordering::AcqRel),
            _ => return,
        };
    }
}

/// An identity its caller has just created, so that its first actor need not read it back.
#[derive(Clone, Debug)]
pub struct Created {
    identity: identity::Model,
    /// [`ConversationDeps::announced`] read before the identity was created.
    announced_before: AnnouncedSoFar,
}

impl Created {
    /// The cache a new actor may start from: an identity just created has no memory, unless an
    /// identity change (say, to its memory) was applied since the counts were read; and no
    /// conversation, unless messages were stored for someone outside a conversation actor
    /// since (a send may have started one). Other changes (channels, assistants, stages)
    /// concern nothing a fresh context holds.
    fn context_if_current(self, announced: &Announced) -> Option<Context> {
        let now = announced.so_far();
        (now.identities == self.announced_before.identities).then(|| {
            let mut context = Context::fresh(self.identity);
            context.conversations_known = now.messages == self.announced_before.messages;
            context
        })
    }
}

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
            deps,
            shared: Arc::default(),
            live: LiveActors::new(),
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
                        sweep_handoffs(registry, deps).await;
                        drop(sweep);
                    });
                }
            }
            RegistryMsg::Rebalance => {
                let ownership = state.deps.ownership.clone();
                state.live.retire_unless(|key| ownership.owns(key.1));
                state.resting.retain(|key, _| ownership.owns(key.1));
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
        let mut rested = ending
            .into_state::<ConversationState>()
            .and_then(ConversationState::into_rested);
        if let Some(cache) = rested.as_mut()
            && !stopping
                .changes
                .iter()
                .all(|change| cache.context.changed(change))
        {
            rested = None;
        }
        // A new actor may have started meanwhile (this one stopped on its own, or failed):
        // its own cache is the newer.
        if let Some(rested) = rested
            && state.live.get(&key).is_none()
            && state.deps.ownership.owns(key.1)
        {
            state.resting.insert(key, Box::new(rested));
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
) -> Result<ActorRef<ConversationMsg>, RuntimeError> {
    if let Some(actor) = state.live.get(&key) {
        return Ok(actor.clone());
    }
    let announced = &state.deps.announced;
    let rested = state
        .resting
        .remove(&key)
        .map(|rested| *rested)
        .or_else(|| {
            created
                .and_then(|created| created.context_if_current(announced))
                .map(|context| Rested {
                    context,
                    last_activity: Instant::now(),
                })
        });
    let args = ConversationArgs {
        key,
        deps: state.deps.clone(),
        shared: state.shared.clone(),
        registry: myself.clone(),
        rested,
        rest: state.deps.settings.rest_when(state.live.len()),
    };
    let path = ActorPath::conversation(key.1);
    match Actor::spawn_linked(None, ConversationActor, args, myself.get_cell()).await {
        Ok((actor, _)) => {
            tracing::debug!(actor = %path, "actor spawned");
            state.live.insert(key, actor.clone());
            Ok(actor)
        }
        Err(error) => {
            tracing::error!(actor = %path, %error, "actor failed to start");
            Err(error.into())
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

/// The handle on the conversation actors; cheap to clone.
#[derive(Clone, Debug)]
pub struct Conversations {
    registry: Slot<RegistryMsg>,
    turn_timeout: Duration,
    announced: Arc<Announced>,
    /// Which identities this node owns; a turn for another's goes to its owner.
    ownership: Ownership,
}

impl Conversations {
    pub(crate) fn new(
        registry: Slot<RegistryMsg>,
        turn_timeout: Duration,
        announced: Arc<Announced>,
        ownership: Ownership,
    ) -> Self {
        Self {
            registry,
            turn_timeout,
            announced,
            ownership,
        }
    }

    /// Which identities this node owns.
    pub fn ownership(&self) -> &Ownership {
        &self.ownership
    }

    /// Tells the registry that the partitions this node owns changed.
    pub fn rebalance(&self) {
        if let Ok(registry) = self.registry.get() {
            let _ = registry.send_message(RegistryMsg::Rebalance);
        }
    }

    /// Read before creating an identity, then hand it to [`Conversations::turn_of_created`].
    pub fn announced(&self) -> AnnouncedSoFar {
        self.announced.so_far()
    }

    /// Runs a turn for an identity the caller has just created, `announced_before` (from
    /// [`Conversations::announced`]) having been read before it was: its first actor starts
    /// from `identity` instead of reading it and its memory, unless a change came in between.
    ///
    /// # Errors
    /// As [`Conversations::turn`].
    pub async fn turn_of_created(
        &self,
        workspace_id: i64,
        identity: identity::Model,
        announced_before: AnnouncedSoFar,
        request: TurnRequest,
    ) -> Result<TurnOutcome, TurnError> {
        let key = (workspace_id, identity.id);
        let created = Created {
            identity,
            announced_before,
        };
        self.run_turn(key, Some(created), request).await
    }

    /// A scheduled follow-up: the identity's assistant writes to `to` with `instructions`, in
    /// the conversation on `channel_id`, serialised with the person's own messages; the reply
    /// is stored `pending` for the caller to send.
    ///
    /// # Errors
    /// As [`Conversations::turn`].
    pub async fn follow_up(
        &self,
        workspace_id: i64,
        identity_id: Uuid,
        channel_id: Uuid,
        to: crate::domain::Phone,
        instructions: String,
    ) -> Result<TurnOutcome, TurnError> {
        let request = TurnRequest {
            channel_id,
            text: String::new(),
            origin: TurnOrigin::FollowUp { instructions, to },
            metadata: None,
        };
        self.turn(workspace_id, identity_id, request).await
    }

    /// Runs a turn for `identity_id` in its actor, waiting at most the configured turn timeout.
    /// A turn that outlives the wait goes on and is stored.
    ///
    /// # Errors
    /// The turn's own failure, [`TurnError::Timeout`], or [`TurnError::Unavailable`] when the
    /// actor cannot be reached or fails during the turn.
    pub async fn turn(
        &self,
        workspace_id: i64,
        identity_id: Uuid,
        request: TurnRequest,
    ) -> Result<TurnOutcome, TurnError> {
        self.run_turn((workspace_id, identity_id), None, request)
            .await
    }

    #[tracing::instrument(name = "ask_turn", level = "debug", skip_all)]
    async fn run_turn(
        &self,
        key: ConversationKey,
        created: Option<Created>,
        request: TurnRequest,
    ) -> Result<TurnOutcome, TurnError> {
        if !self.ownership.owns(key.1) {
            return match super::remote::RemoteTurn::of(key.0, key.1, &request) {
                Some(remote) => self.turn_at_owner(remote).await,
                // An API caller's request is forwarded whole by the front door.
                None => Err(TurnError::NotOwner),
            };
        }
        let registry = self.registry.get()?;
        ask(&registry, key, created, self.turn_timeout, |reply| {
            ConversationMsg::Turn(request.clone(), reply)
        })
        .await
    }

    /// Changes who answers the identity's conversation on a channel, inside its actor, so that
    /// every turn of that identity is either before the change or after it; answers the
    /// conversation as it is now.
    ///
    /// # Errors
    /// [`TurnError::IdentityNotFound`], [`TurnError::ChannelNotFound`],
    /// [`TurnError::NoConversation`] (nothing open to give back), or as [`Conversations::turn`].
    pub async fn change_mode(
        &self,
        workspace_id: i64,
        identity_id: Uuid,
        change: ModeChange,
    ) -> Result<conversation::Model, TurnError> {
        if !self.ownership.owns(identity_id) {
            return Err(TurnError::NotOwner);
        }
        let registry = self.registry.get()?;
        let key = (workspace_id, identity_id);
        ask(&registry, key, None, self.turn_timeout, |reply| {
            ConversationMsg::Mode(change.clone(), reply)
        })
        .await
    }

    /// How many conversation actors are live, one finishing its mailbox before it rests
    /// included.
    ///
    /// # Errors
    /// Fails when the registry does not answer.
    pub async fn live(&self) -> Result<usize, RuntimeError> {
        Ok(self.held_in(None).await?.0)
    }

    /// How many identities of `workspace` (all, for `None`) have a live actor, one finishing
    /// its mailbox before it rests included, and how many rest with their cache kept: both
    /// from one answer of the registry, so that an actor resting meanwhile is counted once.
    ///
    /// # Errors
    /// Fails when the registry does not answer.
    pub async fn held_in(&self, workspace: Option<i64>) -> Result<(usize, usize), RuntimeError> {
        let registry = self.registry.get()?;
        call_t!(registry, RegistryMsg::Held, 5_000, workspace)
            .map_err(|e| RuntimeError::Unavailable(e.to_string()))
    }

    /// How many identities of `workspace` (all, for `None`) rest with their cache kept.
    ///
    /// # Errors
    /// Fails when the registry does not answer.
    pub async fn resting_in(&self, workspace: Option<i64>) -> Result<usize, RuntimeError> {
        Ok(self.held_in(workspace).await?.1)
    }

    #[cfg(test)]
    pub(crate) async fn actor_of(&self, key: ConversationKey) -> Option<ActorRef<ConversationMsg>> {
        let registry = self.registry.get().ok()?;
        call_t!(registry, RegistryMsg::Lookup, 5_000, key)
            .ok()
            .flatten()
    }
}

/// Sends the identity's actor the message `make` builds and waits at most `timeout` for its
/// answer. An actor that rested between the lookup and the send refuses the message; the
/// second attempt reaches its successor. What outlives the wait goes on.
async fn ask<T>(
    registry: &ActorRef<RegistryMsg>,
    key: ConversationKey,
    created: Option<Created>,
    timeout: Duration,
    make: impl Fn(RpcReplyPort<Result<T, TurnError>>) -> ConversationMsg,
) -> Result<T, TurnError>
where
    T: Send + 'static,
{
    for _ in 0..2 {
        // An identity whose actor is finishing a turn before it rests waits for that turn.
        let wait = u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX);
        let actor = async { call_t!(registry, RegistryMsg::Get, wait, key, created.clone()) }
            .instrument(tracing::debug_span!("find_actor"))
            .await
            .map_err(|e| RuntimeError::Unavailable(e.to_string()))??;
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

/// Gives back every conversation whose person has been quiet too long, each in its identity's
/// actor; a failure is logged and the conversation is looked at again by the next sweep.
async fn sweep_handoffs(registry: ActorRef<RegistryMsg>, deps: Arc<ConversationDeps>) {
    let due = match handoff::due(&deps.db).await {
        Ok(due) => due,
        Err(error) => {
            tracing::warn!(%error, "the handoff sweep could not read the conversations");
            return;
        }
    };
    for (workspace_id, identity_id, channel_id, before) in due {
        if !deps.ownership.owns(identity_id) {
            continue;
        }
        let change = ModeChange::GiveBackIfQuiet { channel_id, before };
        let key = (workspace_id, identity_id);
        let asked = ask(&registry, key, None, deps.settings.turn_timeout, |reply| {
            ConversationMsg::Mode(change.clone(), reply)
        });
        if let Err(error) = asked.await {
            tracing::warn!(%identity_id, %channel_id, %error, "a conversation's return to the assistant failed");
        }
    }
}

impl Listener for Conversations {
    /// Passes the change to every live actor (and resting cache) it concerns.
    fn changed(&self, change: &Change) {
        if let Ok(registry) = self.registry.get() {
            let _ = registry.send_message(RegistryMsg::Changed(change.clone()));
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use parley_persistence::ConnectionTrait;

    use super::*;
    use crate::ActorRuntime;
    use crate::conversation::TurnOrigin;
    use crate::test_support::{runtime_deps, world};

    fn says(channel_id: Uuid, text: &str) -> TurnRequest {
        TurnRequest {
            channel_id,
            text: text.to_owned(),
            origin: TurnOrigin::Api { events: None },
            metadata: None,
        }
    }

    #[tokio::test]
    async fn a_crashed_conversation_actor_is_replaced_and_other_identities_are_untouched() {
        let t = started(|_| {}).await;
        let (conversations, ws, channel, a, b) = (&t.conversations, t.ws, t.channel, t.a, t.b);
        conversations
            .turn(ws, a, says(channel, "hi"))
            .await
            .expect("a answers");
        conversations
            .turn(ws, b, says(channel, "hi"))
            .await
            .expect("b answers");
        let a_before = conversations.actor_of((ws, a)).await.expect("a live");
        let b_before = conversations.actor_of((ws, b)).await.expect("b live");

        a_before.send_message(ConversationMsg::Crash).expect("send");
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        while conversations.actor_of((ws, a)).await.is_some() {
            assert!(
                tokio::time::Instant::now() < deadline,
                "the failed actor was not forgotten"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }

        let again = conversations
            .turn(ws, a, says(channel, "still there?"))
            .await
            .expect("a answers again");
        assert_eq!(again.reply, "You said: still there?");
        let a_after = conversations.actor_of((ws, a)).await.expect("a live again");
        assert_ne!(a_after.get_id(), a_before.get_id());
        let b_after = conversations.actor_of((ws, b)).await.expect("b still live");
        assert_eq!(
            b_after.get_id(),
            b_before.get_id(),
            "b's actor never noticed"
        );
        t.runtime.shutdown(Duration::from_secs(5)).await;
    }

    #[tokio::test]
    async fn concurrent_first_messages_of_one_identity_spawn_one_actor() {
        let t = started(|_| {}).await;
        let (conversations, ws, channel, a) = (&t.conversations, t.ws, t.channel, t.a);

        let turns = (0..8).map(|n| {
            let conversations = conversations.clone();
            async move {
                conversations
                    .turn(ws, a, says(channel, &format!("m{n}")))
                    .await
            }
        });
        for outcome in futures_util::future::join_all(turns).await {
            outcome.expect("answered");
        }

        assert_eq!(conversations.live().await.expect("count"), 1);
        t.runtime.shutdown(Duration::from_secs(5)).await;
    }

    /// A runtime on a fresh database holding [`world`], its conversation settings adjusted.
    struct Started {
        runtime: ActorRuntime,
        conversations: Conversations,
        model: parley_testkit::FakeModel,
        db: parley_persistence::DatabaseConnection,
        ws: i64,
        channel: Uuid,
        a: Uuid,
        b: Uuid,
        _dir: tempfile::TempDir,
    }

    async fn started(configure: impl FnOnce(&mut ConversationDeps)) -> Started {
        let (mut deps, dir, model) = runtime_deps().await;
        configure(&mut deps.conversations);
        let db = deps.conversations.db.clone();
        let (ws, channel, a, b) = world(&db).await;
        let runtime = ActorRuntime::start(deps).await.expect("runtime");
        let conversations = runtime.conversations().clone();
        Started {
            runtime,
            conversations,
            model,
            db,
            ws,
            channel,
            a,
            b,
            _dir: dir,
        }
    }

    /// The texts of the messages the model was sent in its most recent request.
    fn last_request_texts(model: &parley_testkit::FakeModel) -> Vec<String> {
        model.last_request().expect("a request")["messages"]
            .as_array()
            .expect("messages")
            .iter()
            .filter_map(|m| m["content"].as_str().map(str::to_owned))
            .collect()
    }

    async fn wait_until(what: &str, mut done: impl AsyncFnMut() -> bool) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        while !done().await {
            assert!(tokio::time::Instant::now() < deadline, "{what}");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    #[tokio::test]
    async fn a_resting_identity_has_no_actor_and_its_next_turn_starts_from_its_cache() {
        let t = started(|deps| deps.settings.actor_rest = Duration::from_millis(50)).await;
        let (conversations, ws, channel, a) = (&t.conversations, t.ws, t.channel, t.a);
        conversations
            .turn(ws, a, says(channel, "first"))
            .await
            .expect("answered");

        wait_until("the actor never rested", async || {
            conversations.live().await.expect("count") == 0
        })
        .await;
        assert_eq!(conversations.resting_in(None).await.expect("count"), 1);
        assert_eq!(
            conversations.resting_in(Some(ws + 1)).await.expect("count"),
            0
        );

        // Unannounced, so only a turn that reads the table would miss them: the history comes
        // from the cache the resting actor left.
        t.db.execute_unprepared("DELETE FROM messages")
            .await
            .expect("delete");
        conversations
            .turn(ws, a, says(channel, "second"))
            .await
            .expect("answered");
        let texts = last_request_texts(&t.model);
        assert!(texts.contains(&"first".to_owned()), "{texts:?}");
        assert!(texts.contains(&"You said: first".to_owned()), "{texts:?}");
        assert_eq!(conversations.resting_in(None).await.expect("count"), 0);
        t.runtime.shutdown(Duration::from_secs(5)).await;
    }

    #[tokio::test]
    async fn an_actor_started_while_the_warm_ones_are_live_rests_after_the_busy_rest() {
        let t = started(|deps| {
            deps.settings.actor_rest = Duration::from_secs(60);
            deps.settings.warm_actors = 1;
            deps.settings.busy_rest = Duration::from_millis(50);
        })
        .await;
        let (conversations, ws, channel) = (&t.conversations, t.ws, t.channel);
        conversations
            .turn(ws, t.a, says(channel, "first"))
            .await
            .expect("answered");
        conversations
            .turn(ws, t.b, says(channel, "second"))
            .await
            .expect("answered");

        wait_until(
            "the actor started past the warm ones never rested",
            async || conversations.actor_of((ws, t.b)).await.is_none(),
        )
        .await;
        assert_eq!(
            conversations.held_in(None).await.expect("count"),
            (1, 1),
            "live and resting"
        );
        assert!(
            conversations.actor_of((ws, t.a)).await.is_some(),
            "the warm actor rested before its rest time"
        );
        t.runtime.shutdown(Duration::from_secs(5)).await;
    }

    #[tokio::test]
    async fn a_turn_for_an_actor_finishing_its_mailbox_before_it_rests_waits_for_its_successor() {
        let t = started(|_| {}).await;
        let (conversations, ws, channel, a) = (&t.conversations, t.ws, t.channel, t.a);
        conversations
            .turn(ws, a, says(channel, "warm up"))
            .await
            .expect("answered");
        let first = conversations.actor_of((ws, a)).await.expect("live");

        t.model
            .set_latency(Duration::from_millis(300), Duration::ZERO);
        let slow = tokio::spawn({
            let conversations = conversations.clone();
            async move { conversations.turn(ws, a, says(channel, "slow")).await }
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        conversations
            .registry
            .get()
            .expect("registry")
            .send_message(RegistryMsg::Rest((ws, a), first.get_id()))
            .expect("rest");
        t.model.set_latency(Duration::ZERO, Duration::ZERO);
        let next = conversations
            .turn(ws, a, says(channel, "next"))
            .await
            .expect("answered");

        assert_eq!(next.reply, "You said: next");
        let slow = slow.await.expect("task").expect("answered");
        assert_eq!(slow.reply, "You said: slow");
        // The successor started once the first had stored its turn, and from its cache.
        let texts = last_request_texts(&t.model);
        assert!(texts.contains(&"You said: slow".to_owned()), "{texts:?}");
        let successor = conversations.actor_of((ws, a)).await.expect("live");
        assert_ne!(successor.get_id(), first.get_id());
        assert_eq!(conversations.live().await.expect("count"), 1);
        t.runtime.shutdown(Duration::from_secs(5)).await;
    }

    #[tokio::test]
    async fn a_created_identity_is_taken_as_given_unless_a_change_came_in_between() {
        let t = started(|_| {}).await;
        let (conversations, ws, channel, a, b) = (&t.conversations, t.ws, t.channel, t.a, t.b);
        t.db.execute_unprepared(
            "UPDATE assistants SET instructions = 'You help {{identity.name}}.'",
        )
        .await
        .expect("instructions");
        let given = async |id| {
            let mut found = parley_persistence::identities::find(&t.db, ws, id)
                .await
                .expect("read")
                .expect("identity");
            found.name = Some("Given".to_owned());
            found
        };

        // Taken as given: the table still says "A".
        let before = conversations.announced();
        conversations
            .turn_of_created(ws, given(a).await, before, says(channel, "hi"))
            .await
            .expect("answered");
        assert_eq!(last_request_texts(&t.model)[0], "You help Given.");

        // An identity change applied in between (of any identity): the identity is read.
        let before = conversations.announced();
        conversations.changed(&Change::Identity {
            workspace_id: ws,
            identity_id: a,
        });
        wait_until("the change was not applied", async || {
            conversations.announced() != before
        })
        .await;
        conversations
            .turn_of_created(ws, given(b).await, before, says(channel, "hi"))
            .await
            .expect("answered");
        assert_eq!(last_request_texts(&t.model)[0], "You help B.");
        t.runtime.shutdown(Duration::from_secs(5)).await;
    }

    #[tokio::test]
    async fn a_created_identitys_first_turn_joins_a_conversation_started_meanwhile() {
        let t = started(|_| {}).await;
        let (conversations, ws, channel, a, b) = (&t.conversations, t.ws, t.channel, t.a, t.b);
        // Unannounced: only a turn that looks in the table finds these conversations.
        let (open_a, open_b) = (
            open_conversation(&t.db, ws, a, channel).await,
            open_conversation(&t.db, ws, b, channel).await,
        );
        let identity = async |id| {
            parley_persistence::identities::find(&t.db, ws, id)
                .await
                .expect("read")
                .expect("identity")
        };

        let before = conversations.announced();
        let first = conversations
            .turn_of_created(ws, identity(a).await, before, says(channel, "hi"))
            .await
            .expect("answered");
        // Nothing was announced in between, so the turn starts a conversation without looking
        // for one; the database has one open already and the start takes it.
        assert_eq!(first.conversation_id, open_a);

        // Messages stored for someone outside their actor in between: they may have started
        // the created identity's conversation, so its first turn looks, and finds it.
        let before = conversations.announced();
        conversations.changed(&Change::Messages {
            workspace_id: ws,
            identity_id: a,
            since: parley_persistence::clock::now(),
        });
        wait_until("the change was not applied", async || {
            conversations.announced() != before
        })
        .await;
        let first = conversations
            .turn_of_created(ws, identity(b).await, before, says(channel, "hi"))
            .await
            .expect("answered");
        assert_eq!(first.conversation_id, open_b);
        t.runtime.shutdown(Duration::from_secs(5)).await;
    }

    async fn open_conversation(
        db: &parley_persistence::DatabaseConnection,
        ws: i64,
        identity_id: Uuid,
        channel_id: Uuid,
    ) -> Uuid {
        let now = parley_persistence::clock::now();
        parley_persistence::conversations::start(db, ws, identity_id, channel_id, None, now)
            .await
            .expect("conversation")
            .conversation()
            .id
    }
}
