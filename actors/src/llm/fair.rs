//! Model calls in flight per workspace, bounded (`actors.model_calls_per_workspace`): one
//! business's burst queues for its own slots, and the model's capacity stays open to the others.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The slots of every workspace; cheap to clone.
#[derive(Clone, Debug, Default)]
pub struct ModelSlots {
    /// Calls a workspace may have in flight; 0: no bound.
    per_workspace: usize,
    slots: Arc<Mutex<HashMap<i64, Arc<Semaphore>>>>,
}

impl ModelSlots {
    /// `per_workspace` calls in flight per workspace (0: no bound).
    pub fn new(per_workspace: usize) -> Self {
        Self {
            per_workspace,
            slots: Arc::default(),
        }
    }

    /// A slot of `workspace_id`, held while its call is in flight; waits while all are taken.
    /// `None` when calls are not bounded.
    pub async fn take(&self, workspace_id: i64) -> Option<OwnedSemaphorePermit> {
        if self.per_workspace == 0 {
            return None;
        }
        let semaphore = self
            .slots
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(workspace_id)
            .or_insert_with(|| Arc::new(Semaphore::new(self.per_workspace)))
            .clone();
        semaphore.acquire_owned().await.ok()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_workspace_past_its_slots_waits_and_another_does_not() {
        let slots = ModelSlots::new(1);
        let held = slots.take(1).await;
        assert!(held.is_some());
        let waiting = tokio::time::timeout(Duration::from_secs(1), slots.take(1)).await;
        assert!(waiting.is_err(), "the second call of workspace 1 waits");
        let other = tokio::time::timeout(Duration::from_secs(1), slots.take(2)).await;
        assert!(other.is_ok(), "workspace 2 has its own slots");
        drop(held);
        assert!(slots.take(1).await.is_some());
        assert!(ModelSlots::new(0).take(1).await.is_none());
    }
}
