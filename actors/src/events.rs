//! Event webhooks: what the business's own systems hear of what happened (a message arrived,
//! was delivered, read or failed; a conversation was handed to a person; a flow finished; a
//! task ran; a person opted out), signed by Standard Webhooks 1.0.
//!
//! - [`Events`] knows which endpoints of a workspace take which event types. Where a fact is
//!   written, [`Events::event`] makes its event for those endpoints (nothing at all when none
//!   takes it), and the fact's own write stores it ([`Recorded::write`]): one durable row per
//!   endpoint, committed with the fact or not at all.
//! - [`delivery`]: the supervised actor that works the rows off, at most a few requests in
//!   flight per endpoint, retried on a schedule, each endpoint apart from the others.
//! - [`sign`]: secrets and signatures.
//! - `wake`: telling the delivery actor, once per burst, what was written: the deliveries
//!   just committed ([`Handover`]), or that it is to look at every endpoint.

pub mod delivery;
mod routes;
pub mod sign;
mod wake;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use chrono::{DateTime, Utc};
use parley_persistence::event_deliveries::{self, Addressed, NewEvent};
use parley_persistence::{
    ConnectionTrait, DatabaseExecutor, EventType, GroupCommit, MessageStatus, PersistenceError,
    Writes, clock, event_webhooks,
};
use serde_json::{Value, json};
use uuid::Uuid;

use self::delivery::DeliveryMsg;
use self::routes::Routes;
pub use self::wake::Handover;
use self::wake::Told;
use crate::changes::{Change, Listener};
use crate::tree::{Slot, SupervisorKind};

/// Which endpoints take which events, and how to wake the delivery actor; cheap to clone.
#[derive(Clone, Debug)]
pub struct Events {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    /// The enabled endpoints of each workspace that has any.
    routes: RwLock<Routes>,
    /// Counts the reads of the routes begun: each is applied only over older ones.
    reads: AtomicU64,
    /// Where the delivery actor is published.
    slot: Slot<DeliveryMsg>,
    /// Set while a wake-up is on its way, so that a burst of facts sends one.
    waking: AtomicBool,
    /// What the wake-ups on their way are for: the endpoints written to, or every endpoint
    /// (`all`: a writer that did not say which).
    told: Mutex<Told>,
    /// Counts the reads of the routes applied: a lane that took its endpoint before the last
    /// one may hold it as it was (its URL, its secrets), and is told to look again.
    generation: AtomicU64,
}

impl Default for Events {
    fn default() -> Self {
        Self {
            inner: Arc::new(Inner {
                routes: RwLock::default(),
                reads: AtomicU64::new(0),
                slot: Slot::new(SupervisorKind::Events),
                waking: AtomicBool::new(false),
                told: Mutex::default(),
                generation: AtomicU64::new(0),
            }),
        }
    }
}

/// Reads a workspace's routes again when its endpoints changed, on this node or another
/// ([`Change::EventRoutes`]): no fact written afterwards is written for an endpoint that no
/// longer takes it.
#[derive(Debug)]
pub struct RoutesListener {
    events: Events,
    db: parley_persistence::DatabaseConnection,
}

impl RoutesListener {
    /// A listener keeping `events` as `db` says.
    pub fn new(events: Events, db: parley_persistence::DatabaseConnection) -> Self {
        Self { events, db }
    }
}

impl Listener for RoutesListener {
    fn changed(&self, change: &Change) {
        let Change::EventRoutes { workspace_id } = *change else {
            return;
        };
        let (events, db) = (self.events.clone(), self.db.clone());
        tokio::spawn(async move {
            if let Err(error) = events.reload(&db, Some(workspace_id)).await {
                tracing::warn!(%error, workspace_id, "event routes not read again");
            }
        });
    }
}

/// What an event of a message to a person says: which message, where, to whom, how it went.
#[derive(Clone, Copy, Debug)]
pub struct MessageTold<'a> {
    /// The workspace.
    pub workspace_id: i64,
    /// The stored message.
    pub message_id: Uuid,
    /// Its channel.
    pub channel_id: Uuid,
    /// The person, when known.
    pub identity_id: Option<Uuid>,
    /// Meta's id of the message, when it has one.
    pub platform_message_id: Option<&'a str>,
    /// Why it failed.
    pub error: Option<&'a Value>,
    /// The operator who wrote it, when one did.
    pub operator: Option<&'a crate::whatsapp::Author>,
}

/// The event type of a message to a person reaching `status` (`None` for a status no event
/// tells of).
pub fn message_event(status: MessageStatus) -> Option<EventType> {
    match status {
        MessageStatus::Sent => Some(EventType::MessageSent),
        MessageStatus::Delivered => Some(EventType::MessageDelivered),
        MessageStatus::Read => Some(EventType::MessageRead),
        MessageStatus::Failed => Some(EventType::MessageFailed),
        _ => None,
    }
}

/// An event made for the endpoints that take it, to be written with its fact.
#[derive(Clone, Debug)]
pub struct Recorded {
    addressed: Addressed,
}

impl Recorded {
    /// Writes one delivery per endpoint on `db`: call it inside the fact's transaction.
    ///
    /// # Errors
    /// The database's.
    pub async fn write(
        &self,
        db: &impl ConnectionTrait,
        now: DateTime<Utc>,
    ) -> Result<(), PersistenceError> {
        event_deliveries::insert(db, &self.addressed, now).await
    }

    /// The event's id (`webhook-id`).
    pub fn id(&self) -> Uuid {
        self.addressed.event().id
    }

    /// The event and its endpoints, for a merged write to carry with its fact (wake the
    /// delivery actor once it committed: [`Handover`], [`Events::committed`]).
    pub fn into_addressed(self) -> Addressed {
        self.addressed
    }
}

impl Events {
    /// How many times the routes were read: see [`Inner::generation`].
    pub(crate) fn generation(&self) -> u64 {
        self.inner.generation.load(Ordering::Acquire)
    }

    /// Where the delivery actor is published.
    pub(crate) fn slot(&self) -> &Slot<DeliveryMsg> {
        &self.inner.slot
    }

    /// Whether an enabled endpoint of `workspace_id` takes `kind`: what a writer asks before
    /// it reads more than its fact needs for the event's data.
    pub fn wanted(&self, workspace_id: i64, kind: EventType) -> bool {
        self.inner.routes.read().is_ok_and(|routes| {
            routes
                .of(workspace_id)
                .is_some_and(|r| r.iter().any(|route| route.takes(kind)))
        })
    }

    /// The event of `kind` in `workspace_id` with `data` (read only when some endpoint takes
    /// it), for every enabled endpoint of the workspace that takes it; `None` when none does.
    pub fn event(
        &self,
        workspace_id: i64,
        kind: EventType,
        data: impl FnOnce() -> Value,
    ) -> Option<Recorded> {
        let endpoints: Vec<Uuid> = {
            let routes = self.inner.routes.read().ok()?;
            routes
                .of(workspace_id)?
                .iter()
                .filter(|route| route.takes(kind))
                .map(|route| route.endpoint_id)
                .collect()
        };
        if endpoints.is_empty() {
            return None;
        }
        let id = Uuid::now_v7();
        let body = json!({
            "type": kind.as_str(),
            "timestamp": clock::now(),
            "data": data(),
        });
        Some(Recorded {
            addressed: Addressed::new(
                NewEvent {
                    id,
                    event_type: kind,
                    workspace_id,
                    body: body.to_string(),
                },
                endpoints,
            ),
        })
    }

    /// Runs `work` through `writer` with `recorded` written in the same transaction (one
    /// commit: the fact and its events, or neither), then wakes the delivery actor. Without
    /// events, it is `work` alone, as the writer would run it.
    ///
    /// # Errors
    /// What `work` answered, or the database's.
    pub async fn write_with<T, F>(
        &self,
        writer: &GroupCommit,
        recorded: Vec<Recorded>,
        work: F,
    ) -> Result<T, PersistenceError>
    where
        T: Send + 'static,
        F: for<'e> Fn(&'e DatabaseExecutor<'e>) -> Writes<'e, T> + Send + Sync + 'static,
    {
        self.write_then_wake(writer, recorded, work, false).await
    }

    /// As [`Events::write_with`], for `work` of several statements that must commit together
    /// even without events.
    ///
    /// # Errors
    /// As [`Events::write_with`].
    pub async fn write_atomic_with<T, F>(
        &self,
        writer: &GroupCommit,
        recorded: Vec<Recorded>,
        work: F,
    ) -> Result<T, PersistenceError>
    where
        T: Send + 'static,
        F: for<'e> Fn(&'e DatabaseExecutor<'e>) -> Writes<'e, T> + Send + Sync + 'static,
    {
        self.write_then_wake(writer, recorded, work, true).await
    }

    async fn write_then_wake<T, F>(
        &self,
        writer: &GroupCommit,
        recorded: Vec<Recorded>,
        work: F,
        atomic: bool,
    ) -> Result<T, PersistenceError>
    where
        T: Send + 'static,
        F: for<'e> Fn(&'e DatabaseExecutor<'e>) -> Writes<'e, T> + Send + Sync + 'static,
    {
        if recorded.is_empty() {
            return if atomic {
                writer.write_atomic(work).await
            } else {
                writer.write(work).await
            };
        }
        let handover = Handover::of(recorded.iter().map(|r| &r.addressed));
        let (work, recorded) = (Arc::new(work), Arc::new(recorded));
        let written = writer
            .write_atomic(move |db| {
                let (work, recorded) = (work.clone(), recorded.clone());
                Box::pin(async move {
                    let done = work(db).await?;
                    let now = clock::now();
                    for event in recorded.iter() {
                        event.write(db, now).await?;
                    }
                    Ok(done)
                })
            })
            .await?;
        self.committed(handover);
        Ok(written)
    }

    /// The event of a message to a person reaching `status`: `message.sent`, `.delivered`,
    /// `.read` or `.failed` (`None` for other statuses, or when no endpoint takes it).
    pub fn message(&self, status: MessageStatus, told: MessageTold<'_>) -> Option<Recorded> {
        let kind = message_event(status)?;
        self.event(told.workspace_id, kind, || {
            json!({
                "message_id": told.message_id,
                "channel_id": told.channel_id,
                "identity_id": told.identity_id,
                "status": status,
                "platform_message_id": told.platform_message_id,
                "error": told.error,
                "operator": told.operator,
            })
        })
    }

    /// Reads the enabled endpoints of `workspace_id` (of every workspace for `None`) again;
    /// what it read is left out when a read begun after it was applied first.
    ///
    /// # Errors
    /// The database's; the routes are left as they were.
    pub async fn reload(
        &self,
        db: &impl ConnectionTrait,
        workspace_id: Option<i64>,
    ) -> Result<(), PersistenceError> {
        let read = self.inner.reads.fetch_add(1, Ordering::AcqRel) + 1;
        let endpoints = event_webhooks::enabled(db, workspace_id).await?;
        let Ok(mut routes) = self.inner.routes.write() else {
            return Ok(());
        };
        if routes.apply(read, workspace_id, &endpoints) {
            self.inner.generation.fetch_add(1, Ordering::AcqRel);
        } else {
            tracing::debug!(
                ?workspace_id,
                "a read of event routes older than those held was left out"
            );
        }
        Ok(())
    }
}
