//! What is read from the database once and remembered for a while instead of on every use: the
//! front door's authenticated keys, identity paths and webhook channels (`src/http`), the
//! conversation actors' shared routes and stages ([`crate::conversation`]) and the workspaces'
//! quotas (`quotas.rs`). One type does it for all of them, so they expire, refresh and forget
//! alike.

use std::borrow::Borrow;
use std::collections::HashMap;
use std::hash::Hash;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, PoisonError, RwLock};
use std::time::{Duration, Instant};

use tokio::sync::OnceCell;

use crate::tree::spawn_behind;

/// Entries remembered at most; past this the expired ones go, and if that is not enough,
/// everything.
const MAX_ENTRIES: usize = 10_000;

/// Values by key, each read by whoever asks first and answered for at most `ttl` after.
///
/// - **One read per key.** Callers that ask while the value is being read wait for that read
///   instead of making their own. A read that answers nothing (no such key) or fails is not
///   remembered: the next caller reads again.
/// - **Read again ahead of expiry.** Past half its time to live, the first caller starts a
///   read in the background ([`spawn_behind`]: a moment after, so it does not compete with that
///   caller's request) and everyone goes on with the value held until the read replaces it. A
///   value used steadily is never waited for, and no answer is older than the time to live. A
///   background read that answers nothing forgets the value; one that fails leaves it to
///   expire.
/// - **Forgetting wins.** A read under way when its entry is forgotten (or changed in place)
///   is not remembered, so a change is never undone by a read of what it replaced; the callers
///   waiting on it are answered what it read, as callers that came just before the change
///   would have been.
#[derive(Debug)]
pub struct Remembered<K, V> {
    slots: Arc<RwLock<HashMap<K, Slot<V>>>>,
    ttl: Duration,
}

impl<K, V> Clone for Remembered<K, V> {
    fn clone(&self) -> Self {
        Self {
            slots: self.slots.clone(),
            ttl: self.ttl,
        }
    }
}

/// A key's place: empty while its first read is under way. Replaced, never refilled: a read
/// fills only the slot it was started for, and keeps its value only while that slot is still
/// the key's.
type Slot<V> = Arc<OnceCell<Entry<V>>>;

/// A value and when it was read.
#[derive(Debug)]
struct Entry<V> {
    value: V,
    read_at: Instant,
    /// Whether a caller started a read to replace it.
    refreshing: AtomicBool,
}

impl<V> Entry<V> {
    fn read_now(value: V) -> Self {
        Self::read_at(value, Instant::now())
    }

    fn read_at(value: V, read_at: Instant) -> Self {
        Self {
            value,
            read_at,
            refreshing: AtomicBool::new(false),
        }
    }
}

/// Why a first read left its slot empty.
enum Unread<E> {
    Nothing,
    Failed(E),
}

impl<K, V> Remembered<K, V>
where
    K: Eq + Hash + Clone + Send + Sync + 'static,
    V: Clone + Send + Sync + 'static,
{
    /// Remembers values for `ttl`.
    pub fn new(ttl: Duration) -> Self {
        Self {
            slots: Arc::default(),
            ttl,
        }
    }

    /// The value of `key`: remembered, else what `read` answers (remembered when it is
    /// something). `read` makes the read's future; it is called at most once, for a first read
    /// or for a read in the background, and the future must own what it needs.
    ///
    /// # Errors
    /// What `read` failed with, when the value was not remembered. A failed read in the
    /// background is logged and the value left to expire: the next call after that reads it
    /// and answers the error.
    pub async fn recall<Q, E, F, R>(&self, key: &Q, read: F) -> Result<Option<V>, E>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
        E: std::fmt::Display + 'static,
        F: FnOnce() -> R,
        R: Future<Output = Result<Option<V>, E>> + Send + 'static,
    {
        if let Some((value, refresh)) = self.fresh(key) {
            if let Some(held) = refresh {
                spawn_behind(self.clone().refresh(key.to_owned(), held, read()));
            }
            return Ok(Some(value));
        }
        let slot = self.slot(key);
        let first = slot
            .get_or_try_init(|| async {
                match read().await {
                    Ok(Some(value)) => Ok(Entry::read_now(value)),
                    Ok(None) => Err(Unread::Nothing),
                    Err(error) => Err(Unread::Failed(error)),
                }
            })
            .await;
        match first {
            Ok(entry) => Ok(Some(entry.value.clone())),
            Err(unread) => {
                self.drop_empty(key, &slot);
                match unread {
                    Unread::Nothing => Ok(None),
                    Unread::Failed(error) => Err(error),
                }
            }
        }
    }

    /// The value of `key` if it is younger than the time to live, and the slot to refresh when
    /// this caller is the one to read it again.
    fn fresh<Q>(&self, key: &Q) -> Option<(V, Option<Slot<V>>)>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let slots = self.slots.read().unwrap_or_else(PoisonError::into_inner);
        let slot = slots.get(key)?;
        let entry = slot.get()?;
        let age = entry.read_at.elapsed();
        if age >= self.ttl {
            return None;
        }
        let refresh = age >= self.ttl / 2 && !entry.refreshing.swap(true, Ordering::Relaxed);
        Some((entry.value.clone(), refresh.then(|| slot.clone())))
    }

    /// The slot of `key` to read into or wait on: the one under way, else a new one in place
    /// of an expired one or of none.
    fn slot<Q>(&self, key: &Q) -> Slot<V>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        let mut slots = self.slots.write().unwrap_or_else(PoisonError::into_inner);
        if let Some(slot) = slots.get_mut(key) {
            if slot
                .get()
                .is_some_and(|entry| entry.read_at.elapsed() >= self.ttl)
            {
                *slot = Slot::default();
            }
            return slot.clone();
        }
        if slots.len() >= MAX_ENTRIES {
            let ttl = self.ttl;
            slots.retain(|_, slot| slot.get().is_none_or(|e| e.read_at.elapsed() < ttl));
            if slots.len() >= MAX_ENTRIES {
                slots.clear();
            }
        }
        let slot = Slot::default();
        slots.insert(key.to_owned(), slot.clone());
        slot
    }

    /// Takes out `slot` if it is still the key's and still empty: a first read that answered
    /// nothing leaves no trace (keys that name nothing would otherwise pile up).
    fn drop_empty<Q>(&self, key: &Q, slot: &Slot<V>)
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let mut slots = self.slots.write().unwrap_or_else(PoisonError::into_inner);
        if slots
            .get(key)
            .is_some_and(|now| Arc::ptr_eq(now, slot) && now.get().is_none())
        {
            slots.remove(key);
        }
    }

    /// Reads `key` again (`read`) and puts the answer in place of `held`, unless `held` was
    /// forgotten or replaced meanwhile.
    async fn refresh<E: std::fmt::Display + 'static>(
        self,
        key: K,
        held: Slot<V>,
        read: impl Future<Output = Result<Option<V>, E>>,
    ) {
        let read = match read.await {
            Ok(read) => read,
            Err(error) => {
                tracing::warn!(%error, "could not read a remembered value again");
                return;
            }
        };
        let mut slots = self.slots.write().unwrap_or_else(PoisonError::into_inner);
        let Some(current) = slots.get_mut(&key) else {
            return;
        };
        if !Arc::ptr_eq(current, &held) {
            return;
        }
        match read {
            Some(value) => *current = Arc::new(OnceCell::new_with(Some(Entry::read_now(value)))),
            None => {
                slots.remove(&key);
            }
        }
    }

    /// Changes the value of `key` in place, keeping its age; a read under way for it is not
    /// kept.
    pub fn update<Q>(&self, key: &Q, change: impl FnOnce(&mut V))
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let mut slots = self.slots.write().unwrap_or_else(PoisonError::into_inner);
        let Some(slot) = slots.get_mut(key) else {
            return;
        };
        let Some(entry) = slot.get() else {
            return;
        };
        let mut value = entry.value.clone();
        change(&mut value);
        *slot = Arc::new(OnceCell::new_with(Some(Entry::read_at(
            value,
            entry.read_at,
        ))));
    }

    /// Forgets every value `pick` picks, by key and value, and every read under way (it may
    /// have read what a change just replaced).
    pub fn forget(&self, pick: impl Fn(&K, &V) -> bool) {
        self.slots
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .retain(|key, slot| slot.get().is_some_and(|entry| !pick(key, &entry.value)));
    }

    /// Forgets everything.
    pub fn clear(&self) {
        self.slots
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicUsize;

    use super::*;

    type Counted = Remembered<i64, usize>;

    /// Reads of `key` answer how many reads there have been, this one included.
    async fn counted(remembered: &Counted, key: i64, reads: &Arc<AtomicUsize>) -> usize {
        let reads = reads.clone();
        remembered
            .recall(&key, || async move {
                Ok::<_, String>(Some(reads.fetch_add(1, Ordering::SeqCst) + 1))
            })
            .await
            .expect("read")
            .expect("something")
    }

    /// Holds `value` for `key` as if it had been read `ago`.
    fn held(remembered: &Counted, key: i64, value: usize, ago: Duration) {
        let at = Instant::now()
            .checked_sub(ago)
            .expect("an instant that long ago");
        let slot = Arc::new(OnceCell::new_with(Some(Entry::read_at(value, at))));
        remembered.slots.write().expect("slots").insert(key, slot);
    }

    fn holds(remembered: &Counted, key: i64) -> Option<usize> {
        let slots = remembered.slots.read().expect("slots");
        slots.get(&key)?.get().map(|entry| entry.value)
    }

    /// Yields until `key` holds `value`, or panics after a deadline.
    async fn until_held(remembered: &Counted, key: i64, value: usize) {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let now = holds(remembered, key);
            if now == Some(value) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "{key} holds {now:?}, not {value}"
            );
            tokio::task::yield_now().await;
        }
    }

    #[tokio::test]
    async fn a_value_is_read_once_until_it_is_forgotten_or_expires() {
        let remembered = Counted::new(Duration::from_secs(60));
        let reads = Arc::new(AtomicUsize::new(0));
        assert_eq!(counted(&remembered, 1, &reads).await, 1);
        assert_eq!(counted(&remembered, 1, &reads).await, 1, "remembered");
        assert_eq!(counted(&remembered, 2, &reads).await, 2, "another key");
        remembered.forget(|key, _| *key == 1);
        assert_eq!(counted(&remembered, 1, &reads).await, 3, "forgotten by key");
        remembered.forget(|_, value| *value == 3);
        assert_eq!(
            counted(&remembered, 1, &reads).await,
            4,
            "forgotten by value"
        );
        assert_eq!(counted(&remembered, 2, &reads).await, 2, "the others stay");
        remembered.update(&2, |value| *value += 10);
        assert_eq!(
            counted(&remembered, 2, &reads).await,
            12,
            "changed in place"
        );
        remembered.clear();
        assert_eq!(counted(&remembered, 2, &reads).await, 5, "cleared");

        held(&remembered, 3, 100, Duration::from_secs(60));
        assert_eq!(counted(&remembered, 3, &reads).await, 6, "expired");
    }

    #[tokio::test]
    async fn callers_asking_at_once_share_one_read() {
        let remembered = Counted::new(Duration::from_secs(60));
        let reads = Arc::new(AtomicUsize::new(0));
        let (release, released) = tokio::sync::watch::channel(false);
        let asking = (0..5).map(|_| {
            let (remembered, reads, mut released) =
                (remembered.clone(), reads.clone(), released.clone());
            tokio::spawn(async move {
                remembered
                    .recall(&1, || async move {
                        let _ = released.wait_for(|go| *go).await;
                        Ok::<_, String>(Some(reads.fetch_add(1, Ordering::SeqCst) + 1))
                    })
                    .await
            })
        });
        let asking: Vec<_> = asking.collect();
        tokio::task::yield_now().await;
        release.send(true).expect("release");
        for answer in asking {
            assert_eq!(answer.await.expect("joined"), Ok(Some(1)));
        }
        assert_eq!(reads.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn what_names_nothing_or_fails_is_not_remembered_nor_kept_in_place() {
        let remembered = Counted::new(Duration::from_secs(60));
        let nothing = remembered
            .recall(&1, || async { Ok::<_, String>(None) })
            .await;
        assert_eq!(nothing, Ok(None));
        let failed = remembered
            .recall(&2, || async { Err("down".to_owned()) })
            .await;
        assert_eq!(failed, Err("down".to_owned()));
        assert!(remembered.slots.read().expect("slots").is_empty());
        let reads = Arc::new(AtomicUsize::new(0));
        assert_eq!(counted(&remembered, 1, &reads).await, 1);
    }

    #[tokio::test]
    async fn a_value_past_half_its_time_is_read_again_in_the_background_once() {
        let remembered = Counted::new(Duration::from_secs(10));
        held(&remembered, 1, 100, Duration::from_secs(6));
        let reads = Arc::new(AtomicUsize::new(0));
        assert_eq!(
            counted(&remembered, 1, &reads).await,
            100,
            "answered from what is held while it is read again"
        );
        assert_eq!(
            counted(&remembered, 1, &reads).await,
            100,
            "one read again at a time"
        );
        until_held(&remembered, 1, 1).await;
        assert_eq!(counted(&remembered, 1, &reads).await, 1);
        assert_eq!(reads.load(Ordering::SeqCst), 1);

        held(&remembered, 2, 100, Duration::from_secs(6));
        let gone = remembered
            .recall(&2, || async { Ok::<_, String>(None) })
            .await;
        assert_eq!(gone, Ok(Some(100)));
        let deadline = Instant::now() + Duration::from_secs(10);
        while holds(&remembered, 2).is_some() {
            assert!(
                Instant::now() < deadline,
                "a value that names nothing stays"
            );
            tokio::task::yield_now().await;
        }
    }

    #[tokio::test]
    async fn a_value_forgotten_while_read_in_the_background_is_not_replaced_by_that_read() {
        let remembered = Counted::new(Duration::from_secs(10));
        held(&remembered, 1, 100, Duration::from_secs(6));
        let (release, released) = tokio::sync::oneshot::channel::<()>();
        let (read, was_read) = tokio::sync::oneshot::channel::<()>();
        let answered = remembered
            .recall(&1, || async move {
                let _ = released.await;
                let _ = read.send(());
                Ok::<_, String>(Some(200))
            })
            .await;
        assert_eq!(answered, Ok(Some(100)));
        remembered.forget(|key, _| *key == 1);
        held(&remembered, 1, 300, Duration::ZERO);
        release.send(()).expect("release");
        was_read.await.expect("read again");
        // On this one thread the read's task finishes before the test runs again.
        assert_eq!(holds(&remembered, 1), Some(300));
    }

    #[tokio::test]
    async fn a_first_read_under_way_when_forgotten_is_not_kept() {
        let remembered = Counted::new(Duration::from_secs(60));
        let (started, wait_started) = tokio::sync::oneshot::channel::<()>();
        let (release, released) = tokio::sync::oneshot::channel::<()>();
        let reading = tokio::spawn({
            let remembered = remembered.clone();
            async move {
                remembered
                    .recall(&1, || async move {
                        let _ = started.send(());
                        let _ = released.await;
                        Ok::<_, String>(Some(100))
                    })
                    .await
            }
        });
        wait_started.await.expect("read started");
        remembered.forget(|_, _| false);
        release.send(()).expect("release");
        assert_eq!(
            reading.await.expect("joined"),
            Ok(Some(100)),
            "its caller is answered"
        );
        let reads = Arc::new(AtomicUsize::new(0));
        assert_eq!(
            counted(&remembered, 1, &reads).await,
            1,
            "but it is not kept"
        );
    }
}
