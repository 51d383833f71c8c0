//! The delivery actor (`root/events`): works the event deliveries off. Each endpoint is a lane
//! of its own ([`lane`]): a long-lived task with at most `per_endpoint` requests in flight and
//! a short queue read ahead from the table, so that a slow or dead endpoint holds up nothing
//! but itself; nothing here runs on a conversation's path. The actor only finds the endpoints
//! with deliveries due (when events were written, and every `sweep` for retries and what a
//! wake-up missed), starts their lanes or tells them to look, hands them the deliveries just
//! committed (queued with no read), and ends lanes that stayed idle from one sweep to the
//! next.
//! An attempt posts the stored body with the Standard Webhooks headers on one of its lane's own
//! egress-checked connections (no redirects; [`crate::egress::Dialer`]), waits at most `timeout`, and settles the row: 2xx
//! succeeds, 410 disables the endpoint, anything else is tried again on the schedule (with
//! jitter, or later when the endpoint asks with `Retry-After`) until the schedule runs out; an
//! endpoint whose deliveries have all failed for `give_up_after` is disabled. A delivery being
//! attempted stays `pending`, so a stop loses none.

mod attempt;
mod lane;
mod outcomes;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use parley_persistence::event_deliveries;
use parley_persistence::{DatabaseConnection, GroupCommit, clock};
use ractor::{Actor, ActorProcessingErr, ActorRef};
use uuid::Uuid;

use self::lane::{LaneHandle, LaneMsg};
use super::Events;
use super::Told;
use crate::domain::SecretBox;
use crate::egress::{Dialer, Egress};

/// How deliveries are paced and retried; from configuration.
#[derive(Clone, Debug)]
pub struct EventSettings {
    /// How often the table is looked at for due deliveries (retries, and what a wake-up
    /// missed).
    pub sweep: Duration,
    /// Longest wait for an endpoint's answer.
    pub timeout: Duration,
    /// Most requests in flight to one endpoint.
    pub per_endpoint: usize,
    /// The waits before each retry; a delivery fails once they are used up.
    pub schedule: Vec<Duration>,
    /// An endpoint whose deliveries have all failed for this long is disabled.
    pub give_up_after: chrono::Duration,
}

impl Default for EventSettings {
    fn default() -> Self {
        let minutes = |m: u64| Duration::from_secs(m * 60);
        Self {
            sweep: Duration::from_secs(1),
            timeout: Duration::from_secs(15),
            per_endpoint: 4,
            // Standard Webhooks' schedule: about a day and a half in all.
            schedule: vec![
                Duration::from_secs(5),
                minutes(5),
                minutes(30),
                minutes(120),
                minutes(300),
                minutes(600),
                minutes(600),
            ],
            give_up_after: chrono::Duration::days(5),
        }
    }
}

/// What the delivery actor needs.
#[derive(Clone, Debug)]
pub struct DeliveryDeps {
    /// Connection pool.
    pub db: DatabaseConnection,
    /// The database's writer, which records the attempts.
    pub writer: GroupCommit,
    /// Opens the endpoints' sealed secrets.
    pub secrets: Arc<SecretBox>,
    /// Where tenant URLs may lead.
    pub egress: Arc<Egress>,
    /// The routes, told when the actor took a wake-up.
    pub events: Events,
    /// Pace and retries.
    pub settings: EventSettings,
    /// Which endpoints' lanes run here (all, on a single node).
    pub placement: crate::cluster::Placement,
    /// Where a disabled endpoint is announced, so that every node's routes leave it out.
    pub changes: crate::changes::Announcer,
}

/// Behaviour of the delivery actor.
pub(crate) struct DeliveryWorker;

/// State of the delivery actor.
pub(crate) struct DeliveryState {
    deps: Arc<DeliveryDeps>,
    dialer: Dialer,
    /// The lanes running, by endpoint.
    lanes: HashMap<Uuid, LaneHandle>,
}

/// Messages of the delivery actor.
pub(crate) enum DeliveryMsg {
    /// Events were written: look now.
    Wake,
    /// Time to look for due deliveries and report the backlog.
    Sweep,
    /// A lane has nothing held and nothing more to read after `told` messages: it ends at the
    /// next sweep, unless it was told something since.
    Idle {
        /// The lane's endpoint.
        endpoint_id: Uuid,
        /// The messages it had taken.
        told: u64,
    },
}

impl Actor for DeliveryWorker {
    type Msg = DeliveryMsg;
    type State = DeliveryState;
    type Arguments = Arc<DeliveryDeps>;

    async fn pre_start(
        &self,
        myself: ActorRef<Self::Msg>,
        deps: Arc<DeliveryDeps>,
    ) -> Result<Self::State, ActorProcessingErr> {
        myself.send_interval(deps.settings.sweep, || DeliveryMsg::Sweep);
        let _ = myself.send_message(DeliveryMsg::Sweep);
        Ok(DeliveryState {
            dialer: deps.egress.dialer(deps.settings.timeout),
            deps,
            lanes: HashMap::new(),
        })
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        // Each lane records what ended and stops; what was in flight stays pending.
        state.lanes.clear();
        Ok(())
    }

    #[tracing::instrument(name = "event_delivery", skip_all)]
    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        message: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            DeliveryMsg::Wake => {
                let told = state.deps.events.woken();
                if !told.all && hand(state, told) {
                    return Ok(());
                }
                look(state, &myself, false).await;
            }
            DeliveryMsg::Sweep => {
                // Lanes idle since the last sweep end; the others linger between bursts, so
                // that the next fact's deliveries are handed to a lane already running.
                state.lanes.retain(|_, lane| !lane.idle());
                look(state, &myself, true).await;
                report_backlog(&state.deps.db).await;
            }
            DeliveryMsg::Idle { endpoint_id, told } => {
                if let Some(lane) = state.lanes.get_mut(&endpoint_id) {
                    lane.said_idle(told);
                }
            }
        }
        Ok(())
    }
}

/// Tells the lane of every enabled endpoint with deliveries due here to look (starting the
/// lanes missing); on a sweep, tells the other lanes to rest.
async fn look(state: &mut DeliveryState, myself: &ActorRef<DeliveryMsg>, sweep: bool) {
    // Taken before the read: routes read again after it leave the lanes behind, looked at
    // again at the next wake-up.
    let generation = state.deps.events.generation();
    let due = match event_deliveries::endpoints_due(&state.deps.db, clock::now()).await {
        Ok(due) => state.deps.placement.keep_owned(due, |endpoint| endpoint.id),
        Err(error) => {
            tracing::warn!(%error, "could not read the due event deliveries");
            return;
        }
    };
    if sweep {
        let due_ids: HashSet<Uuid> = due.iter().map(|e| e.id).collect();
        for (_, lane) in state
            .lanes
            .iter_mut()
            .filter(|(id, _)| !due_ids.contains(*id))
        {
            lane.tell(LaneMsg::Rest);
        }
    }
    for endpoint in due {
        match state.lanes.get_mut(&endpoint.id) {
            Some(lane) => {
                lane.generation = generation;
                lane.tell(LaneMsg::Look(Box::new(endpoint)));
            }
            None => {
                let id = endpoint.id;
                let (deps, dialer) = (state.deps.clone(), state.dialer.clone());
                let lane = LaneHandle::start(deps, dialer, endpoint, myself.clone(), generation);
                state.lanes.insert(id, lane);
            }
        }
    }
}
/// Hands the lanes what `told` says was committed: its rows to queue, or word to read again
/// (for the endpoints written past what is handed), when each of the lanes runs here, its
/// endpoint is still this node's and the lane has it as the routes last read it; answers false
/// (nothing told) otherwise, for a look at every endpoint.
fn hand(state: &mut DeliveryState, told: Told) -> bool {
    let placement = &state.deps.placement;
    let generation = state.deps.events.generation();
    let all_running = told.fresh.keys().chain(&told.endpoints).all(|id| {
        state
            .lanes
            .get(id)
            .is_some_and(|lane| lane.generation == generation)
            && placement.owns(*id)
    });
    if !all_running {
        return false;
    }
    for (id, rows) in told.fresh {
        if let Some(lane) = state.lanes.get_mut(&id) {
            lane.tell(LaneMsg::Fresh(rows));
        }
    }
    for id in &told.endpoints {
        if let Some(lane) = state.lanes.get_mut(id) {
            lane.tell(LaneMsg::Again);
        }
    }
    true
}

/// Publishes how many deliveries wait and how old the oldest is.
async fn report_backlog(db: &DatabaseConnection) {
    if let Ok((pending, oldest)) = event_deliveries::backlog(db).await {
        let age = oldest.map_or(0.0, |at| {
            (clock::now() - at).num_milliseconds().max(0) as f64 / 1000.0
        });
        crate::measure::event_backlog(pending, age);
    }
}
