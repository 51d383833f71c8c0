//! The `channels` supervisor and registry: one ChannelActor per channel in use, started at boot
//! for every active channel and on first use, restarted with fresh data when the channel
//! changes, stopped when it is deleted or deactivated; and the [`Channels`] handle the rest of Parley sends
//! through.

use std::sync::Arc;
use std::time::Duration;

use parley_persistence::channels;
use parley_persistence::entities::channel;
use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort, SupervisionEvent, call_t};
use serde_json::Value;
use uuid::Uuid;

use super::remote::GraphOp;
use super::{Accepted, ChannelActor, ChannelArgs, ChannelDeps, ChannelMsg, SendError, SendRequest};
use crate::changes::{Change, Listener};
use crate::cluster::Ownership;
use crate::tree::{ActorPath, LiveActors, RuntimeError, Slot, SupervisorKind};
use crate::whatsapp::GraphError;

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
                        if channel.active && state.deps.ownership.owns(channel.id) =>
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
            ChannelRegistryMsg::Count(workspace, reply) => {
                let _ = reply.send(state.live.count_in(workspace));
            }
            ChannelRegistryMsg::Rebalance => {
                let ownership = state.deps.ownership.clone();
                state.live.retire_unless(|id| ownership.owns(*id));
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
        if state.deps.ownership.owns(channel.id) && state.live.get(&channel.id).is_none() {
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
    if !state.deps.ownership.owns(id) {
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

/// The handle on the channel actors; cheap to clone. On a cluster, a channel another node
/// owns is reached through that node.
#[derive(Clone, Debug)]
pub struct Channels {
    registry: Slot<ChannelRegistryMsg>,
    pub(super) ownership: Ownership,
}

/// Longest wait for a channel actor's answer (a send includes its waits and retries; the
/// send is recorded by the actor even when the caller stops waiting).
const CALL_TIMEOUT: Duration = Duration::from_secs(120);

/// What a Graph call answers on a node that does not own the channel.
pub(super) const NOT_HERE: &str = "this node does not own the channel";

impl Channels {
    pub(crate) fn new(registry: Slot<ChannelRegistryMsg>, ownership: Ownership) -> Self {
        Self {
            registry,
            ownership,
        }
    }

    async fn actor(&self, channel_id: Uuid) -> Result<ActorRef<ChannelMsg>, LookupError> {
        let registry = self.registry.get()?;
        call_t!(registry, ChannelRegistryMsg::Get, 10_000, channel_id)
            .map_err(|e| RuntimeError::Unavailable(e.to_string()))?
    }

    /// Sends through the channel: its actor here, or its owner's on a cluster.
    ///
    /// # Errors
    /// Why the message was not sent.
    pub async fn send(
        &self,
        channel_id: Uuid,
        request: SendRequest,
    ) -> Result<Accepted, SendError> {
        if !self.ownership.owns(channel_id) {
            return self.send_at_owner(channel_id, &request).await;
        }
        match self.send_here(channel_id, request.clone()).await {
            // The partition moved between the check and the send.
            Err(SendError::NotOwner) => self.send_at_owner(channel_id, &request).await,
            outcome => outcome,
        }
    }

    /// Sends through the channel's actor on this node; [`SendError::NotOwner`] when another
    /// node owns it.
    ///
    /// # Errors
    /// Why the message was not sent.
    pub async fn send_here(
        &self,
        channel_id: Uuid,
        request: SendRequest,
    ) -> Result<Accepted, SendError> {
        // An actor retired between the lookup and the send refuses the message; the second
        // attempt reaches its successor.
        for _ in 0..2 {
            let actor = self.actor(channel_id).await.map_err(|error| match error {
                LookupError::Unknown => SendError::UnknownChannel,
                LookupError::NotOwner => SendError::NotOwner,
                LookupError::Runtime(e) => SendError::Unavailable(e.to_string()),
            })?;
            match actor
                .call(
                    |reply| ChannelMsg::Send(request.clone(), reply),
                    Some(CALL_TIMEOUT),
                )
                .await
            {
                Ok(ractor::rpc::CallResult::Success(outcome)) => return outcome,
                Ok(_) => {
                    return Err(SendError::Unavailable(
                        "the channel actor did not answer in time".to_owned(),
                    ));
                }
                Err(_) => continue,
            }
        }
        Err(SendError::Unavailable(
            "the channel actor kept stopping".to_owned(),
        ))
    }

    async fn ask<T: Send + serde::de::DeserializeOwned + 'static>(
        &self,
        channel_id: Uuid,
        op: GraphOp,
        message: impl FnOnce(RpcReplyPort<Result<T, GraphError>>) -> ChannelMsg,
    ) -> Result<T, GraphError> {
        if !self.ownership.owns(channel_id) {
            let value = self.graph_at_owner(channel_id, &op).await?;
            return serde_json::from_value(value).map_err(|e| GraphError::Malformed(e.to_string()));
        }
        let actor = self.actor(channel_id).await.map_err(|e| match e {
            LookupError::NotOwner => GraphError::Connection(NOT_HERE.to_owned()),
            e => GraphError::Connection(e.to_string()),
        })?;
        match actor.call(message, Some(Duration::from_secs(60))).await {
            Ok(ractor::rpc::CallResult::Success(outcome)) => outcome,
            Ok(_) => Err(GraphError::Timeout(60_000)),
            Err(error) => Err(GraphError::Connection(error.to_string())),
        }
    }

    /// The channel's templates from Meta.
    ///
    /// # Errors
    /// Meta's error, or why Meta could not be asked.
    pub async fn list_templates(&self, channel_id: Uuid) -> Result<Vec<Value>, GraphError> {
        self.ask(
            channel_id,
            GraphOp::ListTemplates,
            ChannelMsg::ListTemplates,
        )
        .await
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
        let op = GraphOp::CreateTemplate { body: body.clone() };
        self.ask(channel_id, op, |reply| {
            ChannelMsg::CreateTemplate(body, reply)
        })
        .await
    }

    /// Registers Parley's webhook with Meta when a public URL is configured; `false` when there
    /// was nothing to register.
    ///
    /// # Errors
    /// Meta's error, or why Meta could not be asked.
    pub async fn register_webhook(&self, channel_id: Uuid) -> Result<bool, GraphError> {
        self.ask(
            channel_id,
            GraphOp::RegisterWebhook,
            ChannelMsg::RegisterWebhook,
        )
        .await
    }

    /// Tells the registry that the partitions this node owns changed.
    pub fn rebalance(&self) {
        if let Ok(registry) = self.registry.get() {
            let _ = registry.send_message(ChannelRegistryMsg::Rebalance);
        }
    }

    /// Whether this node owns the channel (the front door forwards template calls of a
    /// channel owned elsewhere).
    pub fn owns(&self, channel_id: Uuid) -> bool {
        self.ownership.owns(channel_id)
    }

    /// Starts the channel's actor now rather than at its first send (on its owner).
    pub async fn start(&self, channel_id: Uuid) {
        if !self.ownership.owns(channel_id) {
            return;
        }
        if let Err(error) = self.actor(channel_id).await {
            tracing::warn!(%channel_id, %error, "channel actor did not start");
        }
    }

    /// How many channel actors are live for `workspace` (all, for `None`).
    ///
    /// # Errors
    /// Fails when the registry does not answer.
    pub async fn live_in(&self, workspace: Option<i64>) -> Result<usize, RuntimeError> {
        let registry = self.registry.get()?;
        call_t!(registry, ChannelRegistryMsg::Count, 5_000, workspace)
            .map_err(|e| RuntimeError::Unavailable(e.to_string()))
    }
}

impl Listener for Channels {
    /// A channel changed or was deleted: the registry restarts or stops its actor.
    fn changed(&self, change: &Change) {
        if !matches!(
            change,
            Change::Channel { .. } | Change::ChannelDeleted { .. }
        ) {
            return;
        }
        if let Ok(registry) = self.registry.get() {
            let _ = registry.send_message(ChannelRegistryMsg::Changed(change.clone()));
        }
    }
}
