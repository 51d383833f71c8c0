//! [`Channels`], the handle the rest of Parley sends through: a channel's actor on this node,
//! or, on a cluster, its owner's (`remote`).

use std::time::Duration;

use ractor::{ActorRef, RpcReplyPort, call_t};
use serde_json::Value;
use uuid::Uuid;

use super::registry::{ChannelRegistryMsg, LookupError};
use super::remote::{self, GraphAnswer, GraphOp, NOT_HERE};
use super::{Accepted, ChannelMsg, SendError, SendRequest};
use crate::changes::{Change, Listener};
use crate::cluster::Ownership;
use crate::tree::{RuntimeError, Slot};
use crate::whatsapp::GraphError;

/// The handle on the channel actors; cheap to clone. On a cluster, a channel another node
/// owns is reached through that node.
#[derive(Clone, Debug)]
pub struct Channels {
    registry: Slot<ChannelRegistryMsg>,
    ownership: Ownership,
}

/// Longest wait for a channel actor's answer (a send includes its waits and retries; the
/// send is recorded by the actor even when the caller stops waiting).
const CALL_TIMEOUT: Duration = Duration::from_secs(120);

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
            return remote::send_at_owner(&self.ownership, channel_id, &request).await;
        }
        match self.send_here(channel_id, request.clone()).await {
            // The partition moved between the check and the send.
            Err(SendError::NotOwner) => {
                remote::send_at_owner(&self.ownership, channel_id, &request).await
            }
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
            let value = remote::graph_at_owner(&self.ownership, channel_id, &op).await?;
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

    /// Runs `op` on this node's actor of the channel, for another node.
    pub async fn graph_here(&self, channel_id: Uuid, op: GraphOp) -> GraphAnswer {
        if !self.ownership.owns(channel_id) {
            return GraphAnswer::Failed {
                message: NOT_HERE.to_owned(),
                not_owner: true,
            };
        }
        let outcome = match op {
            GraphOp::ListTemplates => self.list_templates(channel_id).await.map(Value::from),
            GraphOp::CreateTemplate { body } => self.create_template(channel_id, body).await,
            GraphOp::RegisterWebhook => self.register_webhook(channel_id).await.map(Value::from),
        };
        outcome.into()
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
