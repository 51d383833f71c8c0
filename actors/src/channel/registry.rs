//! The `channels` supervisor and registry: one ChannelActor per channel in use, started at boot
//! for every active channel and on first use, restarted with fresh data when the channel
//! changes, stopped when it is deleted or deactivated (and, on a cluster, when this node no
//! longer owns it). The handle the rest of Parley sends through is `handle.rs`.

use std::sync::Arc;

use parley_persistence::channels;
use parley_persistence::entities::channel;
use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort, SupervisionEvent};
use uuid::Uuid;

use super::{ChannelActor, ChannelArgs, ChannelDeps, ChannelMsg};
use crate::changes::Change;
use crate::tree::{ActorPath, LiveActors, RuntimeError, SupervisorKind};

/// Behaviour of the `root/channels` supervisor.
pub(crate) struct ChannelRegistry;

/// State of the registry.
pub(crate) struct ChannelRegistryState {
    deps: Arc<ChannelDeps>,
    /// The live actor of each channel.
    live: LiveActors<Uuid, ChannelMsg>,
}

/// Why a channel's actor could not be had.
#[derive(Clone, Debug, thiserror::Error)]
pub(crate) enum LookupError {
    /// No such channel.
    #[error("unknown channel")]
    Unknown,
    /// It could not be read or started.
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    /// Another node of the cluster owns it.
    #[error("another node owns the channel")]
    NotOwner,
}

/// Messages of the registry.
pub(crate) enum ChannelRegistryMsg {
    /// The channel's actor, started when there is none.
    Get(
        Uuid,
        RpcReplyPort<Result<ActorRef<ChannelMsg>, LookupError>>,
    ),
    /// Something a channel actor caches changed.
    Changed(Change),
    /// How many actors are live (of one workspace, when given).
    Count(Option<i64>, RpcReplyPort<usize>),
    /// The partitions this node owns changed: actors of channels it no longer owns stop,
    /// active channels it now owns start.
    Rebalance,
    /// A person's message reached the channel's number: its live actor counts it (a channel
    /// with none sends nothing, so there is nothing to count it against).
    Received(Uuid),
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
        start_owned(&myself, state).await?;
        Ok(())
    }

    async fn post_stop(
        &self,
        myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        let path = ActorPath::supervisor(SupervisorKind::Channels);
        state.live.stop_all(&myself.get_cell(), &path).await;
        Ok(())
    }

    #[tracing::instrument(name = "channels", skip_all)]
    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        message: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            ChannelRegistryMsg::Get(id, reply) => {
                let _ = reply.send(get(&myself, state, id).await);
            }
            ChannelRegistryMsg::Changed(Change::Channel { channel_id, .. }) => {
                // The old actor finishes what is already in its mailbox; an active channel gets
                // a new actor with the new data at once (on the node that owns it).
                state.live.retire(&channel_id, None);
                match channels::find_in_any_workspace(&state.deps.db, channel_id).await {
                    Ok(Some(channel))
                        if channel.active && state.deps.placement.owns(channel.id) =>
                    {
                        let _ = spawn(&myself, state, channel).await;
                    }
                    Ok(_) => {}
                    Err(error) => {
                        tracing::warn!(%channel_id, %error, "changed channel not reloaded; its next use starts it");
                    }
                }
            }
            ChannelRegistryMsg::Changed(Change::ChannelDeleted { channel_id, .. }) => {
                state.live.retire(&channel_id, None);
            }
            ChannelRegistryMsg::Changed(_) => {}
            ChannelRegistryMsg::Received(channel_id) => {
                if let Some(actor) = state.live.get(&channel_id) {
                    let _ = actor.send_message(ChannelMsg::Received);
                }
            }
            ChannelRegistryMsg::Count(workspace, reply) => {
                let _ = reply.send(state.live.count_in(workspace));
            }
            ChannelRegistryMsg::Rebalance => {
                let placement = state.deps.placement.clone();
                state.live.retire_unless(|id| placement.owns(*id));
                if let Err(error) = start_owned(&myself, state).await {
                    tracing::warn!(%error, "owned channels not started; their next use starts them");
                }
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
        if let Some((id, ending)) = state.live.ended(event) {
            ending.log(
                &ActorPath::channel(id),
                "the next use restarts it",
                "retired",
            );
        }
        Ok(())
    }
}

/// Starts an actor for every active channel this node owns that has none.
async fn start_owned(
    myself: &ActorRef<ChannelRegistryMsg>,
    state: &mut ChannelRegistryState,
) -> Result<(), parley_persistence::PersistenceError> {
    for channel in channels::all_active(&state.deps.db).await? {
        if state.deps.placement.owns(channel.id) && state.live.get(&channel.id).is_none() {
            // A channel that cannot start now is started again on its first use.
            let _ = spawn(myself, state, channel).await;
        }
    }
    Ok(())
}

async fn get(
    myself: &ActorRef<ChannelRegistryMsg>,
    state: &mut ChannelRegistryState,
    id: Uuid,
) -> Result<ActorRef<ChannelMsg>, LookupError> {
    if !state.deps.placement.owns(id) {
        return Err(LookupError::NotOwner);
    }
    if let Some(actor) = state.live.get(&id) {
        return Ok(actor.clone());
    }
    let channel = channels::find_in_any_workspace(&state.deps.db, id)
        .await
        .map_err(|e| RuntimeError::Unavailable(e.to_string()))?
        .ok_or(LookupError::Unknown)?;
    Ok(spawn(myself, state, channel).await?)
}

async fn spawn(
    myself: &ActorRef<ChannelRegistryMsg>,
    state: &mut ChannelRegistryState,
    channel: channel::Model,
) -> Result<ActorRef<ChannelMsg>, RuntimeError> {
    let path = ActorPath::channel(channel.id);
    let id = channel.id;
    let workspace_id = channel.workspace_id;
    let args = ChannelArgs {
        channel,
        deps: state.deps.clone(),
    };
    match Actor::spawn_linked(None, ChannelActor, args, myself.get_cell()).await {
        Ok((actor, _)) => {
            tracing::info!(actor = %path, "actor spawned");
            state.live.insert_in(id, actor.clone(), workspace_id);
            Ok(actor)
        }
        Err(error) => {
            tracing::error!(actor = %path, %error, "actor failed to start");
            Err(error.into())
        }
    }
}
