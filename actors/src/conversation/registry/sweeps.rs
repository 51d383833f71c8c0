//! The conversations handed to a person and left quiet: each is given back to the assistant in
//! its identity's actor once the person has been quiet for the assistant's
//! `handoff_timeout_minutes`, by the node that owns the identity; and the assignments left
//! unanswered, returned to the queue by the same node.

use std::sync::Arc;

use ractor::ActorRef;

use super::{Finder, RegistryMsg, ask};
use crate::conversation::handoff::{self, ModeChange};
use crate::conversation::{ConversationDeps, ConversationMsg};

/// Gives back every conversation whose person has been quiet too long, each in its identity's
/// actor; a failure is logged and the conversation is looked at again by the next sweep.
pub(super) async fn give_back_quiet(registry: ActorRef<RegistryMsg>, deps: Arc<ConversationDeps>) {
    let due = match handoff::due(&deps.db).await {
        Ok(due) => due,
        Err(error) => {
            tracing::warn!(%error, "the handoff sweep could not read the conversations");
            return;
        }
    };
    let owned = deps
        .placement
        .keep_owned(due, |(_, identity_id, _, _)| *identity_id);
    for (workspace_id, identity_id, channel_id, before) in owned {
        let change = ModeChange::GiveBackIfQuiet { channel_id, before };
        let key = (workspace_id, identity_id);
        let finder = Finder {
            live: &deps.live,
            registry: &registry,
        };
        let asked = ask(finder, key, None, deps.settings.turn_timeout, |reply| {
            ConversationMsg::Mode(change.clone(), reply)
        });
        if let Err(error) = asked.await {
            tracing::warn!(%identity_id, %channel_id, %error, "a conversation's return to the assistant failed");
        }
    }
}

/// Returns to the queue the assignments of this node's identities left unanswered too long;
/// a failure is logged and the next sweep looks again.
pub(super) async fn release_unanswered(deps: &ConversationDeps) {
    let placement = deps.placement.clone();
    let released = crate::assignment::release_unanswered(
        &deps.db,
        &deps.events,
        &deps.changes,
        |identity_id| placement.owns(identity_id),
    )
    .await;
    if let Err(error) = released {
        tracing::warn!(%error, "the assignment sweep could not return conversations to the queue");
    }
}
