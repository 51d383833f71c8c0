//! Writes that change what live actors (or the front door) cache, each announcing its own
//! change once it has committed: the one place such a write exists, so that no caller can
//! forget to tell the caches (DESIGN §2, "Caches invalidate by construction").
//!
//! One module per aggregate: [`identities`] (their stages, memory, and the identity writes the
//! front door runs in a transaction of its own), [`stages`], [`channels`], and [`assistants`]
//! (workers, assistants, MCP servers), and [`event_webhooks`] (the endpoints, which the event
//! routes follow). Plain CRUD that no one caches stays a
//! `parley_persistence` call.

pub mod assistants;
pub mod channels;
pub mod event_webhooks;
pub mod identities;
pub mod stages;

use std::sync::Arc;

use parley_persistence::{DatabaseConnection, PersistenceError};

use crate::changes::{Announcer, Change};
use crate::events::Events;
use crate::mcp::McpHub;

/// Why a write did not happen.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// Something the write names does not exist in the workspace (`"Identity"`, `"Stage"`).
    #[error("{0} not found")]
    NotFound(&'static str),
    /// The database refused or failed.
    #[error(transparent)]
    Storage(#[from] PersistenceError),
}

/// Writes and announces; cheap to clone.
#[derive(Clone, Debug)]
pub struct Store {
    db: DatabaseConnection,
    changes: Announcer,
    /// Its cached tool lists are forgotten when a server changes.
    mcp: Arc<McpHub>,
    /// The event routes, read again when an endpoint changes.
    events: Events,
}

impl Store {
    /// A store writing to `db` and announcing to `changes`.
    pub fn new(
        db: DatabaseConnection,
        changes: Announcer,
        mcp: Arc<McpHub>,
        events: Events,
    ) -> Self {
        Self {
            db,
            changes,
            mcp,
            events,
        }
    }

    /// The database it writes to.
    pub fn db(&self) -> &DatabaseConnection {
        &self.db
    }

    /// Announces `change`; the write it follows has committed.
    fn announce(&self, change: Change) {
        self.changes.announce(&change);
    }
}
