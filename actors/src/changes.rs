//! What actors (and the front door) cache, and how they learn that it changed. Writers
//! describe the change once to the [`Announcer`]; each [`Listener`] (the registries, the front
//! door's caches) works out what it holds of it, so a writer never needs to know who caches
//! what.
//!
//! | cached by | fact | change |
//! |---|---|---|
//! | a ConversationActor | its identity, stage name, memory | [`Change::Identity`] |
//! | the conversation registry, shared by its actors | the workspace's stage names (instructions, tool text) | [`Change::Stages`] |
//! | the conversation registry, shared by its actors | a channel's route (worker, assistants, MCP servers) | [`Change::Channel`], [`Change::Assistants`] |
//! | every ConversationActor of the workspace | kept history of a channel (its length is the assistant's) | [`Change::Channel`], [`Change::Assistants`] |
//! | a ConversationActor | the recent messages of its conversations | [`Change::Messages`] |
//! | the ChannelActor | its channel row and token | [`Change::Channel`] (restart), [`Change::ChannelDeleted`] (stop) |
//! | the event routes (`events::Events`) | which endpoints take which events | [`Change::EventRoutes`] |
//! | the front door's known keys | an API key | [`Change::KeyRevoked`] |
//! | the console's open pages (they read again) | what a workspace's console shows | [`Change::Inbox`], [`Change::Messages`] |
//!
//! What a ConversationActor caches stays with the conversation registry while the actor rests;
//! the registry applies each change to it as the actor would (`Context::changed`).

use std::sync::{Arc, RwLock};

use uuid::Uuid;

/// A change to something live actors may hold in memory.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case", tag = "change")]
pub enum Change {
    /// An identity, its stage, contact points or memory changed (or it was deleted or merged).
    Identity {
        /// Its workspace.
        workspace_id: i64,
        /// The identity.
        identity_id: Uuid,
    },
    /// A stage of the workspace was created, renamed or deleted.
    Stages {
        /// The workspace.
        workspace_id: i64,
    },
    /// A channel changed: credentials, activity, settings or its synced worker.
    Channel {
        /// Its workspace.
        workspace_id: i64,
        /// The channel.
        channel_id: Uuid,
    },
    /// A channel was deleted: its actor stops.
    ChannelDeleted {
        /// Its workspace.
        workspace_id: i64,
        /// The channel.
        channel_id: Uuid,
    },
    /// Workers or assistants of the workspace changed, so which assistant answers may differ.
    Assistants {
        /// The workspace.
        workspace_id: i64,
    },
    /// Messages of an identity were stored outside its conversation actor (a send, a flow,
    /// an opt-out), the first of them at `since`.
    Messages {
        /// Its workspace.
        workspace_id: i64,
        /// The identity.
        identity_id: Uuid,
        /// When the first of them was stored.
        since: chrono::DateTime<chrono::Utc>,
    },
    /// An event endpoint of the workspace was created, changed, disabled or deleted: the
    /// routes of the workspace are read again.
    EventRoutes {
        /// The workspace.
        workspace_id: i64,
    },
    /// Something a workspace's console shows moved: a message, its status, how a conversation
    /// is answered or assigned, a note, a session that ended. Nothing caches it: the console's
    /// open pages hear it and read again.
    Inbox {
        /// The workspace.
        workspace_id: i64,
    },
    /// An API key was revoked: whoever remembers it forgets it.
    KeyRevoked {
        /// Its workspace.
        workspace_id: i64,
        /// The key.
        key_id: Uuid,
    },
}

impl Change {
    /// The workspace the change belongs to.
    pub fn workspace_id(&self) -> i64 {
        match self {
            Self::Identity { workspace_id, .. }
            | Self::Stages { workspace_id }
            | Self::Channel { workspace_id, .. }
            | Self::ChannelDeleted { workspace_id, .. }
            | Self::Assistants { workspace_id }
            | Self::EventRoutes { workspace_id }
            | Self::KeyRevoked { workspace_id, .. }
            | Self::Inbox { workspace_id }
            | Self::Messages { workspace_id, .. } => *workspace_id,
        }
    }
}

/// Something that holds facts a [`Change`] may concern: a registry of live actors, or a cache
/// at the front door.
pub trait Listener: Send + Sync {
    /// Forgets or reloads whatever `change` concerns. Called after the write committed; must
    /// not wait (hand work to an actor instead).
    fn changed(&self, change: &Change);
}

/// Where a change goes beyond this node's listeners: a cluster's other nodes (the placement
/// publishes it), or nowhere on a single node.
pub trait Beyond: Send + Sync {
    /// Publishes `change` to the other nodes; must not wait.
    fn publish(&self, change: &Change);
}

/// Nowhere beyond this node.
struct Nowhere;

impl Beyond for Nowhere {
    fn publish(&self, _change: &Change) {}
}

/// Tells every [`Listener`] of a change; cheap to clone. The one place writes announce what
/// they changed, so a writer never needs to know who caches what. On a cluster each change is
/// also published to the other nodes (`pg_notify`), whose listeners hear it the same way.
#[derive(Clone)]
pub struct Announcer {
    /// Written at start-up as listeners join, read for every change.
    listeners: Arc<RwLock<Vec<Arc<dyn Listener>>>>,
    /// Where changes go beyond this node.
    beyond: Arc<dyn Beyond>,
}

impl Default for Announcer {
    /// An announcer of one node, telling no one beyond it.
    fn default() -> Self {
        Self::new(Arc::new(Nowhere))
    }
}

impl std::fmt::Debug for Announcer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Announcer").finish_non_exhaustive()
    }
}

impl Announcer {
    /// An announcer that also publishes every change `beyond` this node.
    pub fn new(beyond: Arc<dyn Beyond>) -> Self {
        Self {
            listeners: Arc::default(),
            beyond,
        }
    }

    /// Adds `listener`; it hears every change announced from now on.
    pub fn listen(&self, listener: Arc<dyn Listener>) {
        match self.listeners.write() {
            Ok(mut listeners) => listeners.push(listener),
            Err(poisoned) => poisoned.into_inner().push(listener),
        }
    }

    /// Tells every listener that `change` happened (and, on a cluster, every other node);
    /// call it once the write has committed.
    pub fn announce(&self, change: &Change) {
        self.tell_here(change);
        self.beyond.publish(change);
    }

    /// Tells this node's listeners of a change made on another node.
    pub fn tell_here(&self, change: &Change) {
        let listeners = match self.listeners.read() {
            Ok(listeners) => listeners.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        };
        for listener in listeners {
            listener.changed(change);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;

    #[derive(Default)]
    struct Heard(Mutex<Vec<Change>>);

    impl Listener for Heard {
        fn changed(&self, change: &Change) {
            if let Ok(mut heard) = self.0.lock() {
                heard.push(change.clone());
            }
        }
    }

    #[test]
    fn every_listener_hears_each_change_once() {
        let announcer = Announcer::default();
        let (first, second) = (Arc::new(Heard::default()), Arc::new(Heard::default()));
        announcer.listen(first.clone());
        announcer.listen(second.clone());
        let change = Change::Stages { workspace_id: 7 };
        announcer.announce(&change);
        for heard in [first, second] {
            assert_eq!(*heard.0.lock().expect("heard"), vec![change.clone()]);
        }
    }
}
