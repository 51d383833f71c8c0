//! The `channels` supervisor and registry: one ChannelActor per channel in use, started at boot
//! for every active channel and on first use, restarted with fresh data when the channel
//! changes, stopped when it is deleted; and the [`Channels`] handle the rest of Parley sends
//! through.

use std::sync::Arc;
use std::time::Duration;

use parley_persistence::channels;
use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort, SupervisionEvent, call_t};
use serde_json::Value;
use uuid::Uuid;

use crate::channel::{Accepted, ChannelActor, ChannelDeps, ChannelMsg, OutboundMessage, SendError};
use crate::live::{Ending, LiveActors, ending};
use crate::whatsapp::GraphError;

/// Behaviour of the `root/channels` supervisor.
pub(crate) struct ChannelRegistry;

/// State of the registry.
pub(crate) struct ChannelRegistryState {
    deps: Arc<ChannelDeps>,
    /// The live actor of each channel.
    live: LiveActors<Uuid, ChannelMsg>,
}

/// Messages of the registry.
pub(crate) enum ChannelRegistryMsg {
    /// The channel's actor, started when there is none; `None` for an unknown channel.
    Get(
        Uuid,
        RpcReplyPort<Result<Option<ActorRef<ChannelMsg>>, String>>,
    ),
    /// The channel changed or was deleted: stop its actor after what it is doing; the next use
    /// starts one with fresh data.
    Retire(Uuid),
}

fn path(id: &Uuid) -> String {
    format!("root/channels/channel:{id}")
}

impl Actor for ChannelRegistry {
    type Msg = ChannelRegistryMsg;
    type State = ChannelRegistryState;
    type Arguments = Arc<ChannelDeps>;

    async fn pre_start(
        &self,
        _myself: ActorRef<Self::Msg>,
        deps: Arc<ChannelDeps>,
    ) -> Result<Self::State, ActorProcessingErr> {
        Ok(ChannelRegistryState {
            deps,
            live: LiveActors::new(),
        })
    }

    async fn post_start(
        &self,
        myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        for channel in channels::all_active(&state.deps.db).await? {
            spawn(&myself, state, channel).await;
        }
        Ok(())
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
            actor = "root/channels",
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
            ChannelRegistryMsg::Get(id, reply) => {
                if let Some(actor) = state.live.get(&id) {
                    let _ = reply.send(Ok(Some(actor.clone())));
                    return Ok(());
                }
                let answer = match channels::find_any(&state.deps.db, id).await {
                    Ok(Some(channel)) => Ok(spawn(&myself, state, channel).await),
                    Ok(None) => Ok(None),
                    Err(error) => Err(error.to_string()),
                };
                let _ = reply.send(answer);
            }
            ChannelRegistryMsg::Retire(id) => state.live.retire(&id, None),
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
        let Some(id) = state.live.forget(&cell) else {
            return Ok(());
        };
        match ending {
            Ending::Failed(error) => {
                tracing::error!(actor = %path(&id), %error, "actor failed; the next use restarts it");
            }
            Ending::Stopped(reason) => tracing::info!(
                actor = %path(&id),
                reason = reason.as_deref().unwrap_or("retired"),
                "actor stopped"
            ),
        }
        Ok(())
    }
}

async fn spawn(
    myself: &ActorRef<ChannelRegistryMsg>,
    state: &mut ChannelRegistryState,
    channel: parley_persistence::entities::channel::Model,
) -> Option<ActorRef<ChannelMsg>> {
    let id = channel.id;
    match Actor::spawn_linked(
        None,
        ChannelActor,
        (channel, state.deps.clone()),
        myself.get_cell(),
    )
    .await
    {
        Ok((actor, _)) => {
            tracing::info!(actor = %path(&id), "actor spawned");
            state.live.insert(id, actor.clone());
            Some(actor)
        }
        Err(error) => {
            tracing::error!(actor = %path(&id), %error, "actor failed to start");
            None
        }
    }
}

/// The handle on the channel actors; cheap to clone.
#[derive(Clone, Debug)]
pub struct Channels {
    registry: ActorRef<ChannelRegistryMsg>,
}

/// Longest wait for a channel actor's answer (a send includes its retries).
const CALL_TIMEOUT: Duration = Duration::from_secs(120);

impl Channels {
    pub(crate) fn new(registry: ActorRef<ChannelRegistryMsg>) -> Self {
        Self { registry }
    }

    async fn actor(&self, channel_id: Uuid) -> Result<ActorRef<ChannelMsg>, String> {
        call_t!(self.registry, ChannelRegistryMsg::Get, 10_000, channel_id)
            .map_err(|e| e.to_string())?
            .and_then(|found| found.ok_or_else(|| "unknown channel".to_owned()))
    }

    /// Sends `message` through the channel.
    ///
    /// # Errors
    /// Why the message was not sent.
    pub async fn send(
        &self,
        channel_id: Uuid,
        message: OutboundMessage,
    ) -> Result<Accepted, SendError> {
        // An actor retired between the lookup and the send refuses the message; the second
        // attempt reaches its successor.
        for _ in 0..2 {
            let actor = self
                .actor(channel_id)
                .await
                .map_err(SendError::Unavailable)?;
            match actor
                .call(
                    |reply| ChannelMsg::Send(message.clone(), reply),
                    Some(CALL_TIMEOUT),
                )
                .await
            {
                Ok(ractor::rpc::CallResult::Success(outcome)) => return outcome,
                Ok(_) => {
                    return Err(SendError::Unavailable(
                        "the channel actor did not answer".to_owned(),
                    ));
                }
                Err(_) => continue,
            }
        }
        Err(SendError::Unavailable(
            "the channel actor kept stopping".to_owned(),
        ))
    }

    /// The channel's templates from Meta.
    ///
    /// # Errors
    /// Meta's error, or why Meta could not be asked.
    pub async fn list_templates(&self, channel_id: Uuid) -> Result<Vec<Value>, GraphError> {
        let actor = self
            .actor(channel_id)
            .await
            .map_err(GraphError::Connection)?;
        call_t!(actor, ChannelMsg::ListTemplates, 60_000)
            .map_err(|e| GraphError::Connection(e.to_string()))?
    }

    /// Submits a template to Meta.
    ///
    /// # Errors
    /// Meta's error, or why Meta could not be asked.
    pub async fn create_template(
        &self,
        channel_id: Uuid,
        body: Value,
    ) -> Result<Value, GraphError> {
        let actor = self
            .actor(channel_id)
            .await
            .map_err(GraphError::Connection)?;
        call_t!(actor, ChannelMsg::CreateTemplate, 60_000, body)
            .map_err(|e| GraphError::Connection(e.to_string()))?
    }

    /// Registers Parley's webhook with Meta when a public URL is configured; `false` when there
    /// was nothing to register.
    ///
    /// # Errors
    /// Meta's error, or why Meta could not be asked.
    pub async fn register_webhook(&self, channel_id: Uuid) -> Result<bool, GraphError> {
        let actor = self
            .actor(channel_id)
            .await
            .map_err(GraphError::Connection)?;
        call_t!(actor, ChannelMsg::RegisterWebhook, 60_000)
            .map_err(|e| GraphError::Connection(e.to_string()))?
    }

    /// Starts the channel's actor now rather than at its first send.
    pub async fn start(&self, channel_id: Uuid) {
        if let Err(error) = self.actor(channel_id).await {
            tracing::warn!(%channel_id, %error, "channel actor did not start");
        }
    }

    /// The channel changed or went away: its actor finishes what it is doing and stops; the next
    /// use starts one with the new data.
    pub fn retire(&self, channel_id: Uuid) {
        let _ = self
            .registry
            .send_message(ChannelRegistryMsg::Retire(channel_id));
    }
}
