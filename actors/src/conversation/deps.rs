//! What conversation actors need and how they behave, built once from configuration.

use std::sync::Arc;
use std::time::Duration;

use parley_persistence::{DatabaseConnection, GroupCommit};

use super::registry::LiveConversations;
use super::resting::Announced;
use crate::llm::LlmClient;
use crate::mcp::McpHub;

/// How conversations behave; from configuration.
#[derive(Clone, Debug)]
pub struct ConversationSettings {
    /// After this long without messages the next message starts a new conversation.
    pub idle_after: chrono::Duration,
    /// A conversation actor with no turn for this long rests: it stops and leaves what it
    /// cached about its identity with the registry. At most `actor_idle`.
    pub actor_rest: Duration,
    /// Live conversation actors that may wait the whole `actor_rest`: an actor started while
    /// this many or more are live rests after `busy_rest` instead. A busy server then holds
    /// an actor (about 10 KiB of task and mailboxes) only for the people writing this second,
    /// and a quiet one keeps a few thousand warm.
    pub warm_actors: usize,
    /// The rest of an actor started while `warm_actors` or more are live. At most `actor_rest`.
    pub busy_rest: Duration,
    /// An identity with no turn for this long is forgotten: its cache is dropped, and its next
    /// turn reads it again.
    pub actor_idle: Duration,
    /// Most model calls with tool use in one turn before it must answer in words.
    pub max_tool_rounds: u32,
    /// Longest an API caller waits for a turn.
    pub turn_timeout: Duration,
    /// How often conversations handed to a person are looked at for their automatic return.
    pub handoff_sweep: Duration,
}

impl ConversationSettings {
    /// The rest of an actor starting while `live` others are: the whole rest while fewer than
    /// `warm_actors` are live, the busy rest beyond. At most `warm_actors` actors are ever
    /// waiting the whole rest, since each started below that count.
    pub(crate) fn rest_when(&self, live: usize) -> Duration {
        if live < self.warm_actors {
            self.actor_rest
        } else {
            self.busy_rest.min(self.actor_rest)
        }
    }
}

/// What the conversation actors need.
#[derive(Clone, Debug)]
pub struct ConversationDeps {
    /// Connection pool.
    pub db: DatabaseConnection,
    /// The database's writer: the turn's messages are committed with other writes.
    pub writer: GroupCommit,
    /// The language model.
    pub llm: LlmClient,
    /// The MCP servers' client.
    pub mcp: Arc<McpHub>,
    /// Behaviour settings.
    pub settings: ConversationSettings,
    /// How many changes the conversation registry has applied that a new identity's cache
    /// could miss, kept across its restarts ([`Announced`]).
    pub announced: Arc<Announced>,
    /// The identities' live actors as the registry publishes them, kept across its restarts
    /// ([`LiveConversations`]).
    pub live: LiveConversations,
    /// Events of what turns and handoffs write (a message received, a handoff).
    pub events: crate::events::Events,
    /// Which identities this node owns (all, on a single node): the registry keeps only
    /// theirs, and sweeps look only at theirs.
    pub placement: crate::cluster::Placement,
    /// Rung when a person's message with files is stored, so that they are fetched now.
    pub media: crate::media::MediaBell,
    /// Where the person's files are kept, for the model to see or hear them.
    pub media_store: crate::media::MediaStore,
    /// The workspaces' quotas: a turn past its workspace's token quota calls no model.
    pub quotas: crate::quotas::Quotas,
    /// Model calls in flight per workspace, bounded.
    pub model_slots: crate::llm::ModelSlots,
    /// Where what a turn wrote is announced (the console's open pages hear it).
    pub changes: crate::changes::Announcer,
}

impl ConversationDeps {
    /// Tells the workspace's open console pages that what they show moved.
    pub(crate) fn inbox_moved(&self, workspace_id: i64) {
        self.changes
            .announce(&crate::changes::Change::Inbox { workspace_id });
    }
}
