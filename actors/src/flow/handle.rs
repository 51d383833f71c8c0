//! [`Flows`], the handle the HTTP layer, scheduled tasks and the delivery reports talk to the
//! `flows` supervisor through, and the messages it understands.

use parley_persistence::{DatabaseConnection, GroupCommit};
use ractor::{RpcReplyPort, call_t};
use uuid::Uuid;

use crate::cluster::{News, Placement};
use crate::events::Events;
use crate::tree::{RuntimeError, Slot};

/// Messages of the registry.
pub(crate) enum FlowRegistryMsg {
    /// The flow's status changed (created, queued, paused, resumed, cancelled): its actor is
    /// started, told, or stopped.
    Changed(Uuid),
    /// A delivery report moved one of the flow's recipients.
    Reported(Uuid),
    /// How many flow actors are live (of one workspace, when given).
    Count(Option<i64>, RpcReplyPort<usize>),
    /// The partitions this node owns changed: flows it no longer owns stop here, live flows
    /// it now owns start (settling what their last owner left in flight).
    Rebalance,
}

/// The handle on the flow actors; cheap to clone.
#[derive(Clone, Debug)]
pub struct Flows {
    registry: Slot<FlowRegistryMsg>,
    /// Flows are created and read through it.
    db: DatabaseConnection,
    /// Recipients' claims, outcomes and delivery reports are written through it as merged
    /// writes ([`GroupCommit::write_merged`]: a campaign makes several per message, and those
    /// of one kind in a batch run as one statement).
    writer: GroupCommit,
    /// Which flows run here; the owner of the others is told through the database.
    placement: Placement,
    /// A flow's end (a person's cancel) is written with its event.
    events: Events,
}

impl Flows {
    pub(crate) fn new(
        registry: Slot<FlowRegistryMsg>,
        db: DatabaseConnection,
        writer: GroupCommit,
        placement: Placement,
        events: Events,
    ) -> Self {
        Self {
            registry,
            db,
            writer,
            placement,
            events,
        }
    }

    pub(crate) fn db(&self) -> &DatabaseConnection {
        &self.db
    }

    pub(crate) fn writer(&self) -> &GroupCommit {
        &self.writer
    }

    pub(crate) fn events(&self) -> &Events {
        &self.events
    }

    /// Which flows run here; a recipient's claim carries its fence.
    pub(crate) fn placement(&self) -> &Placement {
        &self.placement
    }

    fn tell(&self, message: FlowRegistryMsg) {
        match self.registry.get() {
            Ok(registry) => {
                let _ = registry.send_message(message);
            }
            // The supervisor reads every live flow when it starts again.
            Err(error) => tracing::warn!(%error, "the flows supervisor was not told"),
        }
    }

    /// The flow's status changed in the database: its actor starts, hears it, or stops (on
    /// the node that owns it).
    pub fn changed(&self, flow_id: Uuid) {
        self.placement.notify(
            flow_id,
            || self.tell(FlowRegistryMsg::Changed(flow_id)),
            || News::Flow { flow_id },
        );
    }

    /// A delivery report moved one of the flow's recipients (its owner's actor looks at its
    /// recipients again when told the flow changed).
    pub(crate) fn reported(&self, flow_id: Uuid) {
        self.placement.notify(
            flow_id,
            || self.tell(FlowRegistryMsg::Reported(flow_id)),
            || News::Flow { flow_id },
        );
    }

    /// Tells the registry that the partitions this node owns changed.
    pub fn rebalance(&self) {
        self.tell(FlowRegistryMsg::Rebalance);
    }

    /// How many flow actors are live for `workspace` (all, for `None`).
    ///
    /// # Errors
    /// Fails when the registry does not answer.
    pub async fn live_in(&self, workspace: Option<i64>) -> Result<usize, RuntimeError> {
        let registry = self.registry.get()?;
        call_t!(registry, FlowRegistryMsg::Count, 5_000, workspace)
            .map_err(|e| RuntimeError::Unavailable(e.to_string()))
    }
}
