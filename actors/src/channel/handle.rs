//! [`Channels`], the handle the rest of Parley sends through: each call runs on the node that
//! owns the channel, this one's actor ([`LocalChannels`]) or its owner's ([`super::remote`]),
//! as the placement picks.

use serde_json::Value;
use uuid::Uuid;

use super::local::LocalChannels;
use super::registry::ChannelRegistryMsg;
use super::remote::{GraphCall, GraphOp, SendCall};
use super::{Accepted, SendError, SendRequest};
use crate::changes::{Change, Listener};
use crate::cluster::Placement;
use crate::tree::{RuntimeError, Slot};
use crate::whatsapp::GraphError;

/// The handle on the channel actors, wherever they run; cheap to clone.
#[derive(Clone, Debug)]
pub struct Channels {
    local: LocalChannels,
    placement: Placement,
}

impl Channels {
    pub(crate) fn new(registry: Slot<ChannelRegistryMsg>, placement: Placement) -> Self {
        Self {
            local: LocalChannels::new(registry),
            placement,
        }
    }

    /// This node's part, which the peer route serves other nodes' calls with.
    pub(crate) fn local(&self) -> &LocalChannels {
        &self.local
    }

    /// Sends through the channel.
    ///
    /// # Errors
    /// Why the message was not sent.
    pub async fn send(
        &self,
        channel_id: Uuid,
        request: SendRequest,
    ) -> Result<Accepted, SendError> {
        let call = SendCall {
            channel_id,
            request,
        };
        let here = self.local.send(channel_id, call.request.clone());
        self.placement.call(&call, here).await
    }

    async fn graph<T: serde::de::DeserializeOwned>(
        &self,
        channel_id: Uuid,
        op: GraphOp,
    ) -> Result<T, GraphError> {
        let call = GraphCall { channel_id, op };
        let here = self.local.graph(channel_id, call.op.clone());
        let value = self.placement.call(&call, here).await?;
        serde_json::from_value(value).map_err(|e| GraphError::Malformed(e.to_string()))
    }

    /// An id for a new identity first met through `channel_id` (a template sent to a phone
    /// Parley did not know): in the channel's partition, so that on a cluster the person's
    /// replies on that channel are answered where they arrive, as a new sender's are
    /// ([`crate::conversation::Conversations::new_identity_id`]).
    pub fn new_identity_id(&self, channel_id: Uuid) -> Uuid {
        self.placement.new_id_beside(channel_id)
    }

    /// A person's message reached the channel's number: Meta counts it in the number's
    /// throughput, so the channel's sends leave room for it. Counted where the channel runs;
    /// the events of a channel are answered there (`InboundDeps::placement`), so a message
    /// answered elsewhere is not counted.
    pub fn received(&self, channel_id: Uuid) {
        if self.placement.owns(channel_id) {
            self.local.received(channel_id);
        }
    }

    /// The channel's templates from Meta.
    ///
    /// # Errors
    /// Meta's error, or why Meta could not be asked.
    pub async fn list_templates(&self, channel_id: Uuid) -> Result<Vec<Value>, GraphError> {
        self.graph(channel_id, GraphOp::ListTemplates).await
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
        self.graph(channel_id, GraphOp::CreateTemplate { body })
            .await
    }

    /// Registers Parley's webhook with Meta when a public URL is configured; `false` when there
    /// was nothing to register.
    ///
    /// # Errors
    /// Meta's error, or why Meta could not be asked.
    pub async fn register_webhook(&self, channel_id: Uuid) -> Result<bool, GraphError> {
        self.graph(channel_id, GraphOp::RegisterWebhook).await
    }

    /// Starts the channel's actor now rather than at its first send, if it runs here (its
    /// owner's registry starts it within a heartbeat otherwise).
    pub async fn start(&self, channel_id: Uuid) {
        self.local.start(channel_id).await;
    }

    /// Tells the registry that the partitions this node owns changed.
    pub fn rebalance(&self) {
        self.local.rebalance();
    }

    /// How many channel actors are live on this node for `workspace` (all, for `None`).
    ///
    /// # Errors
    /// Fails when the registry does not answer.
    pub async fn live_in(&self, workspace: Option<i64>) -> Result<usize, RuntimeError> {
        self.local.live_in(workspace).await
    }
}

impl Listener for Channels {
    /// A channel changed or was deleted: the registry restarts or stops its actor.
    fn changed(&self, change: &Change) {
        if matches!(
            change,
            Change::Channel { .. } | Change::ChannelDeleted { .. }
        ) {
            self.local.changed(change);
        }
    }
}
