//! Reading the events table: a full sweep of the due events of the channels this node owns,
//! and, on a cluster, a read of just the events other nodes told it of.

use parley_persistence::{clock, webhook_events};
use uuid::Uuid;

use super::{InboundDeps, InboundWorkerState, hold};

/// Reads due events the worker does not hold yet, up to what the queue takes.
pub(super) async fn sweep(state: &mut InboundWorkerState) {
    let room = state.settings.queue.saturating_sub(state.waiting.len());
    if room == 0 {
        state.behind = true;
        return;
    }
    let limit = u64::try_from(room + state.known.len()).unwrap_or(u64::MAX);
    let owned = match owned_channels(&state.deps).await {
        Ok(owned) => owned,
        Err(error) => {
            tracing::warn!(%error, "the channels could not be read");
            return;
        }
    };
    let due = webhook_events::due(&state.deps.db, clock::now(), limit, owned.as_deref());
    match due.await {
        Ok(events) => {
            state.behind = events.len() as u64 >= limit;
            for event in events {
                let fresh = state.told_fresh.remove(&event.id);
                hold(state, event, fresh);
            }
            // Told of but not read now (taken already, or beyond the queue's room): answered
            // as any swept event when read later.
            state.told_fresh.clear();
        }
        Err(error) => tracing::warn!(%error, "the events table could not be swept"),
    }
}

/// Reads the due events other nodes told of (see [`InboundWorkerState::told_fresh`]), fresh,
/// up to what the queue takes; those it cannot take now wait for a full sweep.
pub(super) async fn sweep_told(state: &mut InboundWorkerState) {
    let told: Vec<Uuid> = state.told_fresh.drain().collect();
    let room = state.settings.queue.saturating_sub(state.waiting.len());
    if told.len() > room {
        state.behind = true;
    }
    let told = &told[..told.len().min(room)];
    if told.is_empty() {
        return;
    }
    match webhook_events::due_among(&state.deps.db, clock::now(), told).await {
        Ok(events) => {
            let owned = state.deps.placement.keep_owned(events, |e| e.channel_id);
            for event in owned {
                hold(state, event, true);
            }
        }
        Err(error) => tracing::warn!(%error, "the events told of could not be read"),
    }
}

/// On a cluster, the channels this node owns (it answers their events); `None` on a single
/// node, which answers every event.
async fn owned_channels(
    deps: &InboundDeps,
) -> Result<Option<Vec<Uuid>>, parley_persistence::PersistenceError> {
    if !deps.placement.is_clustered() {
        return Ok(None);
    }
    let ids = parley_persistence::channels::all_ids(&deps.db).await?;
    Ok(Some(deps.placement.keep_owned(ids, |id| *id)))
}

#[cfg(test)]
mod tests {
    use parley_persistence::webhook_events;
    use serde_json::json;

    use super::*;
    use crate::test_support::{deps, world};

    #[tokio::test]
    async fn events_told_of_are_read_by_id_when_due_and_only_then() {
        let (deps, _dir, _model) = deps().await;
        let db = &deps.db;
        let (ws, channel, _, _) = world(db).await;
        let now = clock::now();
        let mut ids = Vec::new();
        for wamid in ["wamid.D", "wamid.L", "wamid.F", "wamid.N"] {
            let stored = webhook_events::insert_if_new(db, ws, channel, wamid, json!({}), now)
                .await
                .expect("stored")
                .expect("new");
            ids.push(stored.id);
        }
        let (due, later, finished, untold) = (ids[0], ids[1], ids[2], ids[3]);
        let tomorrow = now + chrono::Duration::days(1);
        webhook_events::retry_later(db, later, 1, tomorrow, "down".to_owned())
            .await
            .expect("later");
        webhook_events::finish(db, finished, None, now)
            .await
            .expect("finished");

        let told = [due, later, finished, Uuid::now_v7()];
        let read = webhook_events::due_among(db, clock::now(), &told)
            .await
            .expect("read");
        let read: Vec<Uuid> = read.iter().map(|e| e.id).collect();
        assert_eq!(read, [due], "only the due event of those told of");
        let all = webhook_events::due(db, clock::now(), 100, None)
            .await
            .expect("swept");
        let all: Vec<Uuid> = all.iter().map(|e| e.id).collect();
        assert_eq!(all, [due, untold], "a full sweep reads the untold one too");
    }
}
