//! The recording of many attempts' outcomes in one transaction: the rows, what they count in
//! their workspaces' usage, and each endpoint's failing streak (disabled on 410 or after five
//! days of failures).

use std::collections::HashMap;

use parley_persistence::event_deliveries::{self, Settled};
use parley_persistence::{DeliveryStatus, PersistenceError, clock, event_webhooks};
use parley_persistence::{one_call, usage};
use uuid::Uuid;

use crate::events::Events;

/// What an attempt came to, recorded by its lane with the others that ended about then.
#[derive(Clone, Debug)]
pub(super) struct Outcome {
    pub(super) endpoint_id: Uuid,
    pub(super) workspace_id: i64,
    pub(super) delivery_id: Uuid,
    pub(super) settled: Settled,
    /// Why to disable the endpoint at once (410), if so.
    pub(super) disable: Option<&'static str>,
}

/// Whether recording `outcomes` is only their successes and what they count, one call that
/// commits by itself (see [`record`]): every delivery succeeded and none disables its endpoint,
/// and no endpoint has a failing streak to end (`failing`).
pub(super) fn only_successes(outcomes: &[Outcome], failing: bool) -> bool {
    !failing
        && outcomes.iter().all(|outcome| {
            outcome.settled.status == DeliveryStatus::Succeeded && outcome.disable.is_none()
        })
}

/// Records `outcomes` on `db` (the caller's transaction, or the connection when
/// [`only_successes`] says so): the deliveries that succeeded with one statement per status
/// code and their counts in one call, the others one by one, and each endpoint's failing streak
/// (ended by a success, when `failing` says there may be one; five days of it, or a 410,
/// disable the endpoint). Answers the endpoints disabled now, with their workspaces.
///
/// # Errors
/// The database's; nothing is recorded then (the caller's transaction rolls back), and the
/// deliveries are attempted again.
pub(super) async fn record(
    db: &impl one_call::Executor,
    events: &Events,
    outcomes: &[Outcome],
    failing: bool,
    give_up_after: chrono::Duration,
) -> Result<Vec<(Uuid, i64)>, PersistenceError> {
    let now = clock::now();
    let backend = db.get_database_backend();
    let mut by_code: HashMap<Option<i32>, Vec<Uuid>> = HashMap::new();
    let mut endpoints: HashMap<Uuid, (i64, bool, Option<&'static str>)> = HashMap::new();
    for outcome in outcomes {
        let succeeded = outcome.settled.status == DeliveryStatus::Succeeded;
        let entry =
            endpoints
                .entry(outcome.endpoint_id)
                .or_insert((outcome.workspace_id, false, None));
        entry.1 |= succeeded;
        entry.2 = entry.2.or(outcome.disable);
        if succeeded {
            by_code
                .entry(outcome.settled.status_code)
                .or_default()
                .push(outcome.delivery_id);
        } else {
            event_deliveries::settle(db, outcome.delivery_id, outcome.settled.clone(), now).await?;
        }
    }
    // Each delivery the endpoint took counts in its workspace's usage, with its record: the
    // successes and their counts are one call.
    let mut successes: Vec<one_call::Write> = by_code
        .into_iter()
        .map(|(code, ids)| event_deliveries::succeeded(backend, &ids, code, now).into())
        .collect();
    let delivered: Vec<usage::Count> = outcomes
        .iter()
        .filter(|o| o.settled.status == DeliveryStatus::Succeeded)
        .map(|o| usage::Count::new(o.workspace_id, now, usage::Metric::EventDeliveries, 1))
        .collect();
    successes.extend(usage::to_write(&delivered).map(one_call::Write::from));
    one_call::run_redoable(db, successes).await?;
    let mut disabled = Vec::new();
    for (endpoint_id, (workspace_id, any_success, gone)) in endpoints {
        let now_disabled = if let Some(reason) = gone {
            event_webhooks::disable(db, endpoint_id, reason, None, now).await?
        } else if any_success {
            if failing {
                event_webhooks::succeeded(db, endpoint_id).await?;
            }
            false
        } else {
            event_webhooks::failed(db, endpoint_id, now).await?;
            let reason = "every delivery failed for five days";
            let since = Some(now - give_up_after);
            event_webhooks::disable(db, endpoint_id, reason, since, now).await?
        };
        if now_disabled {
            disabled.push((endpoint_id, workspace_id));
        }
    }
    // The routes leave a disabled endpoint out before its disabling commits: no fact written
    // after the commit is written for it.
    for (_, workspace_id) in &disabled {
        events.reload(db, Some(*workspace_id)).await?;
    }
    Ok(disabled)
}
