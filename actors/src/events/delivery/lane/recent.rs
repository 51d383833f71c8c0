//! The deliveries a lane recorded lately, so that none is posted twice when a read and a
//! hand-over both bring it: a read that began before a recording committed may still find that
//! recording's rows pending, and rows handed over late may be ones a read already brought.

use std::collections::{HashMap, VecDeque};

use uuid::Uuid;

/// How many recorded deliveries a lane remembers: far more than are recorded while one read
/// runs or one hand-over is on its way, at any rate a lane keeps.
const REMEMBERED: usize = 4_096;

/// Recorded deliveries, each with the number of the recording that recorded it (counted from
/// 1), the oldest forgotten first.
#[derive(Debug, Default)]
pub(super) struct Recent {
    order: VecDeque<Uuid>,
    recording: HashMap<Uuid, u64>,
    /// Recordings so far.
    recordings: u64,
}

impl Recent {
    /// The number of the last recording: a read notes it when it begins.
    pub(super) fn recordings(&self) -> u64 {
        self.recordings
    }

    /// Remembers `ids` as recorded by one more recording.
    pub(super) fn remember(&mut self, ids: &[Uuid]) {
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

    /// Whether `id` was recorded lately.
    pub(super) fn contains(&self, id: &Uuid) -> bool {
        self.recording.contains_key(id)
    }

    /// Whether `id` was recorded after recording number `since`: a read that began then may
    /// have found it pending.
    pub(super) fn recorded_after(&self, id: &Uuid, since: u64) -> bool {
        self.recording.get(id).is_some_and(|at| *at > since)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_read_skips_what_was_recorded_after_it_began() {
        let mut recent = Recent::default();
        let (early, late) = (Uuid::now_v7(), Uuid::now_v7());
        recent.remember(&[early]);
        let read_began = recent.recordings();
        recent.remember(&[late]);
        assert!(!recent.recorded_after(&early, read_began));
        assert!(recent.recorded_after(&late, read_began));
        assert!(recent.contains(&early) && recent.contains(&late));
        assert!(!recent.contains(&Uuid::now_v7()));
    }

    #[test]
    fn a_retry_recorded_again_counts_from_its_last_recording() {
        let mut recent = Recent::default();
        let id = Uuid::now_v7();
        recent.remember(&[id]);
        let read_began = recent.recordings();
        assert!(!recent.recorded_after(&id, read_began));
        recent.remember(&[id]);
        assert!(recent.recorded_after(&id, read_began));
        assert_eq!(recent.order.len(), 1);
    }

    #[test]
    fn the_oldest_are_forgotten_past_the_bound() {
        let mut recent = Recent::default();
        let ids: Vec<Uuid> = (0..REMEMBERED + 10).map(|_| Uuid::now_v7()).collect();
        for chunk in ids.chunks(64) {
            recent.remember(chunk);
        }
        assert_eq!(recent.recording.len(), REMEMBERED);
        assert!(!recent.contains(&ids[0]) && !recent.contains(&ids[9]));
        assert!(recent.contains(&ids[10]) && recent.contains(&ids[ids.len() - 1]));
    }
}
