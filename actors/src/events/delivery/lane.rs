//! One endpoint's lane: a task of its own that lives while its endpoint has deliveries due on
//! this node. It queues the deliveries handed to it as they were committed, reads the others
//! (retries, a backlog, what was not handed over) ahead from the table, keeps at most
//! `per_endpoint` attempts in flight (polled here: no task and no actor message per attempt),
//! each on one of the lane's own connections to the endpoint, driven by the lane's task while a
//! request is on it and kept between attempts (no task per connection either), and records the outcomes of those that ended within a few milliseconds of each other
//! together, through the database's writer. A delivery both read and handed over is posted once
//! ([`Held`]). The delivery actor tells it when to look again ([`LaneMsg`]); once it
//! has nothing read, in flight or unrecorded, and nothing more to read, it says so
//! ([`DeliveryMsg::Idle`]) and the actor ends it at its next sweep, unless it has told it
//! something since.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use parley_persistence::entities::{event_delivery, event_webhook};
use parley_persistence::{PersistenceError, clock, event_deliveries};
use ractor::ActorRef;
use tokio::sync::mpsc;
use tokio::time::Instant;

mod handle;
mod held;
mod record;

pub(super) use self::handle::LaneHandle;
use self::held::Held;
use self::record::Recorded;
use super::attempt::{Attempt, Ended, Target};
use super::outcomes::Outcome;
use super::{DeliveryDeps, DeliveryMsg};
use crate::egress::{Connection, Dialer};

/// Most deliveries read ahead of the requests.
const READ_AHEAD: u64 = 64;
/// The queue is read into again when it is shorter than this: the read runs while the
/// half still queued keeps the requests going.
const REFILL_BELOW: usize = READ_AHEAD as usize / 2;
/// Most outcomes recorded in one transaction.
const RECORD_BATCH: usize = 128;
/// How long an outcome waits for others to be recorded with.
const RECORD_AFTER: std::time::Duration = std::time::Duration::from_millis(2);
/// Most deliveries queued: past them, deliveries handed over stay in the table for a read
/// (a slow endpoint under a burst holds no more bodies than these in memory).
const MOST_QUEUED: usize = 1_024;

/// What the delivery actor tells a lane.
pub(super) enum LaneMsg {
    /// Deliveries may be due: the endpoint as just read.
    Look(Box<event_webhook::Model>),
    /// Deliveries were just written for the endpoint, which is as it was.
    Again,
    /// Deliveries were just committed for the endpoint: these, as written, due now. The lane
    /// queues those it does not hold and did not record lately; with its queue full, it reads
    /// them later instead.
    Fresh(Vec<event_delivery::Model>),
    /// The endpoint has nothing due on this node any more (it was disabled or deleted, or
    /// another node owns it now): what is queued is dropped, what is in flight ends.
    Rest,
}

/// A future a lane polls among its others.
type Pending<T> = Pin<Box<dyn Future<Output = T> + Send>>;

/// What a read found, with how often the lane had been asked to read and how many recordings
/// it had made when the read began.
type Read = (
    u64,
    u64,
    Result<Vec<event_delivery::Model>, PersistenceError>,
);

/// The lane's state, owned by its task.
struct Lane {
    deps: Arc<DeliveryDeps>,
    dialer: Dialer,
    actor: ActorRef<DeliveryMsg>,
    target: Arc<Target>,
    /// Connections to the target that took their last answer and wait for the next attempt
    /// (at most `per_endpoint`, with those in flight).
    idle: Vec<Connection>,
    queue: VecDeque<event_delivery::Model>,
    /// The deliveries queued, in flight or not yet recorded, and those recorded lately.
    held: Held,
    running: FuturesUnordered<Pending<Ended>>,
    ended: Vec<Outcome>,
    /// Messages taken from the actor.
    told: u64,
    /// Times the lane was asked to read (a look, or deliveries handed over that it could not
    /// queue): a short read ends the reading only if it began after the last.
    asked: u64,
    /// Whether the endpoint may have a failing streak to end: its deliveries' last recorded
    /// outcomes were failures, or the endpoint was read so. A success records the streak's
    /// end only then (one statement less per recording of a healthy endpoint).
    failing: bool,
    /// Whether a read may find more: false once one came back short, until the next look.
    more: bool,
    /// Told to rest: nothing more is read until the next look.
    resting: bool,
    /// The endpoint was disabled by an outcome recorded here: nothing more is read or started.
    disabled: bool,
    /// Whether the actor was told the lane is idle since its last message.
    said_idle: bool,
}

impl Lane {
    /// Spawns the lane of `endpoint`, which reads at once and takes the actor's messages from
    /// `messages`.
    fn spawn(
        deps: Arc<DeliveryDeps>,
        dialer: Dialer,
        endpoint: &event_webhook::Model,
        actor: ActorRef<DeliveryMsg>,
        messages: mpsc::UnboundedReceiver<LaneMsg>,
    ) {
        let lane = Lane {
            target: Arc::new(Target::new(endpoint, &deps.secrets)),
            deps,
            dialer,
            actor,
            idle: Vec::new(),
            queue: VecDeque::new(),
            held: Held::default(),
            running: FuturesUnordered::new(),
            ended: Vec::new(),
            told: 0,
            asked: 0,
            failing: endpoint.failing_since.is_some(),
            more: true,
            resting: false,
            disabled: false,
            said_idle: false,
        };
        tokio::spawn(lane.run(messages));
    }
}

impl Lane {
    async fn run(mut self, mut messages: mpsc::UnboundedReceiver<LaneMsg>) {
        let per_endpoint = self.deps.settings.per_endpoint;
        let mut reading: Option<Pending<Read>> = None;
        let mut recording: Option<Pending<Recorded>> = None;
        let mut record_at: Option<Instant> = None;
        // One timer for the lane, moved when an outcome starts waiting: a timer made on every
        // turn of the loop was registered with the runtime and dropped again for each outcome.
        let timer = tokio::time::sleep(RECORD_AFTER);
        tokio::pin!(timer);
        loop {
            if reading.is_none() && self.may_read() && self.queue.len() < REFILL_BELOW {
                reading = Some(self.read());
            }
            self.start_attempts(per_endpoint);
            if self.ended.is_empty() {
                record_at = None;
            } else if record_at.is_none() {
                let at = Instant::now() + RECORD_AFTER;
                timer.as_mut().reset(at);
                record_at = Some(at);
            }
            let due = record_at.is_some_and(|at| at <= Instant::now());
            if recording.is_none() && (due || self.ended.len() >= RECORD_BATCH) {
                recording = Some(self.record());
                record_at = None;
            }
            if reading.is_none() && recording.is_none() && self.held.is_empty() {
                self.say_idle();
            }
            tokio::select! {
                message = messages.recv() => match message {
                    Some(message) => self.take(message),
                    None => break,
                },
                Some(ended) = self.running.next(), if !self.running.is_empty() => {
                    self.take_ended(ended);
                }
                read = poll(&mut reading) => {
                    reading = None;
                    self.queue_read(read);
                }
                recorded = poll(&mut recording) => {
                    recording = None;
                    self.let_go(recorded);
                }
                // While a recording runs, its end wakes the loop: the timer, past due then,
                // would be ready at every turn and spin the lane until the commit.
                () = &mut timer, if record_at.is_some() && recording.is_none() => {}
            }
        }
        // The actor stopped: what ended is recorded; what is in flight stays pending and goes
        // again.
        if let Some(recording) = recording {
            let recorded = recording.await;
            self.let_go(recorded);
        }
        if !self.ended.is_empty() {
            let recorded = self.record().await;
            self.let_go(recorded);
        }
    }

    /// Whether the lane reads on.
    fn may_read(&self) -> bool {
        self.more && !self.resting && !self.disabled
    }

    /// Takes the actor's `message`.
    fn take(&mut self, message: LaneMsg) {
        self.told += 1;
        self.said_idle = false;
        match message {
            LaneMsg::Look(endpoint) => {
                self.failing |= endpoint.failing_since.is_some();
                if !self.target.same_as(&endpoint) {
                    self.target = Arc::new(Target::new(&endpoint, &self.deps.secrets));
                    self.idle.clear();
                }
                self.read_again();
            }
            LaneMsg::Again => self.read_again(),
            LaneMsg::Fresh(rows) => {
                if self.disabled || self.queue.len() + rows.len() > MOST_QUEUED {
                    self.read_again();
                    return;
                }
                self.resting = false;
                // A read running now may bring some of these too: it leaves out those held
                // when it began, and `queue_read` those held or recorded since.
                for delivery in rows {
                    if self.held.take_handed(delivery.id) {
                        self.queue.push_back(delivery);
                    }
                }
            }
            LaneMsg::Rest => {
                self.resting = true;
                self.drop_queue();
                self.idle.clear();
            }
        }
    }

    /// Reads on: there may be deliveries due that only a read finds.
    fn read_again(&mut self) {
        self.resting = false;
        self.more = true;
        self.asked += 1;
    }

    /// Reads the next due deliveries (answering how often the lane had been asked to read, and
    /// its recordings, when it began).
    fn read(&self) -> Pending<Read> {
        let db = self.deps.db.clone();
        let (endpoint_id, asked_at) = (self.target.id, self.asked);
        let recordings = self.held.recordings();
        let held = self.held.ids();
        Box::pin(async move {
            let read = event_deliveries::due(&db, endpoint_id, clock::now(), &held, READ_AHEAD);
            (asked_at, recordings, read.await)
        })
    }

    /// Queues what a read found, but for what the lane holds or recorded since the read began
    /// (it may have found those pending). A read that came back short ends the reading until
    /// the lane is asked again, unless it was asked while the read ran.
    fn queue_read(&mut self, (asked_at, recordings, read): Read) {
        let due = match read {
            Ok(due) => due,
            Err(error) => {
                tracing::warn!(%error, "could not read an endpoint's due deliveries");
                self.more = false;
                return;
            }
        };
        if (due.len() as u64) < READ_AHEAD && asked_at == self.asked {
            self.more = false;
        }
        if self.resting || self.disabled {
            return;
        }
        for delivery in due {
            if self.held.take_read(delivery.id, recordings) {
                self.queue.push_back(delivery);
            }
        }
    }

    /// Starts queued deliveries while there is room.
    fn start_attempts(&mut self, per_endpoint: usize) {
        while self.running.len() < per_endpoint && !self.disabled {
            let Some(delivery) = self.queue.pop_front() else {
                break;
            };
            let attempt = Attempt {
                deps: self.deps.clone(),
                dialer: self.dialer.clone(),
                target: self.target.clone(),
                delivery,
            };
            let connection = self.idle.pop();
            self.running.push(Box::pin(attempt.run(connection)));
        }
    }

    /// Takes an attempt's outcome for recording, and its connection back when it posted to
    /// the endpoint as the lane has it now.
    fn take_ended(&mut self, ended: Ended) {
        if let Some(connection) = ended.connection
            && Arc::ptr_eq(&ended.target, &self.target)
        {
            self.idle.push(connection);
        }
        self.ended.push(ended.outcome);
    }

    /// Drops what is queued (it stays pending in the table).
    fn drop_queue(&mut self) {
        self.held
            .release(self.queue.drain(..).map(|delivery| delivery.id));
    }

    /// Tells the actor, once per message taken, that nothing is held and nothing more is to
    /// be read.
    fn say_idle(&mut self) {
        if self.said_idle || self.may_read() {
            return;
        }
        self.said_idle = true;
        let _ = self.actor.send_message(DeliveryMsg::Idle {
            endpoint_id: self.target.id,
            told: self.told,
        });
    }
}

/// Waits for `pending`, or forever when there is none.
async fn poll<T>(pending: &mut Option<Pending<T>>) -> T {
    match pending {
        Some(future) => future.await,
        None => std::future::pending().await,
    }
}
