//! What lets a new identity's first actor start without reading back what its caller has
//! just created: the registry counts the changes it applies ([`Announced`]), and a caller
//! that created an identity hands it over ([`Created`]) with the counts it read before, so the
//! registry takes from it only what no change came in between to contradict.

use std::sync::atomic::{AtomicU64, Ordering};

use parley_persistence::entities::identity;

use super::context::Context;
use crate::changes::Change;

/// How many changes the registry has applied that a cache of an identity it has not seen
/// yet could miss, kept across its restarts ([`super::ConversationDeps::announced`]): a caller that
/// has just created an identity hands it over with the counts it read before, and the
/// registry takes from it only what no change came in between to contradict.
#[derive(Debug, Default)]
pub struct Announced {
    /// Identity changes (an identity, its stage, contacts or memory), of any identity.
    identities: AtomicU64,
    /// Messages stored outside a conversation actor (which may start a conversation), for any
    /// identity.
    messages: AtomicU64,
}

/// The counts of [`Announced`] at one moment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AnnouncedSoFar {
    identities: u64,
    messages: u64,
}

impl Announced {
    pub(super) fn so_far(&self) -> AnnouncedSoFar {
        AnnouncedSoFar {
            identities: self.identities.load(Ordering::Acquire),
            messages: self.messages.load(Ordering::Acquire),
        }
    }

    /// Counts `change`, before it is applied.
    pub(super) fn count(&self, change: &Change) {
        match change {
            Change::Identity { .. } => self.identities.fetch_add(1, Ordering::AcqRel),
            Change::Messages { .. } => self.messages.fetch_add(1, Ordering::AcqRel),
            _ => return,
        };
    }
}

/// An identity its caller has just created, so that its first actor need not read it back.
#[derive(Clone, Debug)]
pub(crate) struct Created {
    pub(super) identity: identity::Model,
    /// [`super::ConversationDeps::announced`] read before the identity was created.
    pub(super) announced_before: AnnouncedSoFar,
}

impl Created {
    /// The cache a new actor may start from: an identity just created has no memory, unless an
    /// identity change (say, to its memory) was applied since the counts were read; and no
    /// conversation, unless messages were stored for someone outside a conversation actor
    /// since (a send may have started one). Other changes (channels, assistants, stages)
    /// concern nothing a fresh context holds.
    pub(super) fn context_if_current(self, announced: &Announced) -> Option<Context> {
        let now = announced.so_far();
        (now.identities == self.announced_before.identities).then(|| {
            let mut context = Context::fresh(self.identity);
            context.conversations_known = now.messages == self.announced_before.messages;
            context
        })
    }
}
