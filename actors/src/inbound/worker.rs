//! The inbound worker (`root/inbound`): answers stored webhook events, at most `concurrency`
//! at a time and one at a time per sender, so that a person's messages are answered in order.
//! A burst waits in the database, not in memory: the worker holds a bounded queue and, when
//! it is full, reads the rest from the events table as it catches up. Events that failed on
//! a transient error are tried again after a capped, growing backoff, found by a periodic
//! sweep of the table, which also picks up whatever was left at a restart.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use parley_persistence::entities::webhook_event;
use parley_persistence::{clock, webhook_events};
use ractor::{Actor, ActorProcessingErr, ActorRef};
use uuid::Uuid;

mod queues;
mod sweep;

use self::queues::Queues;
use self::sweep::{sweep, sweep_told};
pub use super::settings::InboundSettings;
use super::{InboundDeps, Processed, process};
use crate::tree::{ActorPath, SupervisorKind};
use crate::whatsapp::payload::{InboundMessage, Unreadable};

/// Behaviour of the inbound worker.
pub(crate) struct InboundWorker;

/// What it starts with.
pub(crate) struct InboundWorkerArgs {
    pub(crate) settings: InboundSettings,
    pub(crate) deps: InboundDeps,
}

/// Who sent an event: a person on a channel. Their events are answered one at a time.
type Sender = (Uuid, String);

/// Whether an event came straight from the webhook that stored it, not from the table (a
/// retry, or one left at a restart or when the queue was full): nothing can have been
/// stored for it yet.
type Fresh = bool;

/// An event being answered: its sender and workspace.
type Running = (Sender, i64);

/// An event waiting its turn.
struct Waiting {
    event: webhook_event::Model,
    /// Its message, read once when the event is taken, for its sender and its answer.
    read: Result<InboundMessage, Unreadable>,
    sender: Sender,
    fresh: Fresh,
}

/// State of the inbound worker.
pub(crate) struct InboundWorkerState {
    settings: InboundSettings,
    deps: InboundDeps,
    path: ActorPath,
    /// Events being answered, with their sender and workspace.
    running: HashMap<Uuid, Running>,
    /// Senders with an event being answered.
    busy: HashSet<Sender>,
    /// Events waiting their turn, by workspace, each's oldest first and each bounded by
    /// `settings.queue`; taken round-robin across workspaces.
    waiting: Queues,
    /// Every event id the worker holds (running or waiting), so a sweep does not take one twice.
    known: HashSet<Uuid>,
    /// Whether events may be waiting in the database that the worker does not hold.
    behind: bool,
    /// Whether a sweep asked for by [`InboundWorkerMsg::SweepNow`] is already on its way:
    /// news of many events stored elsewhere is read with one sweep.
    sweep_soon: bool,
    /// Whether that sweep reads every due event (partitions were taken over), not only those
    /// told of.
    sweep_all_soon: bool,
    /// Events another node stored for a channel of this one and told it of, until a sweep
    /// reads them: as fresh as the webhook's own, since only the channel's owner answers an
    /// event and the node that stored it did not own the channel. (Should an earlier attempt
    /// have stored the message after all, storing it again is refused by the unique WhatsApp
    /// id, and the event's retry resumes that attempt.) The sweep news brings on reads only
    /// these, by id: a full sweep would take events whose news is still on its way, as
    /// retries.
    told_fresh: HashSet<Uuid>,
}

/// How long news of events stored elsewhere gathers before the sweep that reads them.
const SWEEP_SOON: Duration = Duration::from_millis(5);

/// Messages of the inbound worker.
pub(crate) enum InboundWorkerMsg {
    /// The webhook stored this event.
    Stored(Box<webhook_event::Model>),
    /// An event's processing ended.
    Done(Uuid),
    /// Read due events from the database, and again after the sweep period.
    Sweep,
    /// Read due events soon (a cluster node was told of events for its channels, or took
    /// partitions over), once for all the news of the next few milliseconds; the periodic
    /// sweep goes on as it was. With the event another node has just stored, when told of
    /// one.
    SweepNow(Option<Uuid>),
    /// The sweep `SweepNow` asked for.
    SweepSoon,
    /// How many events are being answered (of one workspace, when given).
    Count(Option<i64>, ractor::RpcReplyPort<usize>),
}

impl Actor for InboundWorker {
    type Msg = InboundWorkerMsg;
    type State = InboundWorkerState;
    type Arguments = InboundWorkerArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<Self::Msg>,
        args: InboundWorkerArgs,
    ) -> Result<Self::State, ActorProcessingErr> {
        // Whatever was left at the last stop is picked up at once.
        let _ = myself.send_message(InboundWorkerMsg::Sweep);
        Ok(InboundWorkerState {
            settings: args.settings,
            deps: args.deps,
            path: ActorPath::supervisor(SupervisorKind::Inbound),
            running: HashMap::new(),
            busy: HashSet::new(),
            waiting: Queues::default(),
            known: HashSet::new(),
            behind: true,
            sweep_soon: false,
            sweep_all_soon: false,
            told_fresh: HashSet::new(),
        })
    }

    #[tracing::instrument(name = "inbound_worker", skip_all, fields(actor = %state.path))]
    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        message: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            InboundWorkerMsg::Stored(event) => {
                hold(state, *event, true);
                start_ready(state, &myself);
            }
            InboundWorkerMsg::Done(id) => {
                if let Some((sender, _)) = state.running.remove(&id) {
                    state.busy.remove(&sender);
                }
                state.known.remove(&id);
                start_ready(state, &myself);
                if state.waiting.is_empty() && state.behind {
                    sweep(state).await;
                    start_ready(state, &myself);
                }
            }
            InboundWorkerMsg::Count(workspace, reply) => {
                let running = state
                    .running
                    .values()
                    .filter(|(_, ws)| workspace.is_none_or(|w| w == *ws))
                    .count();
                let _ = reply.send(running);
            }
            InboundWorkerMsg::Sweep => {
                sweep(state).await;
                start_ready(state, &myself);
                myself.send_after(state.settings.sweep_every, || InboundWorkerMsg::Sweep);
            }
            InboundWorkerMsg::SweepNow(told) => {
                match told {
                    Some(id) if state.told_fresh.len() < state.settings.queue => {
                        state.told_fresh.insert(id);
                    }
                    // Too many told of to keep: the sweep reads everything due instead.
                    Some(_) | None => state.sweep_all_soon = true,
                }
                if !state.sweep_soon {
                    state.sweep_soon = true;
                    myself.send_after(SWEEP_SOON, || InboundWorkerMsg::SweepSoon);
                }
            }
            InboundWorkerMsg::SweepSoon => {
                state.sweep_soon = false;
                if std::mem::take(&mut state.sweep_all_soon) {
                    sweep(state).await;
                } else {
                    sweep_told(state).await;
                }
                start_ready(state, &myself);
            }
        }
        Ok(())
    }
}

/// Keeps `event` in the queue, or leaves it to the database when the queue is full.
fn hold(state: &mut InboundWorkerState, event: webhook_event::Model, fresh: Fresh) {
    if state.known.contains(&event.id) {
        return;
    }
    if state.waiting.len_of(event.workspace_id) >= state.settings.queue {
        state.behind = true;
        return;
    }
    let read = InboundMessage::from_stored(&event.payload);
    let sender = sender_of(&event, &read);
    state.known.insert(event.id);
    state.waiting.push(Waiting {
        event,
        read,
        sender,
        fresh,
    });
}

/// Starts waiting events while there is capacity, the workspaces in turn and each's oldest
/// first, skipping senders that have an event under way (their later events keep their place).
fn start_ready(state: &mut InboundWorkerState, myself: &ActorRef<InboundWorkerMsg>) {
    while state.running.len() < state.settings.concurrency {
        let Some(Waiting {
            event,
            read,
            sender,
            fresh,
        }) = state.waiting.next(&state.busy)
        else {
            break;
        };
        state.busy.insert(sender.clone());
        state.running.insert(event.id, (sender, event.workspace_id));
        let deps = state.deps.clone();
        let settings = state.settings.clone();
        let worker = myself.clone();
        tokio::spawn(async move {
            let id = event.id;
            let processed = process(&deps, &event, read, fresh).await;
            settle(&deps, &settings, &event, processed).await;
            let _ = worker.send_message(InboundWorkerMsg::Done(id));
        });
    }
}

/// Records how processing ended: done, failed for good, or due again after a backoff.
async fn settle(
    deps: &InboundDeps,
    settings: &InboundSettings,
    event: &webhook_event::Model,
    processed: Processed,
) {
    let (writer, id, now) = (&deps.writer, event.id, clock::now());
    let answered = webhook_events::Answered { id, now };
    let recorded = match processed {
        Processed::Answered | Processed::Held => writer.write_merged(answered).await,
        Processed::Refused(why) => {
            tracing::warn!(event_id = %event.id, %why, "inbound message not answered");
            writer
                .write(move |db| Box::pin(webhook_events::finish(db, id, Some(why.clone()), now)))
                .await
        }
        Processed::Retry(why) => {
            let attempts = event.attempts.saturating_add(1);
            let wait = settings.backoff(event.attempts);
            let at =
                now + chrono::Duration::from_std(wait).unwrap_or(chrono::Duration::seconds(300));
            tracing::warn!(event_id = %event.id, %why, attempts, ?wait, "inbound message will be tried again");
            writer
                .write(move |db| {
                    Box::pin(webhook_events::retry_later(
                        db,
                        id,
                        attempts,
                        at,
                        why.clone(),
                    ))
                })
                .await
        }
    };
    if let Err(error) = recorded {
        tracing::error!(event_id = %event.id, %error, "the outcome of an event could not be recorded");
    }
}

/// The sender of an event; an unreadable event is its own sender.
fn sender_of(event: &webhook_event::Model, read: &Result<InboundMessage, Unreadable>) -> Sender {
    let from = read
        .as_ref()
        .map_or_else(|_| event.id.to_string(), |m| m.from.to_string());
    (event.channel_id, from)
}
