//! The `conversations` supervisor and registry: exactly one ConversationActor per live
//! identity, spawned on demand (virtual-actor style), forgotten when it stops or fails, and the
//! [`Conversations`] handle the HTTP layer talks through.

use std::sync::Arc;
use std::time::Duration;

use ractor::{
    Actor, ActorId, ActorProcessingErr, ActorRef, MessagingErr, RpcReplyPort, SupervisionEvent,
    call_t, rpc::CallResult,
};
use uuid::Uuid;

use crate::conversation::{
    ConversationActor, ConversationArgs, ConversationKey, ConversationMsg, Deps, TurnError,
    TurnOutcome, TurnRequest,
};
use crate::live::{Ending, LiveActors, ending};

/// Behaviour of the `root/conversations` supervisor.
pub(crate) struct ConversationRegistry;

/// State of the registry.
pub(crate) struct RegistryState {
    /// Shared with every conversation actor.
    deps: Arc<Deps>,
    /// The live actor of each identity.
    live: LiveActors<ConversationKey, ConversationMsg>,
}

/// Messages of the registry.
pub(crate) enum RegistryMsg {
    /// The identity's actor, spawned when there is none.
    Get(
        ConversationKey,
        RpcReplyPort<Result<ActorRef<ConversationMsg>, String>>,
    ),
    /// The identity's actor if it is live.
    Lookup(
        ConversationKey,
        RpcReplyPort<Option<ActorRef<ConversationMsg>>>,
    ),
    /// An idle actor asks to stop: forget it first so no new turn reaches it, then let it
    /// finish what is already in its mailbox.
    Passivate(ConversationKey, ActorId),
    /// How many actors are live.
    Count(RpcReplyPort<usize>),
}

fn path(key: &ConversationKey) -> String {
    format!("root/conversations/identity:{}", key.1)
}

impl Actor for ConversationRegistry {
    type Msg = RegistryMsg;
    type State = RegistryState;
    type Arguments = Arc<Deps>;

    async fn pre_start(
        &self,
        _myself: ActorRef<Self::Msg>,
        deps: Arc<Deps>,
    ) -> Result<Self::State, ActorProcessingErr> {
        Ok(RegistryState {
            deps,
            live: LiveActors::new(),
        })
    }

    async fn post_stop(
        &self,
        myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        myself
            .stop_children_and_wait(Some("shutdown".to_owned()), Some(Duration::from_secs(10)))
            .await;
        tracing::info!(
            actor = "root/conversations",
            live = state.live.len(),
            "actor stopped"
        );
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
                if let Some(actor) = state.live.get(&key) {
                    let _ = reply.send(Ok(actor.clone()));
                    return Ok(());
                }
                let args = ConversationArgs {
                    key,
                    deps: state.deps.clone(),
                    registry: myself.clone(),
                };
                match Actor::spawn_linked(None, ConversationActor, args, myself.get_cell()).await {
                    Ok((actor, _)) => {
                        tracing::info!(actor = %path(&key), "actor spawned");
                        state.live.insert(key, actor.clone());
                        let _ = reply.send(Ok(actor));
                    }
                    Err(error) => {
                        tracing::error!(actor = %path(&key), %error, "actor failed to start");
                        let _ = reply.send(Err(error.to_string()));
                    }
                }
            }
            RegistryMsg::Lookup(key, reply) => {
                let _ = reply.send(state.live.get(&key).cloned());
            }
            RegistryMsg::Passivate(key, id) => state.live.retire(&key, Some(id)),
            RegistryMsg::Count(reply) => {
                let _ = reply.send(state.live.len());
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
        let Some((cell, ending)) = ending(event) else {
            return Ok(());
        };
        let Some(key) = state.live.forget(&cell) else {
            return Ok(());
        };
        match ending {
            Ending::Failed(error) => tracing::error!(
                actor = %path(&key),
                %error,
                "actor failed; the next message for this identity restarts it"
            ),
            Ending::Stopped(reason) => tracing::info!(
                actor = %path(&key),
                reason = reason.as_deref().unwrap_or("passivated"),
                "actor stopped"
            ),
        }
        Ok(())
    }
}

/// The HTTP layer's handle on the conversation actors; cheap to clone.
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
            let actor = call_t!(self.registry, RegistryMsg::Get, 5_000, key)
                .map_err(|e| TurnError::Unavailable(e.to_string()))?
                .map_err(TurnError::Unavailable)?;
            let sent = actor
                .call(
                    |reply| ConversationMsg::Turn(request.clone(), reply),
                    Some(self.turn_timeout),
                )
                .await;
            match sent {
                Ok(CallResult::Success(outcome)) => return outcome,
                Ok(CallResult::Timeout) => return Err(TurnError::Timeout),
                Ok(CallResult::SenderError) => {
                    return Err(TurnError::Unavailable(
                        "the conversation actor stopped during the turn".to_owned(),
                    ));
                }
                Err(MessagingErr::SendErr(_) | MessagingErr::ChannelClosed) => continue,
                Err(error) => return Err(TurnError::Unavailable(error.to_string())),
            }
        }
        Err(TurnError::Unavailable(
            "the conversation actor kept stopping".to_owned(),
        ))
    }

    /// Tells the identity's live actor, if any, to reload its cached identity, stage and memory.
    pub async fn invalidate(&self, workspace_id: i64, identity_id: Uuid) {
        if let Ok(Some(actor)) = call_t!(
            self.registry,
            RegistryMsg::Lookup,
            5_000,
            (workspace_id, identity_id)
        ) {
            let _ = actor.send_message(ConversationMsg::Reload);
        }
    }

    /// How many conversation actors are live.
    ///
    /// # Errors
    /// Fails when the registry does not answer.
    pub async fn live(&self) -> Result<usize, TurnError> {
        call_t!(self.registry, RegistryMsg::Count, 5_000)
            .map_err(|e| TurnError::Unavailable(e.to_string()))
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
    use crate::test_support::{channel_deps, deps, world};

    fn says(channel_id: Uuid, text: &str) -> TurnRequest {
        TurnRequest {
            channel_id,
            text: text.to_owned(),
            stream: None,
            platform_message_id: None,
        }
    }

    #[tokio::test]
    async fn a_crashed_conversation_actor_is_replaced_and_other_identities_are_untouched() {
        let (deps, _dir, _model) = deps().await;
        let (ws, channel, a, b) = world(&deps.db).await;
        let channels = channel_deps(&deps);
        let runtime = ActorRuntime::start(deps, channels).await.expect("runtime");
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
        let (deps, _dir, _model) = deps().await;
        let (ws, channel, a, _) = world(&deps.db).await;
        let channels = channel_deps(&deps);
        let runtime = ActorRuntime::start(deps, channels).await.expect("runtime");
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
