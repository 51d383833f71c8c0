//! [`Conversations`], the handle the rest of Parley talks to identities' actors through, from
//! the API, the console, the inbound worker and the scheduler alike: each turn and each mode
//! change runs on the node that owns the identity, this one's actor ([`LocalConversations`])
//! or its owner's ([`super::remote`]), as the placement picks. A caller never asks where.

use std::sync::Arc;
use std::time::Duration;

use parley_persistence::entities::{conversation, identity};
use uuid::Uuid;

use super::handoff::ModeChange;
use super::local::LocalConversations;
use super::registry::{LiveConversations, RegistryMsg};
use super::remote::{ModeCall, StreamedTurnCall, TurnCall};
use super::resting::{Announced, AnnouncedSoFar, Created};
use super::{ConversationKey, TurnError, TurnOrigin, TurnOutcome, TurnRequest};
use crate::changes::{Change, Listener};
use crate::cluster::Placement;
use crate::tree::{RuntimeError, Slot};

/// The handle on the conversation actors, wherever they run; cheap to clone.
#[derive(Clone, Debug)]
pub struct Conversations {
    local: LocalConversations,
    placement: Placement,
}

impl Conversations {
    pub(crate) fn new(
        registry: Slot<RegistryMsg>,
        live: LiveConversations,
        turn_timeout: Duration,
        announced: Arc<Announced>,
        placement: Placement,
    ) -> Self {
        Self {
            local: LocalConversations::new(registry, live, turn_timeout, announced),
            placement,
        }
    }

    /// This node's part, which the peer route serves other nodes' calls with.
    pub(crate) fn local(&self) -> &LocalConversations {
        &self.local
    }

    /// Tells the registry that the partitions this node owns changed.
    pub fn rebalance(&self) {
        self.local.rebalance();
    }

    /// An id for a new identity met on `channel_id` (a new WhatsApp sender): in the channel's
    /// partition, so that its actor lives wherever the channel's does, now and after every
    /// rebalance, and its turns on that channel are not sent elsewhere.
    pub fn new_identity_id(&self, channel_id: Uuid) -> Uuid {
        self.placement.new_id_beside(channel_id)
    }

    /// Read before creating an identity, then hand it to [`Conversations::turn_of_created`].
    pub fn announced(&self) -> AnnouncedSoFar {
        self.local.announced()
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
            attachments: Vec::new(),
        };
        self.turn(workspace_id, identity_id, request).await
    }

    /// Runs a turn for `identity_id` in its actor, waiting at most the configured turn timeout;
    /// a turn that outlives the wait goes on and is stored. A streaming caller (its origin
    /// carries an events channel) hears the turn's events as they come, wherever it runs.
    ///
    /// # Errors
    /// The turn's own failure, [`TurnError::Timeout`], or [`TurnError::Unavailable`] when the
    /// actor (or the identity's node) cannot be reached or fails during the turn.
    pub async fn turn(
        &self,
        workspace_id: i64,
        identity_id: Uuid,
        request: TurnRequest,
    ) -> Result<TurnOutcome, TurnError> {
        self.run_turn((workspace_id, identity_id), None, request)
            .await
    }

    async fn run_turn(
        &self,
        key: ConversationKey,
        created: Option<Created>,
        request: TurnRequest,
    ) -> Result<TurnOutcome, TurnError> {
        let call = TurnCall::of(key, &request);
        match request.events().cloned() {
            Some(sink) => {
                let call = StreamedTurnCall(call);
                let here = self.local.turn(key, created, request);
                self.placement.stream(&call, &sink, here).await
            }
            None => {
                let here = self.local.turn(key, created, request);
                self.placement.call(&call, here).await
            }
        }
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
        let call = ModeCall {
            workspace_id,
            identity_id,
            change,
        };
        let here = self
            .local
            .change_mode((workspace_id, identity_id), call.change.clone());
        self.placement.call(&call, here).await
    }

    /// Hands the identity's conversation on `channel_id` to a person (starting it when none
    /// is open; a conversation a person has already stays as it is).
    ///
    /// # Errors
    /// As [`Conversations::change_mode`].
    pub async fn hand_over(
        &self,
        workspace_id: i64,
        identity_id: Uuid,
        channel_id: Uuid,
        reason: Option<String>,
    ) -> Result<conversation::Model, TurnError> {
        let change = ModeChange::HandOver { channel_id, reason };
        self.change_mode(workspace_id, identity_id, change).await
    }

    /// Gives the identity's conversation on `channel_id` back to the assistant.
    ///
    /// # Errors
    /// [`TurnError::NoConversation`] when none is open, or as [`Conversations::change_mode`].
    pub async fn give_back(
        &self,
        workspace_id: i64,
        identity_id: Uuid,
        channel_id: Uuid,
    ) -> Result<conversation::Model, TurnError> {
        let change = ModeChange::GiveBack { channel_id };
        self.change_mode(workspace_id, identity_id, change).await
    }

    /// How many conversation actors are live on this node, one finishing its mailbox before it
    /// rests included.
    ///
    /// # Errors
    /// Fails when the registry does not answer.
    pub async fn live(&self) -> Result<usize, RuntimeError> {
        Ok(self.held_in(None).await?.0)
    }

    /// How many identities of `workspace` (all, for `None`) have a live actor on this node, one
    /// finishing its mailbox before it rests included, and how many rest with their cache
    /// kept: both from one answer of the registry, so that an actor resting meanwhile is
    /// counted once.
    ///
    /// # Errors
    /// Fails when the registry does not answer.
    pub async fn held_in(&self, workspace: Option<i64>) -> Result<(usize, usize), RuntimeError> {
        self.local.held_in(workspace).await
    }

    /// How many identities of `workspace` (all, for `None`) rest with their cache kept.
    ///
    /// # Errors
    /// Fails when the registry does not answer.
    pub async fn resting_in(&self, workspace: Option<i64>) -> Result<usize, RuntimeError> {
        Ok(self.held_in(workspace).await?.1)
    }
}

impl Listener for Conversations {
    /// Passes the change to every live actor (and resting cache) it concerns.
    fn changed(&self, change: &Change) {
        // What the console shows concerns no actor's cache (and comes with every message).
        if !matches!(change, Change::Inbox { .. }) {
            self.local.changed(change);
        }
    }
}
