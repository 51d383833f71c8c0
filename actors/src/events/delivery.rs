//! The delivery actor (`root/events`): works the event deliveries off. Each endpoint is a lane
//! of its own, with at most `per_endpoint` requests in flight and a short queue read ahead from
//! the table, so that a slow or dead endpoint holds up nothing but itself; nothing here runs
//! on a conversation's path. An attempt posts the stored body with the Standard Webhooks
//! headers through the egress-checked client (no redirects), waits at most `timeout`, and
//! settles the row: 2xx succeeds, 410 disables the endpoint, anything else is tried again on
//! the schedule (with jitter, or later when the endpoint asks with `Retry-After`) until the
//! schedule runs out; an endpoint whose deliveries have all failed for `give_up_after` is
//! disabled. A delivery being attempted stays `pending`, so a stop loses none.

mod attempt;

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use parley_persistence::entities::{event_delivery, event_webhook};
use parley_persistence::event_deliveries;
use parley_persistence::{DatabaseConnection, clock};
use ractor::{Actor, ActorProcessingErr, ActorRef};
use uuid::Uuid;

use self::attempt::{Attempt, Outcome};
use super::Events;
use crate::domain::SecretBox;
use crate::egress::Egress;

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

/// Most deliveries of one endpoint read ahead of its requests.
const READ_AHEAD: u64 = 64;

/// Behaviour of the delivery actor.
pub(crate) struct DeliveryWorker;

/// One endpoint's lane: the endpoint as last read, what is in flight and what waits.
struct Lane {
    endpoint: event_webhook::Model,
    running: usize,
    queue: VecDeque<event_delivery::Model>,
    /// Ids in flight or queued: the next read leaves them out.
    held: HashSet<Uuid>,
}

/// State of the delivery actor.
pub(crate) struct DeliveryState {
    deps: Arc<DeliveryDeps>,
    client: reqwest::Client,
    lanes: HashMap<Uuid, Lane>,
    /// Attempts that ended and are not recorded yet: recorded together, a few milliseconds
    /// after the first of them (their ids stay held meanwhile, so no read takes them again).
    ended: Vec<Outcome>,
}

/// Most outcomes recorded in one transaction.
const RECORD_BATCH: usize = 128;
/// How long an outcome waits for others to be recorded with.
const RECORD_AFTER: Duration = Duration::from_millis(2);

/// Messages of the delivery actor.
pub(crate) enum DeliveryMsg {
    /// Events were written: look now.
    Wake,
    /// Time to look for due deliveries and report the backlog.
    Sweep,
    /// An attempt ended.
    Done(Box<Outcome>),
    /// Time to record the attempts that ended.
    Record,
    /// Attempts were recorded (or could not be): their ids may go; these endpoints were
    /// disabled.
    Recorded {
        /// The deliveries recorded, by endpoint.
        ended: Vec<(Uuid, Uuid)>,
        /// Endpoints disabled, with their workspaces.
        disabled: Vec<(Uuid, i64)>,
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
            client: deps.egress.client(deps.settings.timeout),
            deps,
            lanes: HashMap::new(),
            ended: Vec::new(),
        })
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        // What ended is recorded; what was in flight stays pending and goes again.
        let ended = std::mem::take(&mut state.ended);
        let deps = &state.deps;
        if let Err(error) =
            attempt::record(&deps.db, &deps.events, &ended, deps.settings.give_up_after).await
        {
            tracing::warn!(%error, "could not record event deliveries");
        }
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
                state.deps.events.woken();
                look(state, &myself).await;
            }
            DeliveryMsg::Sweep => {
                look(state, &myself).await;
                report_backlog(&state.deps.db).await;
            }
            DeliveryMsg::Done(outcome) => {
                if let Some(lane) = state.lanes.get_mut(&outcome.endpoint_id) {
                    lane.running = lane.running.saturating_sub(1);
                }
                if state.ended.is_empty() {
                    myself.send_after(RECORD_AFTER, || DeliveryMsg::Record);
                }
                let endpoint_id = outcome.endpoint_id;
                state.ended.push(*outcome);
                if state.ended.len() >= RECORD_BATCH {
                    record_behind(state, &myself);
                }
                top_up(state, endpoint_id, &myself).await;
            }
            DeliveryMsg::Record => record_behind(state, &myself),
            DeliveryMsg::Recorded { ended, disabled } => {
                for endpoint_id in let_go(state, &ended, disabled) {
                    top_up(state, endpoint_id, &myself).await;
                }
            }
        }
        Ok(())
    }
}

/// Opens a lane for every enabled endpoint with deliveries due, reads ahead where a lane runs
/// short, and starts what the lanes have room for; forgets idle lanes of endpoints with
/// nothing due.
async fn look(state: &mut DeliveryState, myself: &ActorRef<DeliveryMsg>) {
    let due = match event_deliveries::endpoints_due(&state.deps.db, clock::now()).await {
        Ok(due) => state.deps.placement.keep_owned(due, |endpoint| endpoint.id),
        Err(error) => {
            tracing::warn!(%error, "could not read the due event deliveries");
            return;
        }
    };
    let due_ids: HashSet<Uuid> = due.iter().map(|e| e.id).collect();
    state
        .lanes
        .retain(|id, lane| due_ids.contains(id) || !lane.held.is_empty());
    for endpoint in due {
        let id = endpoint.id;
        let lane = state.lanes.entry(id).or_insert_with(|| Lane {
            endpoint: endpoint.clone(),
            running: 0,
            queue: VecDeque::new(),
            held: HashSet::new(),
        });
        lane.endpoint = endpoint;
        if lane.queue.len() < state.deps.settings.per_endpoint {
            fill(&state.deps.db, lane).await;
        }
        pump(state, id, myself);
    }
}

/// Refills the lane's queue when it runs short, and starts what it has room for.
async fn top_up(state: &mut DeliveryState, endpoint_id: Uuid, myself: &ActorRef<DeliveryMsg>) {
    let per_endpoint = state.deps.settings.per_endpoint;
    let Some(lane) = state.lanes.get_mut(&endpoint_id) else {
        return;
    };
    if lane.queue.len() < per_endpoint {
        fill(&state.deps.db, lane).await;
    }
    pump(state, endpoint_id, myself);
}

/// Records the attempts that ended in one transaction, in a task of its own (new attempts
/// start meanwhile); their ids stay held until it is done.
fn record_behind(state: &mut DeliveryState, myself: &ActorRef<DeliveryMsg>) {
    if state.ended.is_empty() {
        return;
    }
    let ended = std::mem::take(&mut state.ended);
    let (deps, myself) = (state.deps.clone(), myself.clone());
    tokio::spawn(async move {
        let disabled = match attempt::record(
            &deps.db,
            &deps.events,
            &ended,
            deps.settings.give_up_after,
        )
        .await
        {
            Ok(disabled) => disabled,
            Err(error) => {
                // Left pending: attempted again once the lanes let them go.
                tracing::warn!(%error, "could not record event deliveries");
                Vec::new()
            }
        };
        let ended = ended
            .iter()
            .map(|o| (o.endpoint_id, o.delivery_id))
            .collect();
        let _ = myself.send_message(DeliveryMsg::Recorded { ended, disabled });
    });
}

/// Lets recorded deliveries' ids go; a disabled endpoint's lane is emptied and its
/// workspace's routes read again. Answers the endpoints whose lanes may take more now.
fn let_go(
    state: &mut DeliveryState,
    ended: &[(Uuid, Uuid)],
    disabled: Vec<(Uuid, i64)>,
) -> Vec<Uuid> {
    let mut touched: Vec<Uuid> = Vec::new();
    for (endpoint_id, delivery_id) in ended {
        if let Some(lane) = state.lanes.get_mut(endpoint_id) {
            lane.held.remove(delivery_id);
        }
        if !touched.contains(endpoint_id) {
            touched.push(*endpoint_id);
        }
    }
    for (endpoint_id, workspace_id) in disabled {
        tracing::warn!(%endpoint_id, "event webhook endpoint disabled");
        state.lanes.remove(&endpoint_id);
        touched.retain(|id| *id != endpoint_id);
        // This node's routes left it out before the commit; the other nodes' read theirs
        // again now.
        state
            .deps
            .changes
            .announce(&crate::changes::Change::EventRoutes { workspace_id });
    }
    touched
}

/// Reads the lane's next due deliveries into its queue.
async fn fill(db: &DatabaseConnection, lane: &mut Lane) {
    let held: Vec<Uuid> = lane.held.iter().copied().collect();
    let read = event_deliveries::due(db, lane.endpoint.id, clock::now(), &held, READ_AHEAD);
    match read.await {
        Ok(due) => {
            for delivery in due {
                if lane.held.insert(delivery.id) {
                    lane.queue.push_back(delivery);
                }
            }
        }
        Err(error) => tracing::warn!(%error, "could not read an endpoint's due deliveries"),
    }
}

/// Starts queued deliveries of the lane while it has room.
fn pump(state: &mut DeliveryState, endpoint_id: Uuid, myself: &ActorRef<DeliveryMsg>) {
    let per_endpoint = state.deps.settings.per_endpoint;
    let Some(lane) = state.lanes.get_mut(&endpoint_id) else {
        return;
    };
    while lane.running < per_endpoint {
        let Some(delivery) = lane.queue.pop_front() else {
            break;
        };
        lane.running += 1;
        let attempt = Attempt {
            deps: state.deps.clone(),
            client: state.client.clone(),
            endpoint: lane.endpoint.clone(),
            delivery,
        };
        let myself = myself.clone();
        tokio::spawn(async move {
            let outcome = attempt.run().await;
            let _ = myself.send_message(DeliveryMsg::Done(Box::new(outcome)));
        });
    }
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
