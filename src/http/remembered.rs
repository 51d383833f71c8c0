//! What the front door remembers for a short while instead of reading it on every request:
//! authenticated keys (`auth.rs`) and resolved identity paths (`chat.rs`). Each entry is
//! answered for at most its time to live; writers that change what an entry says forget it
//! (or everything) at once.

use std::collections::HashMap;
use std::sync::{Arc, PoisonError, RwLock};
use std::time::{Duration, Instant};

/// Entries remembered at most; past this the memory starts over.
const MAX_ENTRIES: usize = 10_000;

/// A map of entries that expire `ttl` after they were read from the database.
#[derive(Clone, Debug)]
pub(crate) struct Remembered<V> {
    ttl: Duration,
    entries: Arc<RwLock<HashMap<String, (V, Instant)>>>,
}

impl<V: Clone> Remembered<V> {
    /// Remembers entries for `ttl`.
    pub(crate) fn new(ttl: Duration) -> Self {
        Self {
            ttl,
            entries: Arc::new(RwLock::new(HashMap::new())),
        }
    }

    /// The entry of `key`, unless it is older than the time to live.
    pub(crate) fn get(&self, key: &str) -> Option<V> {
        let entries = self.entries.read().unwrap_or_else(PoisonError::into_inner);
        entries
            .get(key)
            .filter(|(_, read_at)| read_at.elapsed() < self.ttl)
            .map(|(value, _)| value.clone())
    }

    /// Remembers `value`, just read, under `key`.
    pub(crate) fn insert(&self, key: String, value: V) {
        let mut entries = self.entries.write().unwrap_or_else(PoisonError::into_inner);
        if entries.len() >= MAX_ENTRIES {
            let ttl = self.ttl;
            entries.retain(|_, (_, read_at)| read_at.elapsed() < ttl);
            if entries.len() >= MAX_ENTRIES {
                entries.clear();
            }
        }
        entries.insert(key, (value, Instant::now()));
    }

    /// Changes the entry of `key` in place, keeping its age.
    pub(crate) fn update(&self, key: &str, change: impl FnOnce(&mut V)) {
        let mut entries = self.entries.write().unwrap_or_else(PoisonError::into_inner);
        if let Some((value, _)) = entries.get_mut(key) {
            change(value);
        }
    }

    /// Forgets every entry `forget` picks.
    pub(crate) fn forget(&self, forget: impl Fn(&V) -> bool) {
        let mut entries = self.entries.write().unwrap_or_else(PoisonError::into_inner);
        entries.retain(|_, (value, _)| !forget(value));
    }

    /// Forgets everything.
    pub(crate) fn clear(&self) {
        self.entries
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_expire_and_are_forgotten_on_request() {
        let fresh = Remembered::new(Duration::from_secs(60));
        fresh.insert("a".to_owned(), 1);
        fresh.insert("b".to_owned(), 2);
        fresh.update("a", |v| *v += 10);
        assert_eq!(fresh.get("a"), Some(11));
        fresh.forget(|v| *v == 2);
        assert_eq!(fresh.get("b"), None);
        fresh.clear();
        assert_eq!(fresh.get("a"), None);

        let stale = Remembered::new(Duration::ZERO);
        stale.insert("a".to_owned(), 1);
        assert_eq!(stale.get("a"), None, "older than its time to live");
    }
}
