//! Waking the delivery actor: once per burst of facts, saying which endpoints were written to
//! (or that some writer did not say, and every endpoint is to be looked at).

use std::collections::HashSet;
use std::sync::atomic::Ordering;

use uuid::Uuid;

use super::Events;
use super::delivery::DeliveryMsg;

/// The endpoints that wake-ups were sent for since the delivery actor last took one.
#[derive(Debug, Default)]
pub(crate) struct Told {
    /// Endpoints with deliveries just written.
    pub(crate) endpoints: HashSet<Uuid>,
    /// Whether some writer did not say which: the actor looks at every endpoint.
    pub(crate) all: bool,
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

    /// Tells the delivery actor that deliveries to `endpoints` were written: their lanes read
    /// again, without a look at every endpoint when they are all running here.
    pub fn wake_for(&self, endpoints: impl IntoIterator<Item = Uuid>) {
        let mut endpoints = endpoints.into_iter().peekable();
        if endpoints.peek().is_none() {
            return;
        }
        if let Ok(mut told) = self.inner.told.lock() {
            told.endpoints.extend(endpoints);
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
                endpoints: HashSet::new(),
                all: true,
            })
    }
}
