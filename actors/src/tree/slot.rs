//! Where a supervisor's live handle is published. The root fills the slot when it starts the
//! supervisor and empties it when the supervisor ends, so a handle built on a slot (the
//! `Channels`, `Conversations`, `Flows`, `Scheduler` and inbound handles) reaches the
//! supervisor's successor after a restart without knowing the root.

use std::sync::{Arc, RwLock};

use ractor::{ActorCell, ActorRef, Message};

use super::{RuntimeError, SupervisorKind};

/// The live supervisor of one kind, or nothing while it restarts; cheap to clone.
pub struct Slot<M: Message> {
    kind: SupervisorKind,
    /// `RwLock` rather than an atomic swap: read on every call, written once per restart.
    live: Arc<RwLock<Option<ActorRef<M>>>>,
}

impl<M: Message> Clone for Slot<M> {
    fn clone(&self) -> Self {
        Self {
            kind: self.kind,
            live: self.live.clone(),
        }
    }
}

impl<M: Message> std::fmt::Debug for Slot<M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Slot").field("kind", &self.kind).finish()
    }
}

impl<M: Message> Slot<M> {
    /// An empty slot for the supervisor of `kind`.
    pub fn new(kind: SupervisorKind) -> Self {
        Self {
            kind,
            live: Arc::new(RwLock::new(None)),
        }
    }

    /// The live supervisor.
    ///
    /// # Errors
    /// [`RuntimeError::Restarting`] while it restarts.
    pub fn get(&self) -> Result<ActorRef<M>, RuntimeError> {
        let guard = self
            .live
            .read()
            .map_err(|_| RuntimeError::Unavailable("a handle lock is poisoned".to_owned()))?;
        guard.clone().ok_or(RuntimeError::Restarting(self.kind))
    }

    /// Publishes `actor` as the live supervisor (or, with `None`, that there is none).
    pub(crate) fn publish(&self, actor: Option<ActorRef<M>>) {
        match self.live.write() {
            Ok(mut guard) => *guard = actor,
            Err(poisoned) => *poisoned.into_inner() = actor,
        }
    }

    /// Publishes the supervisor started in `cell`.
    pub(crate) fn publish_cell(&self, cell: &ActorCell) {
        self.publish(Some(cell.clone().into()));
    }
}
