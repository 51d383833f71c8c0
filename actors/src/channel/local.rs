//! This node's part of [`super::Channels`]: the channel actors it runs, reached through the
//! `channels` registry. It never asks who owns a channel: the placement decides before it is
//! called, and the registry refuses a channel this node does not own (the partition moved),
//! which the placement then asks of the owner.

use std::time::Duration;

use ractor::{ActorRef, RpcReplyPort, call_t};
use serde_json::Value;
use uuid::Uuid;

use super::registry::{ChannelRegistryMsg, LookupError};
use super::remote::{GraphOp, NOT_HERE};
use super::{Accepted, ChannelMsg, SendError, SendRequest};
use crate::changes::Change;
use crate::tree::{RuntimeError, Slot};
use crate::whatsapp::GraphError;

/// The channel actors of this node; cheap to clone.
#[derive(Clone, Debug)]
pub(crate) struct LocalChannels {
    registry: Slot<ChannelRegistryMsg>,
}

/// Longest wait for a channel actor's answer to a send (it includes its waits and retries; the
/// send is recorded by the actor even when the caller stops waiting).
const SEND_TIMEOUT: Duration = Duration::from_secs(120);

/// Longest wait for a channel actor's answer to a Graph call.
const GRAPH_TIMEOUT: Duration = Duration::from_secs(60);

impl LocalChannels {
    pub(crate) fn new(registry: Slot<ChannelRegistryMsg>) -> Self {
        Self { registry }
    }

    async fn actor(&self, channel_id: Uuid) -> Result<ActorRef<ChannelMsg>, LookupError> {
        let registry = self.registry.get()?;
        call_t!(registry, ChannelRegistryMsg::Get, 10_000, channel_id)
            .map_err(|e| RuntimeError::Unavailable(e.to_string()))?
    }

    /// Sends through the channel's actor; [`SendError::NotOwner`] when this node does not own
    /// the channel.
    pub(crate) async fn send(
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
            let sent = actor
                .call(
                    |reply| ChannelMsg::Send(request.clone(), reply),
                    Some(SEND_TIMEOUT),
                )
                .await;
            match sent {
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

    /// Runs `op` in the channel's actor; answers its value as JSON.
    pub(crate) async fn graph(&self, channel_id: Uuid, op: GraphOp) -> Result<Value, GraphError> {
        match op {
            GraphOp::ListTemplates => self
                .ask(channel_id, ChannelMsg::ListTemplates)
                .await
                .map(Value::from),
            GraphOp::CreateTemplate { body } => {
                self.ask(channel_id, |reply| ChannelMsg::CreateTemplate(body, reply))
                    .await
            }
            GraphOp::RegisterWebhook => self
                .ask(channel_id, ChannelMsg::RegisterWebhook)
                .await
                .map(Value::from),
        }
    }

    async fn ask<T: Send + 'static>(
        &self,
        channel_id: Uuid,
        message: impl FnOnce(RpcReplyPort<Result<T, GraphError>>) -> ChannelMsg,
    ) -> Result<T, GraphError> {
        let actor = self.actor(channel_id).await.map_err(|e| match e {
            LookupError::NotOwner => GraphError::Connection(NOT_HERE.to_owned()),
            e => GraphError::Connection(e.to_string()),
        })?;
        match actor.call(message, Some(GRAPH_TIMEOUT)).await {
            Ok(ractor::rpc::CallResult::Success(outcome)) => outcome,
            Ok(_) => Err(GraphError::Timeout(
                u64::try_from(GRAPH_TIMEOUT.as_millis()).unwrap_or(u64::MAX),
            )),
            Err(error) => Err(GraphError::Connection(error.to_string())),
        }
    }

    /// Starts the channel's actor now rather than at its first send; nothing when another
    /// node owns the channel (its registry starts it).
    pub(crate) async fn start(&self, channel_id: Uuid) {
        match self.actor(channel_id).await {
            Ok(_) | Err(LookupError::NotOwner) => {}
            Err(error) => tracing::warn!(%channel_id, %error, "channel actor did not start"),
        }
    }

    /// Tells the registry that the partitions this node owns changed.
    pub(crate) fn rebalance(&self) {
        self.tell(ChannelRegistryMsg::Rebalance);
    }

    /// Tells the channel's live actor that a person's message reached its number.
    pub(crate) fn received(&self, channel_id: Uuid) {
        self.tell(ChannelRegistryMsg::Received(channel_id));
    }

    /// Tells the registry that a channel changed or was deleted.
    pub(crate) fn changed(&self, change: &Change) {
        self.tell(ChannelRegistryMsg::Changed(change.clone()));
    }

    fn tell(&self, message: ChannelRegistryMsg) {
        if let Ok(registry) = self.registry.get() {
            let _ = registry.send_message(message);
        }
    }

    /// How many channel actors are live for `workspace` (all, for `None`).
    pub(crate) async fn live_in(&self, workspace: Option<i64>) -> Result<usize, RuntimeError> {
        let registry = self.registry.get()?;
        call_t!(registry, ChannelRegistryMsg::Count, 5_000, workspace)
            .map_err(|e| RuntimeError::Unavailable(e.to_string()))
    }
}
