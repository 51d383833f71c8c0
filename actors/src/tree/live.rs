//! The bookkeeping both registries (conversations and channels) share: one live actor per key,
//! forgotten when it stops or fails, and retired by draining so that what is already in its
//! mailbox is still handled.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Arc;

use dashmap::DashMap;

use ractor::actor::messages::BoxedState;
use ractor::{ActorCell, ActorId, ActorRef, SupervisionEvent};

use super::ActorPath;

/// How a supervised actor ended.
#[derive(Debug)]
pub(crate) enum Ending {
    /// It stopped, with the reason it gave and the state it ended with.
    Stopped(Option<String>, Option<BoxedState>),
    /// It failed (an error or a panic).
    Failed(String),
}

impl Ending {
    /// Logs how the actor at `path` ended: a failure with what happens next (`then`), a stop
    /// with its reason (`usual` when it gave none).
    pub(crate) fn log(&self, path: &ActorPath, then: &str, usual: &str) {
        match self {
            Self::Failed(error) => {
                crate::measure::actor_failed(path.kind());
                tracing::error!(actor = %path, %error, "actor failed; {then}");
            }
            Self::Stopped(reason, _) => tracing::info!(
                actor = %path,
                reason = reason.as_deref().unwrap_or(usual),
                "actor stopped"
            ),
        }
    }

    /// Logs the end of an actor that stops as a matter of course, as an identity's does each
    /// time its person goes quiet (for nearly every message on a busy server): a stop at
    /// debug, so that it does not flood the default log, and a failure as [`Ending::log`] does.
    pub(crate) fn log_routine(&self, path: &ActorPath, then: &str, usual: &str) {
        match self {
            Self::Failed(_) => self.log(path, then, usual),
            Self::Stopped(reason, _) => tracing::debug!(
                actor = %path,
                reason = reason.as_deref().unwrap_or(usual),
                "actor stopped"
            ),
        }
    }
}

impl Ending {
    /// The state the actor stopped with, when it stopped (not failed) and its state is an `S`.
    pub(crate) fn into_state<S: ractor::State>(self) -> Option<S> {
        match self {
            Self::Stopped(_, Some(mut state)) => state.take().ok(),
            Self::Stopped(_, None) | Self::Failed(_) => None,
        }
    }
}

/// How long a registry waits for its actors at shutdown.
const SHUTDOWN_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// The actor a supervision event says has ended, and how; `None` for any other event.
pub(crate) fn ending(event: SupervisionEvent) -> Option<(ActorCell, Ending)> {
    match event {
        SupervisionEvent::ActorTerminated(cell, state, reason) => {
            Some((cell, Ending::Stopped(reason, state)))
        }
        SupervisionEvent::ActorFailed(cell, error) => {
            Some((cell, Ending::Failed(error.to_string())))
        }
        SupervisionEvent::ActorStarted(_) | SupervisionEvent::ProcessGroupChanged(_) => None,
    }
}

/// A registry's live actors as callers outside it read them ([`LiveActors::publishing`]): a
/// caller that finds its key here sends to the actor without a round trip through the
/// registry's mailbox. Only the registry writes it, together with its own table, so it never
/// names an actor the registry has let go; an actor read here just before it was let go
/// refuses the message (it drains), and the caller asks the registry.
pub(crate) type Published<K, M> = Arc<DashMap<K, ActorRef<M>>>;

/// The live actors of a registry, by key.
pub(crate) struct LiveActors<K, M: ractor::Message> {
    /// The live actor of each key.
    live: HashMap<K, ActorRef<M>>,
    /// The key of each actor, to forget it when it ends.
    keys: HashMap<ActorId, K>,
    /// The workspace of each live actor, for workspace-scoped counts.
    workspaces: HashMap<K, i64>,
    /// `live` as published to callers, when the registry publishes it.
    published: Option<Published<K, M>>,
}

impl<K: Copy + Eq + Hash, M: ractor::Message> LiveActors<K, M> {
    /// No actors yet.
    pub(crate) fn new() -> Self {
        Self {
            live: HashMap::new(),
            keys: HashMap::new(),
            workspaces: HashMap::new(),
            published: None,
        }
    }

    /// No actors yet, each one published in `published` while it is live (what a registry
    /// before this one published there is forgotten).
    pub(crate) fn publishing(published: Published<K, M>) -> Self {
        published.clear();
        Self {
            published: Some(published),
            ..Self::new()
        }
    }

    /// Withdraws the actor of `key` from what is published.
    fn unpublish(&self, key: &K) {
        if let Some(published) = &self.published {
            published.remove(key);
        }
    }

    /// The live actor of `key`.
    pub(crate) fn get(&self, key: &K) -> Option<&ActorRef<M>> {
        self.live.get(key)
    }

    /// Records `actor` as the live actor of `key`.
    pub(crate) fn insert(&mut self, key: K, actor: ActorRef<M>) {
        self.keys.insert(actor.get_id(), key);
        if let Some(published) = &self.published {
            published.insert(key, actor.clone());
        }
        self.live.insert(key, actor);
    }

    /// Records `actor` as the live actor of `key`, which belongs to `workspace`.
    pub(crate) fn insert_in(&mut self, key: K, actor: ActorRef<M>, workspace: i64) {
        self.workspaces.insert(key, workspace);
        self.insert(key, actor);
    }

    /// How many actors are live in `workspace` (all, for `None`).
    pub(crate) fn count_in(&self, workspace: Option<i64>) -> usize {
        match workspace {
            None => self.live.len(),
            Some(ws) => self
                .live
                .keys()
                .filter(|key| self.workspaces.get(*key) == Some(&ws))
                .count(),
        }
    }

    /// Every live actor with its key.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&K, &ActorRef<M>)> {
        self.live.iter()
    }

    /// How many actors are live.
    pub(crate) fn len(&self) -> usize {
        self.live.len()
    }

    /// Forgets the actor of `key` (if it is `id`, when given) so no new work reaches it, and
    /// lets it finish its mailbox and stop; answers whether it was live.
    pub(crate) fn retire(&mut self, key: &K, id: Option<ActorId>) -> bool {
        let matches = self
            .live
            .get(key)
            .is_some_and(|a| id.is_none_or(|id| a.get_id() == id));
        if matches && let Some(actor) = self.live.remove(key) {
            self.workspaces.remove(key);
            self.unpublish(key);
            let _ = actor.drain();
            return true;
        }
        false
    }

    /// Retires every actor whose key `keep` refuses (a cluster node's partitions moved);
    /// answers how many.
    pub(crate) fn retire_unless(&mut self, keep: impl Fn(&K) -> bool) -> usize {
        let gone: Vec<K> = self.live.keys().filter(|k| !keep(k)).copied().collect();
        gone.iter().filter(|key| self.retire(key, None)).count()
    }

    /// Forgets the actor a supervision event says has ended and answers its key and how it
    /// ended; `None` for any other event or an actor that was not one of ours.
    pub(crate) fn ended(&mut self, event: SupervisionEvent) -> Option<(K, Ending)> {
        let (cell, ending) = ending(event)?;
        self.forget(&cell).map(|key| (key, ending))
    }

    /// Stops every live actor of a registry at shutdown (waiting a while for each to finish
    /// its mailbox) and logs the registry's own stop.
    pub(crate) async fn stop_all(&self, registry: &ActorCell, path: &ActorPath) {
        if let Some(published) = &self.published {
            published.clear();
        }
        registry
            .stop_children_and_wait(Some("shutdown".to_owned()), Some(SHUTDOWN_WAIT))
            .await;
        tracing::info!(actor = %path, live = self.len(), "actor stopped");
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
            self.workspaces.remove(&key);
            self.unpublish(&key);
        }
        Some(key)
    }
}
