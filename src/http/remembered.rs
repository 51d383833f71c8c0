//! What the front door remembers for a short while instead of reading it on every request:
//! authenticated keys (`auth.rs`), resolved identity paths (`chat.rs`) and the channels
//! webhooks are addressed to (`webhooks.rs`). Each entry is
//! answered for at most its time to live; writers that change what an entry says forget it
//! (or everything) at once.

use std::collections::HashMap;
use std::fmt::Debug;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, PoisonError, RwLock};
use std::time::{Duration, Instant};

use parley_actors::runtime::spawn_behind;

/// Entries remembered at most; past this the memory starts over.
const MAX_ENTRIES: usize = 10_000;

/// A map of entries that expire `ttl` after they were read from the database.
///
/// An entry in use is read again ahead of its expiry: past half its time to live, the one
/// caller that [`Remembered::get`] answers with `refresh` re-reads it in the background
/// ([`spawn_behind`], a moment after its own request; [`Remembered::recall`] does both) while
/// everyone is answered from memory, so a key or a path used steadily is never waited for,
/// and no answer is older than the time to live. A read that started before a forget or a
/// clear is not remembered ([`Remembered::since`]), so a change is never undone by a read of
/// what it replaced.
#[derive(Clone, Debug)]
pub(crate) struct Remembered<V> {
    ttl: Duration,
    entries: Arc<RwLock<HashMap<String, Entry<V>>>>,
    /// Counts forgets and clears.
    forgotten: Arc<AtomicU64>,
}

#[derive(Debug)]
struct Entry<V> {
    value: V,
    read_at: Instant,
    /// Whether a caller was told to read the entry again.
    refreshing: AtomicBool,
}

/// A remembered entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Recalled<V> {
    /// What was remembered.
    pub(crate) value: V,
    /// Whether this caller should read the entry again (in the background) and remember it.
    pub(crate) refresh: bool,
}

/// When a read from the database began, for [`Remembered::insert`].
#[derive(Clone, Copy, Debug)]
pub(crate) struct Since(u64);

impl<V: Clone + Send + Sync + 'static> Remembered<V> {
    /// The entry of `key`, else what `read` answers, remembered when it is something (an
    /// answer of nothing is not: the next call reads again). An entry past half its time to
    /// live is also read again behind this call, and forgotten if it names nothing any more.
    ///
    /// # Errors
    /// What `read` failed with, when the entry was not remembered. A failed read behind a call
    /// is logged and the entry left to expire: the next call after that reads it and answers
    /// the error.
    pub(crate) async fn recall<E, F, R>(&self, key: &str, read: F) -> Result<Option<V>, E>
    where
        E: Debug,
        F: FnOnce() -> R,
        R: Future<Output = Result<Option<V>, E>> + Send + 'static,
    {
        if let Some(known) = self.get(key) {
            if known.refresh {
                let (remembered, key, again) = (self.clone(), key.to_owned(), read());
                spawn_behind(async move {
                    let since = remembered.since();
                    match again.await {
                        Ok(Some(value)) => remembered.insert(key, value, since),
                        Ok(None) => remembered.remove(&key),
                        Err(error) => {
                            tracing::warn!(?error, "could not read a remembered entry again")
                        }
                    }
                });
            }
            return Ok(Some(known.value));
        }
        let since = self.since();
        let read = read().await?;
        if let Some(value) = &read {
            self.insert(key.to_owned(), value.clone(), since);
        }
        Ok(read)
    }
}

impl<V: Clone> Remembered<V> {
    /// Remembers entries for `ttl`.
    pub(crate) fn new(ttl: Duration) -> Self {
        Self {
            ttl,
            entries: Arc::new(RwLock::new(HashMap::new())),
            forgotten: Arc::new(AtomicU64::new(0)),
        }
    }

    /// The entry of `key`, unless it is older than the time to live.
    pub(crate) fn get(&self, key: &str) -> Option<Recalled<V>> {
        let entries = self.entries.read().unwrap_or_else(PoisonError::into_inner);
        let entry = entries.get(key)?;
        let age = entry.read_at.elapsed();
        if age >= self.ttl {
            return None;
        }
        let refresh = age >= self.ttl / 2 && !entry.refreshing.swap(true, Ordering::Relaxed);
        Some(Recalled {
            value: entry.value.clone(),
            refresh,
        })
    }

    /// Taken before reading what [`Remembered::insert`] will remember.
    pub(crate) fn since(&self) -> Since {
        Since(self.forgotten.load(Ordering::Acquire))
    }

    /// Remembers `value` under `key`, read from the database after `since`; unless something
    /// was forgotten meanwhile, as the read may predate the change that forgot it.
    pub(crate) fn insert(&self, key: String, value: V, since: Since) {
        let mut entries = self.entries.write().unwrap_or_else(PoisonError::into_inner);
        if self.forgotten.load(Ordering::Acquire) != since.0 {
            return;
        }
        if entries.len() >= MAX_ENTRIES {
            let ttl = self.ttl;
            entries.retain(|_, entry| entry.read_at.elapsed() < ttl);
            if entries.len() >= MAX_ENTRIES {
                entries.clear();
            }
        }
        let entry = Entry {
            value,
            read_at: Instant::now(),
            refreshing: AtomicBool::new(false),
        };
        entries.insert(key, entry);
    }

    /// Changes the entry of `key` in place, keeping its age.
    pub(crate) fn update(&self, key: &str, change: impl FnOnce(&mut V)) {
        let mut entries = self.entries.write().unwrap_or_else(PoisonError::into_inner);
        if let Some(entry) = entries.get_mut(key) {
            change(&mut entry.value);
        }
    }

    /// Forgets every entry `forget` picks.
    pub(crate) fn forget(&self, forget: impl Fn(&V) -> bool) {
        let mut entries = self.entries.write().unwrap_or_else(PoisonError::into_inner);
        self.forgotten.fetch_add(1, Ordering::AcqRel);
        entries.retain(|_, entry| !forget(&entry.value));
    }

    /// Forgets the entry of `key` (it names nothing any more).
    pub(crate) fn remove(&self, key: &str) {
        let mut entries = self.entries.write().unwrap_or_else(PoisonError::into_inner);
        self.forgotten.fetch_add(1, Ordering::AcqRel);
        entries.remove(key);
    }

    /// Forgets everything.
    pub(crate) fn clear(&self) {
        let mut entries = self.entries.write().unwrap_or_else(PoisonError::into_inner);
        self.forgotten.fetch_add(1, Ordering::AcqRel);
        entries.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    impl<V> Remembered<V> {
        /// Makes the entry of `key` as old as if it had been read `by` earlier.
        fn age(&self, key: &str, by: Duration) {
            let mut entries = self.entries.write().expect("entries");
            let entry = entries.get_mut(key).expect("an entry");
            entry.read_at = entry
                .read_at
                .checked_sub(by)
                .expect("an instant that long ago");
        }
    }

    fn value<V>(recalled: Option<Recalled<V>>) -> Option<V> {
        recalled.map(|r| r.value)
    }

    #[test]
    fn entries_expire_and_are_forgotten_on_request() {
        let fresh = Remembered::new(Duration::from_secs(60));
        fresh.insert("a".to_owned(), 1, fresh.since());
        fresh.insert("b".to_owned(), 2, fresh.since());
        fresh.insert("c".to_owned(), 3, fresh.since());
        fresh.update("a", |v| *v += 10);
        assert_eq!(value(fresh.get("a")), Some(11));
        fresh.forget(|v| *v == 2);
        assert_eq!(value(fresh.get("b")), None);
        fresh.remove("c");
        assert_eq!(value(fresh.get("c")), None);
        assert_eq!(value(fresh.get("a")), Some(11), "the others stay");
        fresh.clear();
        assert_eq!(value(fresh.get("a")), None);

        fresh.insert("a".to_owned(), 1, fresh.since());
        fresh.age("a", Duration::from_secs(60));
        assert_eq!(value(fresh.get("a")), None, "older than its time to live");
    }

    #[test]
    fn one_caller_refreshes_an_entry_past_half_its_time_to_live() {
        let remembered = Remembered::new(Duration::from_secs(10));
        remembered.insert("a".to_owned(), 1, remembered.since());
        let young = remembered.get("a").expect("remembered");
        assert!(!young.refresh, "a young entry is not read again");

        remembered.age("a", Duration::from_secs(6));
        let first = remembered.get("a").expect("remembered");
        assert_eq!((first.value, first.refresh), (1, true));
        let second = remembered.get("a").expect("remembered");
        assert_eq!(
            (second.value, second.refresh),
            (1, false),
            "one refresh at a time"
        );

        remembered.insert("a".to_owned(), 2, remembered.since());
        let refreshed = remembered.get("a").expect("remembered");
        assert_eq!((refreshed.value, refreshed.refresh), (2, false));
    }

    #[test]
    fn a_read_that_began_before_a_forget_is_not_remembered() {
        let remembered = Remembered::new(Duration::from_secs(10));
        let before_change = remembered.since();
        remembered.forget(|_: &i32| true);
        remembered.insert("a".to_owned(), 1, before_change);
        assert_eq!(value(remembered.get("a")), None);

        let before_clear = remembered.since();
        remembered.clear();
        remembered.insert("a".to_owned(), 1, before_clear);
        assert_eq!(value(remembered.get("a")), None);

        remembered.insert("a".to_owned(), 1, remembered.since());
        assert_eq!(value(remembered.get("a")), Some(1));
    }
}
