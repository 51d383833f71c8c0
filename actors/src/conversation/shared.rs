//! What every conversation actor of a server reads alike: each channel's route to its
//! assistants and each workspace's stages. Read once on first use and shared by `Arc`, instead
//! of once per actor and a copy in each: a webhook burst from a thousand new people spawns a
//! thousand actors that would otherwise each read the same channel, assistants, MCP servers
//! and stages.
//!
//! The registry forgets an entry when a [`Change`] concerns it, before it tells the actors, so
//! the next turn reads it again. A read already under way when the change arrives finishes
//! for the turns waiting on it, as a turn that started before the change would; it is not
//! kept, because forgetting drops the slot it fills.
//!
//! Changes made through another server sharing the database are not announced here, so a
//! value is also read again once it is [`MAX_AGE`] old: this server sees them within that time
//! (before, a conversation actor kept its own copy for as long as it lived). A value in use is
//! read again ahead of that, in the background, once it is half that old, so a steady stream of
//! turns never waits for the read.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use parley_persistence::entities::stage;
use parley_persistence::{DatabaseConnection, Page, stages};
use tokio::sync::OnceCell;
use uuid::Uuid;

use super::TurnError;
use super::route::Route;
use crate::changes::Change;
use crate::runtime::spawn_behind;

/// How long a shared value is used before it is read again.
const MAX_AGE: Duration = Duration::from_secs(60);

/// The shared routes and stages of one server's conversation actors.
#[derive(Debug, Default)]
pub(crate) struct Shared {
    /// Each channel's route, by workspace and channel.
    routes: Slots<(i64, Uuid), Route>,
    /// Each workspace's stages.
    stages: Slots<i64, Vec<stage::Model>>,
}

impl Shared {
    /// The route of `channel_id` in the workspace, read on first use.
    ///
    /// # Errors
    /// As [`Route::load`]; a failed read is not kept.
    pub(crate) async fn route(
        &self,
        db: &DatabaseConnection,
        workspace_id: i64,
        channel_id: Uuid,
    ) -> Result<Arc<Route>, TurnError> {
        let db = db.clone();
        self.routes
            .get_or_load((workspace_id, channel_id), move || {
                let db = db.clone();
                async move { Route::load(&db, workspace_id, channel_id).await }
            })
            .await
    }

    /// The workspace's stages (their names render in instructions and the tool text).
    ///
    /// # Errors
    /// A storage error; a failed read is not kept.
    pub(crate) async fn stages(
        &self,
        db: &DatabaseConnection,
        workspace_id: i64,
    ) -> Result<Arc<Vec<stage::Model>>, TurnError> {
        let db = db.clone();
        self.stages
            .get_or_load(workspace_id, move || {
                let db = db.clone();
                async move {
                    // Stages are a short list by nature; a thousand is far beyond any journey.
                    let page = Page {
                        page: 1,
                        limit: 1_000,
                    };
                    Ok(stages::list(&db, workspace_id, page).await?.items)
                }
            })
            .await
    }

    /// Forgets what `change` made stale.
    pub(crate) fn forget(&self, change: &Change) {
        match change {
            Change::Stages { workspace_id } => self.stages.remove(|ws| ws == workspace_id),
            Change::Channel {
                workspace_id,
                channel_id,
            }
            | Change::ChannelDeleted {
                workspace_id,
                channel_id,
            } => self
                .routes
                .remove(|key| *key == (*workspace_id, *channel_id)),
            Change::Assistants { workspace_id } => {
                self.routes.remove(|(ws, _)| ws == workspace_id);
            }
            Change::Identity { .. } | Change::Messages { .. } => {}
        }
    }
}

/// Values read once per key by whoever asks first (and again once `max_age` old); those asking
/// meanwhile wait for that read. Past half `max_age`, the first to ask starts a read in the
/// background ([`spawn_behind`]: a moment after, so it does not compete with that turn) and
/// everyone goes on with the value held until it replaces it.
#[derive(Debug)]
struct Slots<K, V> {
    slots: Arc<Mutex<HashMap<K, Slot<V>>>>,
    max_age: Duration,
}

type Slot<V> = Arc<OnceCell<Loaded<V>>>;

/// A value and when it was read.
#[derive(Debug)]
struct Loaded<V> {
    at: Instant,
    value: Arc<V>,
    /// Whether a read in the background was started to replace it.
    refreshing: AtomicBool,
}

impl<V> Loaded<V> {
    fn new(value: V) -> Self {
        Self {
            at: Instant::now(),
            value: Arc::new(value),
            refreshing: AtomicBool::new(false),
        }
    }
}

impl<K, V> Default for Slots<K, V> {
    fn default() -> Self {
        Self {
            slots: Arc::default(),
            max_age: MAX_AGE,
        }
    }
}

impl<K, V> Slots<K, V>
where
    K: Eq + Hash + Clone + Send + 'static,
    V: Send + Sync + 'static,
{
    async fn get_or_load<F, Fut>(&self, key: K, load: F) -> Result<Arc<V>, TurnError>
    where
        F: FnOnce() -> Fut + Send + 'static,
        Fut: Future<Output = Result<V, TurnError>> + Send,
    {
        let (slot, refresh) = {
            let mut slots = self.slots.lock().unwrap_or_else(PoisonError::into_inner);
            let slot = slots.entry(key.clone()).or_default();
            let age = slot.get().map(|loaded| loaded.at.elapsed());
            if age.is_some_and(|age| age >= self.max_age) {
                *slot = Arc::default();
            }
            let refresh = slot.get().is_some_and(|loaded| {
                loaded.at.elapsed() >= self.max_age / 2
                    && !loaded.refreshing.swap(true, Ordering::Relaxed)
            });
            (slot.clone(), refresh)
        };
        if let Some(loaded) = slot.get() {
            if refresh {
                spawn_behind(self.refresh(key, slot.clone(), load));
            }
            return Ok(loaded.value.clone());
        }
        let loaded = slot
            .get_or_try_init(|| async { Ok::<_, TurnError>(Loaded::new(load().await?)) })
            .await?;
        Ok(loaded.value.clone())
    }

    /// Reads the value of `key` again and puts it in place of `held`, unless `held` was
    /// forgotten or replaced meanwhile; a failed read leaves `held` to expire.
    fn refresh<F, Fut>(
        &self,
        key: K,
        held: Slot<V>,
        load: F,
    ) -> impl Future<Output = ()> + Send + 'static
    where
        F: FnOnce() -> Fut + Send + 'static,
        Fut: Future<Output = Result<V, TurnError>> + Send,
    {
        let slots = self.slots.clone();
        async move {
            let value = match load().await {
                Ok(value) => value,
                Err(error) => {
                    tracing::warn!(%error, "could not read a shared value again");
                    return;
                }
            };
            let fresh = Arc::new(OnceCell::new_with(Some(Loaded::new(value))));
            let mut slots = slots.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some(current) = slots.get_mut(&key)
                && Arc::ptr_eq(current, &held)
            {
                *current = fresh;
            }
        }
    }

    fn remove(&self, stale: impl Fn(&K) -> bool) {
        self.slots
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .retain(|key, _| !stale(key));
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    async fn count_load(
        slots: &Slots<i64, usize>,
        key: i64,
        reads: &Arc<AtomicUsize>,
    ) -> Result<Arc<usize>, TurnError> {
        let reads = reads.clone();
        slots
            .get_or_load(key, || async move {
                Ok(reads.fetch_add(1, Ordering::SeqCst) + 1)
            })
            .await
    }

    /// Holds `value` for `key` as if it had been read `ago`.
    fn held(slots: &Slots<i64, usize>, key: i64, value: usize, ago: Duration) {
        let loaded = Loaded {
            at: Instant::now()
                .checked_sub(ago)
                .expect("an instant that long ago"),
            ..Loaded::new(value)
        };
        let slot = Arc::new(OnceCell::new_with(Some(loaded)));
        slots.slots.lock().expect("slots").insert(key, slot);
    }

    /// Yields until `key` holds `value`, or panics after a deadline.
    async fn until_held(slots: &Slots<i64, usize>, key: i64, value: usize) {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let now = slots.slots.lock().expect("slots")[&key]
                .get()
                .map(|loaded| *loaded.value);
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
    async fn a_value_half_its_age_is_read_again_in_the_background_once() {
        let slots = Slots::<i64, usize>::default();
        held(&slots, 1, 100, MAX_AGE / 2 + Duration::from_secs(1));
        let reads = Arc::new(AtomicUsize::new(0));
        assert_eq!(
            *count_load(&slots, 1, &reads).await.expect("held"),
            100,
            "answered from what is held while it is read again"
        );
        assert_eq!(
            *count_load(&slots, 1, &reads).await.expect("held"),
            100,
            "one read again at a time"
        );
        until_held(&slots, 1, 1).await;
        assert_eq!(*count_load(&slots, 1, &reads).await.expect("fresh"), 1);
        assert_eq!(reads.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn a_value_forgotten_while_read_in_the_background_is_not_kept() {
        let slots = Slots::<i64, usize>::default();
        held(&slots, 1, 100, MAX_AGE / 2 + Duration::from_secs(1));
        let (release, released) = tokio::sync::oneshot::channel::<()>();
        let (read, was_read) = tokio::sync::oneshot::channel::<()>();
        let answered = slots
            .get_or_load(1, || async move {
                let _ = released.await;
                let _ = read.send(());
                Ok(200)
            })
            .await;
        assert_eq!(*answered.expect("held"), 100);
        slots.remove(|key| *key == 1);
        held(&slots, 1, 300, Duration::ZERO);
        release.send(()).expect("release");
        // On this one thread the read's task finishes before the test runs again.
        was_read.await.expect("read again");
        until_held(&slots, 1, 300).await;
    }

    #[tokio::test]
    async fn a_value_is_read_once_until_it_is_forgotten() {
        let slots = Slots::<i64, usize>::default();
        let reads = Arc::new(AtomicUsize::new(0));
        assert_eq!(*count_load(&slots, 1, &reads).await.expect("read"), 1);
        assert_eq!(*count_load(&slots, 1, &reads).await.expect("kept"), 1);
        assert_eq!(*count_load(&slots, 2, &reads).await.expect("other key"), 2);
        slots.remove(|key| *key == 1);
        assert_eq!(*count_load(&slots, 1, &reads).await.expect("again"), 3);
        assert_eq!(*count_load(&slots, 2, &reads).await.expect("untouched"), 2);
    }

    #[tokio::test]
    async fn a_value_is_read_again_once_it_is_too_old() {
        let slots = Slots::<i64, usize> {
            max_age: Duration::ZERO,
            ..Slots::default()
        };
        let reads = Arc::new(AtomicUsize::new(0));
        assert_eq!(*count_load(&slots, 1, &reads).await.expect("read"), 1);
        assert_eq!(*count_load(&slots, 1, &reads).await.expect("again"), 2);
    }

    #[tokio::test]
    async fn a_failed_read_is_not_kept() {
        let slots = Slots::<i64, usize>::default();
        let failed = slots
            .get_or_load(1, || async { Err(TurnError::ChannelNotFound) })
            .await;
        assert!(matches!(failed, Err(TurnError::ChannelNotFound)));
        let reads = Arc::new(AtomicUsize::new(0));
        assert_eq!(*count_load(&slots, 1, &reads).await.expect("read"), 1);
    }

    #[tokio::test]
    async fn a_read_under_way_when_forgotten_is_not_kept() {
        let slots = Arc::new(Slots::<i64, usize>::default());
        let (started, wait_started) = tokio::sync::oneshot::channel::<()>();
        let (release, released) = tokio::sync::oneshot::channel::<()>();
        let reading = tokio::spawn({
            let slots = slots.clone();
            async move {
                slots
                    .get_or_load(1, || async move {
                        let _ = started.send(());
                        let _ = released.await;
                        Ok(100)
                    })
                    .await
            }
        });
        wait_started.await.expect("read started");
        slots.remove(|key| *key == 1);
        release.send(()).expect("release");
        assert_eq!(*reading.await.expect("joined").expect("read"), 100);
        let reads = Arc::new(AtomicUsize::new(0));
        assert_eq!(*count_load(&slots, 1, &reads).await.expect("read"), 1);
    }
}
