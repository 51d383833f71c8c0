//! This node's part of [`super::Conversations`]: the identities' actors it runs, reached through
//! the `conversations` registry. It never asks who owns an identity: the placement decides
//! before it is called, and the registry refuses an identity this node does not own (the
//! partition moved), which the placement then asks of the owner.

use std::sync::Arc;
use std::time::Duration;

use parley_persistence::entities::conversation;
use ractor::call_t;

use super::handoff::ModeChange;
use super::registry::{Finder, LiveConversations, RegistryMsg, ask};
use super::resting::{Announced, AnnouncedSoFar, Created};
use super::{ConversationKey, ConversationMsg, TurnError, TurnOutcome, TurnRequest};
use crate::changes::Change;
use crate::tree::{RuntimeError, Slot};

/// The conversation actors of this node; cheap to clone.
#[derive(Clone, Debug)]
pub(crate) struct LocalConversations {
    registry: Slot<RegistryMsg>,
    /// The live actors the registry publishes, reached without asking it.
    live: LiveConversations,
    /// Longest an API caller waits for a turn (the turn goes on past it).
    turn_timeout: Duration,
    /// Counts of the changes the registry applied ([`Announced`]).
    announced: Arc<Announced>,
}

impl LocalConversations {
    pub(crate) fn new(
        registry: Slot<RegistryMsg>,
        live: LiveConversations,
        turn_timeout: Duration,
        announced: Arc<Announced>,
    ) -> Self {
        Self {
            registry,
            live,
            turn_timeout,
            announced,
        }
    }

    /// Runs a turn in the identity's actor, waiting at most the turn timeout; a turn that
    /// outlives the wait goes on and is stored. `created`: the identity its caller has just
    /// created, which its first actor may start from.
    #[tracing::instrument(name = "ask_turn", level = "debug", skip_all)]
    pub(crate) async fn turn(
        &self,
        key: ConversationKey,
        created: Option<Created>,
        request: TurnRequest,
    ) -> Result<TurnOutcome, TurnError> {
        self.ask(key, created, |reply| {
            ConversationMsg::Turn(request.clone(), reply)
        })
        .await
    }

    /// Changes who answers the identity's conversation on a channel, in its actor.
    pub(crate) async fn change_mode(
        &self,
        key: ConversationKey,
        change: ModeChange,
    ) -> Result<conversation::Model, TurnError> {
        self.ask(key, None, |reply| {
            ConversationMsg::Mode(change.clone(), reply)
        })
        .await
    }

    /// Sends the identity's actor what `make` builds ([`ask`]), published or from the
    /// registry, waiting at most the turn timeout.
    async fn ask<T: Send + 'static>(
        &self,
        key: ConversationKey,
        created: Option<Created>,
        make: impl Fn(ractor::RpcReplyPort<Result<T, TurnError>>) -> ConversationMsg,
    ) -> Result<T, TurnError> {
        let registry = self.registry.get()?;
        let finder = Finder {
            live: &self.live,
            registry: &registry,
        };
        ask(finder, key, created, self.turn_timeout, make).await
    }

    /// The counts of the changes applied so far.
    pub(crate) fn announced(&self) -> AnnouncedSoFar {
        self.announced.so_far()
    }

    /// Tells the registry that the partitions this node owns changed.
    pub(crate) fn rebalance(&self) {
        self.tell(RegistryMsg::Rebalance);
    }

    /// Passes a change to every live actor (and resting cache) it concerns.
    pub(crate) fn changed(&self, change: &Change) {
        self.tell(RegistryMsg::Changed(change.clone()));
    }

    fn tell(&self, message: RegistryMsg) {
        if let Ok(registry) = self.registry.get() {
            let _ = registry.send_message(message);
        }
    }

    /// How many identities of `workspace` (all, for `None`) have a live actor and how many
    /// rest with their cache kept, from one answer of the registry.
    pub(crate) async fn held_in(
        &self,
        workspace: Option<i64>,
    ) -> Result<(usize, usize), RuntimeError> {
        let registry = self.registry.get()?;
        call_t!(registry, RegistryMsg::Held, 5_000, workspace)
            .map_err(|e| RuntimeError::Unavailable(e.to_string()))
    }

    #[cfg(test)]
    pub(crate) async fn actor_of(
        &self,
        key: ConversationKey,
    ) -> Option<ractor::ActorRef<ConversationMsg>> {
        let registry = self.registry.get().ok()?;
        call_t!(registry, RegistryMsg::Lookup, 5_000, key)
            .ok()
            .flatten()
    }

    /// The identity's actor as the registry last published it.
    #[cfg(test)]
    pub(crate) fn published(
        &self,
        key: ConversationKey,
    ) -> Option<ractor::ActorRef<ConversationMsg>> {
        self.live.get(&key)
    }

    #[cfg(test)]
    pub(crate) fn registry(&self) -> &Slot<RegistryMsg> {
        &self.registry
    }
}
