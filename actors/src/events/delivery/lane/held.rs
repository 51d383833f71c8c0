//! What a lane holds (deliveries queued, in flight, or ended and not yet recorded) and what it
//! recorded lately, so that no delivery is posted twice when a read and a hand-over both bring
//! it: a read that began before a recording committed may still find that recording's rows
//! pending, and rows handed over late may be ones a read already brought.

use std::collections::{HashMap, HashSet, VecDeque};

use uuid::Uuid;

/// How many recorded deliveries a lane remembers: far more than are recorded while one read
/// runs or one hand-over is on its way, at any rate a lane keeps (about 180 KiB when full).
const REMEMBERED: usize = 4_096;

/// A lane's deliveries held and recorded lately.
#[derive(Debug, Default)]
pub(super) struct Held {
    /// Queued, in flight, or ended and not recorded: a read leaves them out.
    ids: HashSet<Uuid>,
    recent: Recent,
}

impl Held {
    /// Whether nothing is held.
    pub(super) fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// The ids held, for a read to leave out.
    pub(super) fn ids(&self) -> Vec<Uuid> {
        self.ids.iter().copied().collect()
    }

    /// The number of the last recording: a read notes it when it begins.
    pub(super) fn recordings(&self) -> u64 {
        self.recent.recordings
    }

    /// A delivery handed over at its commit: whether to queue it (held from now on). Not when
    /// held already, nor when recorded lately (a read brought it first).
    pub(super) fn take_handed(&mut self, id: Uuid) -> bool {
        !self.recent.recording.contains_key(&id) && self.ids.insert(id)
    }

    /// A delivery found by a read that began after recording number `recordings`: whether to
    /// queue it. Not when held, nor when recorded since the read began (it may have found it
    /// still pending).
    pub(super) fn take_read(&mut self, id: Uuid, recordings: u64) -> bool {
        let recorded_since = self
            .recent
            .recording
            .get(&id)
            .is_some_and(|at| *at > recordings);
        !recorded_since && self.ids.insert(id)
    }

    /// Lets go of deliveries that were not recorded (dropped from the queue, or their recording
    /// failed): they stay pending, for a read to find again.
    pub(super) fn release(&mut self, ids: impl IntoIterator<Item = Uuid>) {
        for id in ids {
            self.ids.remove(&id);
        }
    }

    /// Lets go of deliveries one more recording recorded, remembering them.
    pub(super) fn recorded(&mut self, ids: &[Uuid]) {
        self.release(ids.iter().copied());
        self.recent.remember(ids);
    }
}

/// Recorded deliveries, each with the number of the recording that recorded it (counted from
/// 1), the oldest forgotten first.
#[derive(Debug, Default)]
struct Recent {
    order: VecDeque<Uuid>,
    recording: HashMap<Uuid, u64>,
    /// Recordings so far.
    recordings: u64,
}

impl Recent {
    fn remember(&mut self, ids: &[Uuid]) {
        self.recordings += 1;
        for id in ids {
            if self.recording.insert(*id, self.recordings).is_none() {
                self.order.push_back(*id);
            }
        }
        while self.order.len() > REMEMBERED {
            if let Some(oldest) = self.order.pop_front() {
                self.recording.remove(&oldest);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_delivery_handed_over_and_read_is_queued_once_while_held() {
        let mut held = Held::default();
        let id = Uuid::now_v7();
        let read_began = held.recordings();
        assert!(held.take_handed(id));
        assert!(!held.take_read(id, read_began), "queued twice while held");
        assert!(!held.take_handed(id));
        assert_eq!(held.ids(), vec![id]);
    }

    #[test]
    fn a_read_that_began_before_a_recording_does_not_bring_its_rows_again() {
        let mut held = Held::default();
        let id = Uuid::now_v7();
        // The read begins; meanwhile the delivery is handed over, posted and recorded.
        let read_began = held.recordings();
        assert!(held.take_handed(id));
        held.recorded(&[id]);
        assert!(held.is_empty());
        // The read's snapshot still had it pending.
        assert!(!held.take_read(id, read_began), "posted twice");
        // A read that began after the recording finds it only if it is due again (a retry
        // on its schedule, or one asked for through the API): it is queued then.
        assert!(held.take_read(id, held.recordings()));
    }

    #[test]
    fn a_late_hand_over_of_what_a_read_brought_is_not_queued() {
        let mut held = Held::default();
        let id = Uuid::now_v7();
        assert!(held.take_read(id, held.recordings()));
        held.recorded(&[id]);
        assert!(!held.take_handed(id), "posted twice");
    }

    #[test]
    fn what_was_not_recorded_is_read_again() {
        let mut held = Held::default();
        let id = Uuid::now_v7();
        let read_began = held.recordings();
        assert!(held.take_handed(id));
        // Dropped from the queue (the lane rested), or its recording failed.
        held.release([id]);
        assert!(held.take_read(id, read_began));
    }

    #[test]
    fn a_retry_recorded_again_counts_from_its_last_recording() {
        let mut held = Held::default();
        let id = Uuid::now_v7();
        assert!(held.take_read(id, held.recordings()));
        held.recorded(&[id]);
        let read_began = held.recordings();
        assert!(held.take_read(id, read_began));
        held.recorded(&[id]);
        assert!(!held.take_read(id, read_began));
        assert_eq!(held.recent.order.len(), 1);
    }

    #[test]
    fn the_oldest_are_forgotten_past_the_bound() {
        let mut held = Held::default();
        let ids: Vec<Uuid> = (0..REMEMBERED + 10).map(|_| Uuid::now_v7()).collect();
        for chunk in ids.chunks(64) {
            for id in chunk {
                assert!(held.take_read(*id, held.recordings()));
            }
            held.recorded(chunk);
        }
        assert_eq!(held.recent.recording.len(), REMEMBERED);
        assert!(held.take_handed(ids[0]) && held.take_handed(ids[9]));
        assert!(!held.take_handed(ids[10]) && !held.take_handed(ids[ids.len() - 1]));
    }
}
