//! What actors cache, and how they learn that it changed. Writers describe the change once
//! ([`crate::ActorRuntime::changed`]); the registries work out which live actors hold it, so a
//! writer never needs to know who caches what.
//!
//! | cached by | fact | change |
//! |---|---|---|
//! | a ConversationActor | its identity, stage name, memory | [`Change::Identity`] |
//! | the conversation registry, shared by its actors | the workspace's stage names (instructions, tool text) | [`Change::Stages`] |
//! | the conversation registry, shared by its actors | a channel's route (worker, assistants, MCP servers) | [`Change::Channel`], [`Change::Assistants`] |
//! | every ConversationActor of the workspace | kept history of a channel (its length is the assistant's) | [`Change::Channel`], [`Change::Assistants`] |
//! | a ConversationActor | the recent messages of its conversations | [`Change::Messages`] |
//! | the ChannelActor | its channel row and token | [`Change::Channel`] (restart), [`Change::ChannelDeleted`] (stop) |
//!
//! What a ConversationActor caches stays with the conversation registry while the actor rests;
//! the registry applies each change to it as the actor would (`Context::changed`).

use uuid::Uuid;

/// A change to something live actors may hold in memory.
#[derive(Clone, Debug, PartialEq, Eq)]
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
            | Self::Messages { workspace_id, .. } => *workspace_id,
        }
    }
}
