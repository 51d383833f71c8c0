//! [`Inbound`], the handle the webhook and the sandbox hand people's messages to: each is
//! stored as a webhook event by the node that owns its channel, whose inbound worker then
//! answers it, this one or the owner through the peer route ([`super::remote`]), as the
//! placement picks. A caller never asks where.

use parley_persistence::entities::webhook_event;
use parley_persistence::webhook_events::{self, NewEvent};
use parley_persistence::{GroupCommit, PersistenceError};
use uuid::Uuid;

use super::remote::{StoreCall, StoreError};
use super::worker::InboundWorkerMsg;
use crate::cluster::{News, Placement};
use crate::tree::{RuntimeError, Slot};

/// The handle on the inbound worker; cheap to clone.
#[derive(Clone, Debug)]
pub struct Inbound {
    worker: Slot<InboundWorkerMsg>,
    /// Events are stored through the database's writer, with the other events waiting.
    writer: GroupCommit,
    placement: Placement,
}

impl Inbound {
    pub(crate) fn new(
        worker: Slot<InboundWorkerMsg>,
        writer: GroupCommit,
        placement: Placement,
    ) -> Self {
        Self {
            worker,
            writer,
            placement,
        }
    }

    /// Stores a person's message received for a channel, once, and has it answered: by the
    /// node that owns the channel, whose writer commits it with its other events and whose
    /// worker takes it at once, with nothing to tell and nothing to read back. When that node
    /// does not answer in time ([`StoreCall::WAIT`]) or fails, this one stores it and tells
    /// the owner, so that a webhook is never refused for a peer: should the owner have
    /// stored it after all, the message is known by its WhatsApp id and stored once. Answers
    /// the stored event's id; `None` when the channel already had the message (a
    /// re-delivery).
    ///
    /// # Errors
    /// The database's.
    pub async fn store(&self, event: NewEvent) -> Result<Option<Uuid>, PersistenceError> {
        let call = StoreCall::from(&event);
        let here = self.store_here(event.clone());
        match self.placement.call(&call, here).await {
            Ok(stored) => Ok(stored),
            Err(StoreError::Storage(error)) => Err(error),
            Err(StoreError::Owner(why)) => {
                tracing::warn!(channel_id = %event.channel_id, %why, "event stored by the node that received it");
                let stored = webhook_events::store(&self.writer, event).await?;
                Ok(stored.map(|stored| {
                    let id = stored.id;
                    self.dispatch(stored);
                    id
                }))
            }
        }
    }

    /// This node's part of [`Inbound::store`]: stored through its writer and handed to its
    /// worker.
    pub(crate) async fn store_here(&self, event: NewEvent) -> Result<Option<Uuid>, StoreError> {
        let stored = webhook_events::store(&self.writer, event).await?;
        Ok(stored.map(|stored| {
            let id = stored.id;
            self.hand_over(stored);
            id
        }))
    }

    /// Hands a freshly stored webhook event to the worker, or, on a cluster, tells the node
    /// that owns its channel. Nothing is lost when the worker is busy or restarting (or the
    /// owner is not told): the event is in the database and the worker reads it from there.
    pub fn dispatch(&self, event: webhook_event::Model) {
        let (channel_id, event_id) = (event.channel_id, event.id);
        let news = || News::InboundStored {
            channel_id,
            event_id,
        };
        self.placement
            .notify(channel_id, || self.hand_over(event), news);
    }

    /// Gives a freshly stored event to this node's worker.
    fn hand_over(&self, event: webhook_event::Model) {
        match self.worker.get() {
            Ok(worker) => {
                let _ = worker.send_message(InboundWorkerMsg::Stored(Box::new(event)));
            }
            Err(error) => {
                tracing::warn!(%error, event_id = %event.id, "event left for the inbound worker's next sweep");
            }
        }
    }

    /// Reads the due events of the channels this node owns now; `told`: the event another
    /// node has just stored, news of which brought this on.
    pub fn sweep_now(&self, told: Option<Uuid>) {
        if let Ok(worker) = self.worker.get() {
            let _ = worker.send_message(InboundWorkerMsg::SweepNow(told));
        }
    }

    /// How many events of `workspace` (all, for `None`) are being answered.
    ///
    /// # Errors
    /// Fails when the worker does not answer.
    pub async fn running_in(&self, workspace: Option<i64>) -> Result<usize, RuntimeError> {
        let worker = self.worker.get()?;
        ractor::call_t!(worker, InboundWorkerMsg::Count, 5_000, workspace)
            .map_err(|e| RuntimeError::Unavailable(e.to_string()))
    }
}
