//! The delivery actor's side of a lane: what it sends it and what it knows of it.

use std::sync::Arc;

use parley_persistence::entities::event_webhook;
use ractor::ActorRef;
use tokio::sync::mpsc;

use super::{Lane, LaneMsg};
use crate::egress::Dialer;
use crate::events::delivery::{DeliveryDeps, DeliveryMsg};

/// The delivery actor's handle on a lane; dropping it ends the lane once its recording is done.
pub(in crate::events::delivery) struct LaneHandle {
    tx: mpsc::UnboundedSender<LaneMsg>,
    /// Messages sent: a lane idle after reading as many may end.
    told: u64,
    /// The count of messages after which the lane last said it was idle.
    idle_after: Option<u64>,
    /// The routes' generation when the lane was last given its endpoint as read.
    pub(in crate::events::delivery) generation: u64,
}

impl LaneHandle {
    /// Starts the lane of `endpoint`, reading at once.
    pub(in crate::events::delivery) fn start(
        deps: Arc<DeliveryDeps>,
        dialer: Dialer,
        endpoint: event_webhook::Model,
        actor: ActorRef<DeliveryMsg>,
        generation: u64,
    ) -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        Lane::spawn(deps, dialer, &endpoint, actor, rx);
        Self {
            tx,
            told: 0,
            idle_after: None,
            generation,
        }
    }

    /// Tells the lane `message`.
    pub(in crate::events::delivery) fn tell(&mut self, message: LaneMsg) {
        self.told += 1;
        let _ = self.tx.send(message);
    }

    /// The lane said it was idle after `told` messages.
    pub(in crate::events::delivery) fn said_idle(&mut self, told: u64) {
        self.idle_after = Some(told);
    }

    /// Whether the lane is idle: it said so after the last message it was sent.
    pub(in crate::events::delivery) fn idle(&self) -> bool {
        self.idle_after == Some(self.told)
    }
}
