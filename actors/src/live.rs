//! The bookkeeping both registries (conversations and channels) share: one live actor per key,
//! forgotten when it stops or fails, and retired by draining so that what is already in its
//! mailbox is still handled.

use std::collections::HashMap;
use std::hash::Hash;

use ractor::{ActorCell, ActorId, ActorRef, SupervisionEvent};

/// How a supervised actor ended.
#[derive(Debug)]
pub(crate) enum Ending {
    /// It stopped, with the reason it gave.
    Stopped(Option<String>),
    /// It failed (an error or a panic).
    Failed(String),
}

/// The actor a supervision event says has ended, and how; `None` for any other event.
pub(crate) fn ending(event: SupervisionEvent) -> Option<(ActorCell, Ending)> {
    match event {
        SupervisionEvent::ActorTerminated(cell, _, reason) => Some((cell, Ending::Stopped(reason))),
        SupervisionEvent::ActorFailed(cell, error) => {
            Some((cell, Ending::Failed(error.to_string())))
        }
        SupervisionEvent::ActorStarted(_) | SupervisionEvent::ProcessGroupChanged(_) => None,
    }
}

/// The live actors of a registry, by key.
pub(crate) struct LiveActors<K, M: ractor::Message> {
    /// The live actor of each key.
    live: HashMap<K, ActorRef<M>>,
    /// The key of each actor, to forget it when it ends.
    keys: HashMap<ActorId, K>,
}

impl<K: Copy + Eq + Hash, M: ractor::Message> LiveActors<K, M> {
    /// No actors yet.
    pub(crate) fn new() -> Self {
        Self {
            live: HashMap::new(),
            keys: HashMap::new(),
        }
    }

    /// The live actor of `key`.
    pub(crate) fn get(&self, key: &K) -> Option<&ActorRef<M>> {
        self.live.get(key)
    }

    /// Records `actor` as the live actor of `key`.
    pub(crate) fn insert(&mut self, key: K, actor: ActorRef<M>) {
        self.keys.insert(actor.get_id(), key);
        self.live.insert(key, actor);
    }

    /// How many actors are live.
    pub(crate) fn len(&self) -> usize {
        self.live.len()
    }

    /// Forgets the actor of `key` (if it is `id`, when given) so no new work reaches it, and
    /// lets it finish its mailbox and stop.
    pub(crate) fn retire(&mut self, key: &K, id: Option<ActorId>) {
        let matches = self
            .live
            .get(key)
            .is_some_and(|a| id.is_none_or(|id| a.get_id() == id));
        if matches && let Some(actor) = self.live.remove(key) {
            let _ = actor.drain();
        }
    }

    /// Forgets an actor that ended; answers its key, or `None` when it was not one of ours.
    pub(crate) fn forget(&mut self, cell: &ActorCell) -> Option<K> {
        let key = self.keys.remove(&cell.get_id())?;
        if self
            .live
            .get(&key)
            .is_some_and(|a| a.get_id() == cell.get_id())
        {
            self.live.remove(&key);
        }
        Some(key)
    }
}
