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
//! (before, a conversation actor kept its own copy for as long as it lived).

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use parley_persistence::entities::stage;
use parley_persistence::{DatabaseConnection, Page, stages};
use tokio::sync::OnceCell;
use uuid::Uuid;

use super::TurnError;
use super::route::Route;
use crate::changes::Change;

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
        self.routes
            .get_or_load((workspace_id, channel_id), || {
                Route::load(db, workspace_id, channel_id)
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
        self.stages
            .get_or_load(workspace_id, || async move {
                // Stages are a short list by nature; a thousand is far beyond any journey.
                let page = Page {
                    page: 1,
                    limit: 1_000,
                };
                Ok(stages::list(db, workspace_id, page).await?.items)
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
/// meanwhile wait for that read.
#[derive(Debug)]
struct Slots<K, V> {
    slots: Mutex<HashMap<K, Arc<OnceCell<Loaded<V>>>>>,
    max_age: Duration,
}

/// A value and when it was read.
#[derive(Debug)]
struct Loaded<V> {
    at: Instant,
    value: Arc<V>,
}

impl<K, V> Default for Slots<K, V> {
    fn default() -> Self {
        Self {
            slots: Mutex::new(HashMap::new()),
            max_age: MAX_AGE,
        }
    }
}

impl<K: Eq + Hash, V> Slots<K, V> {
    async fn get_or_load<F, Fut>(&self, key: K, load: F) -> Result<Arc<V>, TurnError>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<V, TurnError>>,
    {
        let slot = {
            let mut slots = self.slots.lock().unwrap_or_else(PoisonError::into_inner);
            let slot = slots.entry(key).or_default();
            if slot
                .get()
                .is_some_and(|loaded| loaded.at.elapsed() >= self.max_age)
            {
                *slot = Arc::default();
            }
            slot.clone()
        };
        let loaded = slot
            .get_or_try_init(|| async {
                Ok::<_, TurnError>(Loaded {
                    at: Instant::now(),
                    value: Arc::new(load().await?),
                })
            })
            .await?;
        Ok(loaded.value.clone())
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
        reads: &AtomicUsize,
    ) -> Result<Arc<usize>, TurnError> {
        slots
            .get_or_load(key, || async {
                Ok(reads.fetch_add(1, Ordering::SeqCst) + 1)
            })
            .await
    }

    #[tokio::test]
    async fn a_value_is_read_once_until_it_is_forgotten() {
        let slots = Slots::<i64, usize>::default();
        let reads = AtomicUsize::new(0);
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
        let reads = AtomicUsize::new(0);
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
        let reads = AtomicUsize::new(0);
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
        let reads = AtomicUsize::new(0);
        assert_eq!(*count_load(&slots, 1, &reads).await.expect("read"), 1);
    }
}
