//! The `conversations` supervisor and registry: exactly one ConversationActor per live
//! identity, spawned on demand (virtual-actor style), forgotten when it stops or fails, told
//! about the changes that concern it; and the [`Conversations`] handle the rest of Parley
//! talks through.

use std::sync::Arc;
use std::time::Duration;

use ractor::{
    Actor, ActorId, ActorProcessingErr, ActorRef, MessagingErr, RpcReplyPort, SupervisionEvent,
    call_t, rpc::CallResult,
};
use tracing::Instrument;
use uuid::Uuid;

use super::shared::Shared;
use super::{
    ConversationActor, ConversationArgs, ConversationDeps, ConversationKey, ConversationMsg,
    TurnError, TurnOrigin, TurnOutcome, TurnRequest,
};
use crate::changes::Change;
use crate::runtime::{ActorPath, LiveActors, RuntimeError, SupervisorKind};

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
}

/// Messages of the registry.
pub(crate) enum RegistryMsg {
    /// The identity's actor, spawned when there is none.
    Get(
        ConversationKey,
        RpcReplyPort<Result<ActorRef<ConversationMsg>, RuntimeError>>,
    ),
    /// The identity's actor if it is live.
    #[cfg(test)]
    Lookup(
        ConversationKey,
        RpcReplyPort<Option<ActorRef<ConversationMsg>>>,
    ),
    /// An idle actor asks to stop: forget it first so no new turn reaches it, then let it
    /// finish what is already in its mailbox.
    Passivate(ConversationKey, ActorId),
    /// Something conversation actors may cache changed.
    Changed(Change),
    /// How many actors are live (of one workspace, when given).
    Count(Option<i64>, RpcReplyPort<usize>),
}

impl Actor for ConversationRegistry {
    type Msg = RegistryMsg;
    type State = RegistryState;
    type Arguments = Arc<ConversationDeps>;

    async fn pre_start(
        &self,
        _myself: ActorRef<Self::Msg>,
        deps: Arc<ConversationDeps>,
    ) -> Result<Self::State, ActorProcessingErr> {
        Ok(RegistryState {
            deps,
            shared: Arc::default(),
            live: LiveActors::new(),
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
            RegistryMsg::Get(key, reply) => {
                let _ = reply.send(get(&myself, state, key).await);
            }
            #[cfg(test)]
            RegistryMsg::Lookup(key, reply) => {
                let _ = reply.send(state.live.get(&key).cloned());
            }
            RegistryMsg::Passivate(key, id) => state.live.retire(&key, Some(id)),
            RegistryMsg::Changed(change) => fan_out(state, &change),
            RegistryMsg::Count(workspace, reply) => {
                let live = match workspace {
                    None => state.live.len(),
                    Some(ws) => state.live.iter().filter(|((w, _), _)| *w == ws).count(),
                };
                let _ = reply.send(live);
            }
        }
        Ok(())
    }

    async fn handle_supervisor_evt(
        &self,
        _myself: ActorRef<Self::Msg>,
        event: SupervisionEvent,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        if let Some(((_, identity_id), ending)) = state.live.ended(event) {
            ending.log(
                &ActorPath::conversation(identity_id),
                "the next message for this identity restarts it",
                "passivated",
            );
        }
        Ok(())
    }
}

async fn get(
    myself: &ActorRef<RegistryMsg>,
    state: &mut RegistryState,
    key: ConversationKey,
) -> Result<ActorRef<ConversationMsg>, RuntimeError> {
    if let Some(actor) = state.live.get(&key) {
        return Ok(actor.clone());
    }
    let args = ConversationArgs {
        key,
        deps: state.deps.clone(),
        shared: state.shared.clone(),
        registry: myself.clone(),
    };
    let path = ActorPath::conversation(key.1);
    match Actor::spawn_linked(None, ConversationActor, args, myself.get_cell()).await {
        Ok((actor, _)) => {
            tracing::info!(actor = %path, "actor spawned");
            state.live.insert(key, actor.clone());
            Ok(actor)
        }
        Err(error) => {
            tracing::error!(actor = %path, %error, "actor failed to start");
            Err(error.into())
        }
    }
}

/// Forgets what the change made stale in the shared routes and stages, then tells every live
/// actor the change concerns: the identity's own actor, or every actor of the workspace for a
/// change they all may cache.
fn fan_out(state: &RegistryState, change: &Change) {
    state.shared.forget(change);
    let workspace_id = change.workspace_id();
    let concerned: Vec<&ActorRef<ConversationMsg>> = match change {
        Change::Identity { identity_id, .. } | Change::Messages { identity_id, .. } => state
            .live
            .get(&(workspace_id, *identity_id))
            .into_iter()
            .collect(),
        _ => state
            .live
            .iter()
            .filter(|((ws, _), _)| *ws == workspace_id)
            .map(|(_, actor)| actor)
            .collect(),
    };
    for actor in concerned {
        let _ = actor.send_message(ConversationMsg::Changed(change.clone()));
    }
}

/// The handle on the conversation actors; cheap to clone.
#[derive(Clone, Debug)]
pub struct Conversations {
    registry: ActorRef<RegistryMsg>,
    turn_timeout: Duration,
}

impl Conversations {
    pub(crate) fn new(registry: ActorRef<RegistryMsg>, turn_timeout: Duration) -> Self {
        Self {
            registry,
            turn_timeout,
        }
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
        let key = (workspace_id, identity_id);
        // An actor that passivated between the lookup and the send refuses the message; the
        // second attempt reaches its successor.
        for _ in 0..2 {
            let actor = async { call_t!(self.registry, RegistryMsg::Get, 5_000, key) }
                .instrument(tracing::debug_span!("find_actor"))
                .await
                .map_err(|e| RuntimeError::Unavailable(e.to_string()))??;
            let sent = actor
                .call(
                    |reply| ConversationMsg::Turn(request.clone(), reply),
                    Some(self.turn_timeout),
                )
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

    /// Tells the registry about a change; it passes it to every live actor it concerns.
    pub(crate) fn changed(&self, change: &Change) {
        let _ = self
            .registry
            .send_message(RegistryMsg::Changed(change.clone()));
    }

    /// How many conversation actors are live.
    ///
    /// # Errors
    /// Fails when the registry does not answer.
    pub async fn live(&self) -> Result<usize, RuntimeError> {
        self.live_in(None).await
    }

    /// How many conversation actors are live for `workspace` (all, for `None`).
    ///
    /// # Errors
    /// Fails when the registry does not answer.
    pub async fn live_in(&self, workspace: Option<i64>) -> Result<usize, RuntimeError> {
        call_t!(self.registry, RegistryMsg::Count, 5_000, workspace)
            .map_err(|e| RuntimeError::Unavailable(e.to_string()))
    }

    #[cfg(test)]
    pub(crate) async fn actor_of(&self, key: ConversationKey) -> Option<ActorRef<ConversationMsg>> {
        call_t!(self.registry, RegistryMsg::Lookup, 5_000, key)
            .ok()
            .flatten()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

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
        let (deps, _dir, _model) = runtime_deps().await;
        let (ws, channel, a, b) = world(&deps.conversations.db).await;
        let runtime = ActorRuntime::start(deps).await.expect("runtime");
        let conversations = runtime.conversations().expect("registry");
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
        runtime.shutdown(Duration::from_secs(5)).await;
    }

    #[tokio::test]
    async fn concurrent_first_messages_of_one_identity_spawn_one_actor() {
        let (deps, _dir, _model) = runtime_deps().await;
        let (ws, channel, a, _) = world(&deps.conversations.db).await;
        let runtime = ActorRuntime::start(deps).await.expect("runtime");
        let conversations = runtime.conversations().expect("registry");

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
        runtime.shutdown(Duration::from_secs(5)).await;
    }
}
