//! Waking the delivery actor: once per burst of facts, handing it the deliveries just
//! committed (so that a lane queues them without reading them back), or saying which endpoints
//! were written to, or that some writer did not say, and every endpoint is to be looked at.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::Ordering;

use parley_persistence::clock;
use parley_persistence::entities::event_delivery;
use parley_persistence::event_deliveries::Addressed;
use uuid::Uuid;

use super::Events;
use super::delivery::DeliveryMsg;

/// Most deliveries held for the delivery actor between two of its wake-ups; past them, the
/// lanes read the rest from the table (a stalled actor holds no more than these).
const MOST_HANDED: usize = 4_096;

/// What the wake-ups on their way are for, since the delivery actor last took one.
#[derive(Debug, Default)]
pub(crate) struct Told {
    /// Deliveries committed, by endpoint, as they were written.
    pub(crate) fresh: HashMap<Uuid, Vec<event_delivery::Model>>,
    /// Endpoints with deliveries written and not handed over (past [`MOST_HANDED`]).
    pub(crate) endpoints: HashSet<Uuid>,
    /// Whether some writer did not say which: the actor looks at every endpoint.
    pub(crate) all: bool,
    /// How many deliveries `fresh` holds.
    rows: usize,
}

/// Deliveries about to be written with a fact, to be handed to the delivery actor once it
/// committed ([`Events::committed`]).
#[derive(Debug)]
#[must_use = "hand it over once the write committed"]
pub struct Handover {
    rows: Vec<event_delivery::Model>,
}

impl Handover {
    /// The deliveries of `addressed`, as they will be committed.
    pub fn of<'a>(addressed: impl IntoIterator<Item = &'a Addressed>) -> Self {
        let now = clock::now();
        Self {
            rows: addressed
                .into_iter()
                .flat_map(|a| a.committed(now))
                .collect(),
        }
    }
}

impl Events {
    /// Tells the delivery actor that events were written (once per burst), for any endpoint:
    /// it looks at every endpoint's due deliveries.
    pub fn wake(&self) {
        if let Ok(mut told) = self.inner.told.lock() {
            told.all = true;
        }
        self.send_wake();
    }

    /// Hands the delivery actor the deliveries of `handover`, which just committed: their
    /// endpoints' lanes queue them (or read them later, when their queues are full).
    pub fn committed(&self, handover: Handover) {
        let Handover { rows } = handover;
        if rows.is_empty() {
            return;
        }
        if let Ok(mut told) = self.inner.told.lock() {
            if told.rows + rows.len() > MOST_HANDED {
                told.endpoints
                    .extend(rows.iter().map(|row| row.endpoint_id));
            } else {
                told.rows += rows.len();
                for row in rows {
                    told.fresh.entry(row.endpoint_id).or_default().push(row);
                }
            }
        }
        self.send_wake();
    }

    fn send_wake(&self) {
        if self.inner.waking.swap(true, Ordering::AcqRel) {
            return;
        }
        match self.inner.slot.get() {
            Ok(actor) => {
                let _ = actor.send_message(DeliveryMsg::Wake);
            }
            // Not running (starting or restarting): its first sweep finds them.
            Err(_) => self.inner.waking.store(false, Ordering::Release),
        }
    }

    /// The delivery actor took the wake-up: the next burst sends another. Answers what the
    /// wake-ups were for.
    pub(crate) fn woken(&self) -> Told {
        self.inner.waking.store(false, Ordering::Release);
        self.inner
            .told
            .lock()
            .map(|mut told| std::mem::take(&mut *told))
            .unwrap_or(Told {
                all: true,
                ..Told::default()
            })
    }
}
