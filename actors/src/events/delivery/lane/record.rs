//! A lane's recordings: the outcomes that ended about together, recorded in one transaction
//! through the database's writer, and what the lane lets go once they are.

use std::sync::Arc;

use parley_persistence::{DatabaseExecutor, DeliveryStatus, PersistenceError, Writes};
use uuid::Uuid;

use super::{Lane, Pending};
use crate::events::delivery::outcomes::{self, Outcome};

/// What a recording came to: the deliveries it was for, whether the endpoint's failing streak
/// runs on after it (none succeeded), and the endpoints it disabled (with their workspaces),
/// or why it failed.
pub(super) type Recorded = (Vec<Uuid>, bool, Result<Vec<(Uuid, i64)>, PersistenceError>);

impl Lane {
    /// Records what ended, in one transaction through the writer (with other writes, on
    /// SQLite); the ids stay held until it is done.
    pub(super) fn record(&mut self) -> Pending<Recorded> {
        let ended: Arc<Vec<Outcome>> = Arc::new(std::mem::take(&mut self.ended));
        let ids = ended.iter().map(|o| o.delivery_id).collect();
        let deps = self.deps.clone();
        let failing = self.failing;
        let failing_after = !ended
            .iter()
            .any(|o| o.settled.status == DeliveryStatus::Succeeded);
        // Successes alone are one call that commits by itself: no transaction around it.
        let only_successes = outcomes::only_successes(&ended, failing);
        Box::pin(async move {
            let (events, give_up_after) = (deps.events.clone(), deps.settings.give_up_after);
            let work = recording(events, ended, failing, give_up_after);
            let recorded = if only_successes {
                deps.writer.write_small(work).await
            } else {
                deps.writer.write_small_atomic(work).await
            };
            (ids, failing_after, recorded)
        })
    }

    /// Lets recorded deliveries' ids go. A failed recording leaves them pending, read again;
    /// an endpoint disabled stops the lane and is announced, so that every node's routes
    /// leave it out.
    pub(super) fn let_go(&mut self, (ids, failing_after, recorded): Recorded) {
        let disabled = match recorded {
            Ok(disabled) => {
                self.failing = failing_after;
                self.held.recorded(&ids);
                disabled
            }
            Err(error) => {
                tracing::warn!(%error, "could not record event deliveries");
                self.held.release(ids);
                self.more = true;
                return;
            }
        };
        for (endpoint_id, workspace_id) in disabled {
            tracing::warn!(%endpoint_id, "event webhook endpoint disabled");
            self.disabled = true;
            self.drop_queue();
            // This node's routes left it out before the commit; the other nodes' read theirs
            // again now.
            self.deps
                .changes
                .announce(&crate::changes::Change::EventRoutes { workspace_id });
        }
    }
}

/// The writer's work that records `ended` (see [`outcomes::record`]).
fn recording(
    events: crate::events::Events,
    ended: Arc<Vec<Outcome>>,
    failing: bool,
    give_up_after: chrono::Duration,
) -> impl for<'e> Fn(&'e DatabaseExecutor<'e>) -> Writes<'e, Vec<(Uuid, i64)>> + Send + 'static {
    move |db| {
        let (events, ended) = (events.clone(), ended.clone());
        Box::pin(async move { outcomes::record(db, &events, &ended, failing, give_up_after).await })
    }
}
