//! The actor tree's ground floor: the words every actor and registry shares, and nothing that
//! knows any particular actor. Modules above it (channels, conversations, flows, the
//! scheduler, the inbound worker) build on these; `runtime` alone wires them into one tree.
//!
//! - [`SupervisorKind`]: the supervisors under the root, and [`ActorPath`]: where an actor
//!   sits, as the logs spell it.
//! - [`Slot`]: where a supervisor's live handle is published, so that a handle held anywhere
//!   reaches its successor after a restart.
//! - `LiveActors` and `Ending`: a registry's bookkeeping of its children.
//! - [`spawn_behind`]: background work that starts a moment after the request that asked.
//! - [`RuntimeError`]: why an actor could not start or answer.

mod behind;
mod live;
mod path;
mod slot;
mod snapshot;

pub use self::behind::{BEHIND_BY, spawn_behind};
pub(crate) use self::live::{Ending, LiveActors, Published, ending};
pub use self::path::ActorPath;
pub use self::slot::Slot;
pub use self::snapshot::SupervisorSnapshot;

/// The kinds of live work, each under its own supervisor.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SupervisorKind {
    /// One ChannelActor per active channel.
    Channels,
    /// One ConversationActor per live identity.
    Conversations,
    /// The worker that answers stored webhook events, a bounded number at a time.
    Inbound,
    /// One FlowActor per queued, running or paused flow.
    Flows,
    /// One ScheduledTaskActor per task due soon.
    Scheduler,
    /// The worker that delivers event webhooks.
    Events,
    /// The worker that fetches the files people send.
    Media,
}

impl SupervisorKind {
    /// Every kind, in start order: the inbound worker talks to conversations and channels.
    pub const ALL: [Self; 7] = [
        Self::Channels,
        Self::Conversations,
        Self::Inbound,
        Self::Flows,
        Self::Scheduler,
        Self::Events,
        Self::Media,
    ];

    /// The supervisor's name under the root.
    pub fn name(self) -> &'static str {
        match self {
            Self::Channels => "channels",
            Self::Conversations => "conversations",
            Self::Inbound => "inbound",
            Self::Flows => "flows",
            Self::Scheduler => "scheduler",
            Self::Events => "events",
            Self::Media => "media",
        }
    }
}

/// Why the runtime could not start or answer.
#[derive(Clone, Debug, thiserror::Error, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind", content = "detail")]
pub enum RuntimeError {
    /// An actor failed to start.
    #[error("actor failed to start: {0}")]
    Spawn(String),
    /// The supervisor is being restarted after a failure.
    #[error("the {} supervisor is restarting", .0.name())]
    Restarting(SupervisorKind),
    /// An actor did not answer in time or is gone.
    #[error("actor runtime did not answer: {0}")]
    Unavailable(String),
}

impl From<ractor::SpawnErr> for RuntimeError {
    fn from(error: ractor::SpawnErr) -> Self {
        Self::Spawn(error.to_string())
    }
}

impl<T> From<ractor::MessagingErr<T>> for RuntimeError {
    fn from(error: ractor::MessagingErr<T>) -> Self {
        Self::Unavailable(error.to_string())
    }
}
