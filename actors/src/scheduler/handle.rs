//! [`Scheduler`], the handle the HTTP layer tells about task changes, and the messages the
//! `scheduler` supervisor understands.

use std::collections::HashSet;
use std::sync::Arc;

use ractor::{RpcReplyPort, call_t};
use uuid::Uuid;

use crate::cluster::{News, Placement};
use crate::tree::{RuntimeError, Slot};

/// Messages of the scheduler.
pub(crate) enum SchedulerMsg {
    /// Sweep the table now (and again after `sweep`).
    Sweep,
    /// A task was created, paused, resumed, deleted, or ran: its actor is started or stopped.
    Changed(Uuid),
    /// How many task actors are live (of one workspace, when given).
    Count(Option<i64>, RpcReplyPort<usize>),
    /// The partitions this node owns changed (`gained` were taken over): task actors it no
    /// longer owns stop, runs the last owner of a gained partition left `running` are
    /// settled as after a stop, and the table is swept.
    Rebalance(Arc<HashSet<i32>>),
}

/// The handle on the scheduler; cheap to clone.
#[derive(Clone, Debug)]
pub struct Scheduler {
    registry: Slot<SchedulerMsg>,
    placement: Placement,
}

impl Scheduler {
    pub(crate) fn new(registry: Slot<SchedulerMsg>, placement: Placement) -> Self {
        Self {
            registry,
            placement,
        }
    }

    /// Tells the scheduler that the partitions this node owns changed.
    pub fn rebalance(&self, gained: Arc<HashSet<i32>>) {
        if let Ok(registry) = self.registry.get() {
            let _ = registry.send_message(SchedulerMsg::Rebalance(gained));
        }
    }

    /// A task was created, paused, resumed or deleted (its owner is told, on a cluster).
    pub fn changed(&self, task_id: Uuid) {
        let here = || match self.registry.get() {
            Ok(registry) => {
                let _ = registry.send_message(SchedulerMsg::Changed(task_id));
            }
            // A scheduler starting again sweeps the table at once.
            Err(error) => tracing::warn!(%task_id, %error, "the scheduler was not told"),
        };
        self.placement
            .notify(task_id, here, || News::Task { task_id });
    }

    /// How many task actors are live for `workspace` (all, for `None`).
    ///
    /// # Errors
    /// Fails when the scheduler does not answer.
    pub async fn live_in(&self, workspace: Option<i64>) -> Result<usize, RuntimeError> {
        let registry = self.registry.get()?;
        call_t!(registry, SchedulerMsg::Count, 5_000, workspace)
            .map_err(|e| RuntimeError::Unavailable(e.to_string()))
    }
}
