//! `[actors]`: conversations, the inbound pipeline, the scheduler, handoffs and event
//! deliveries.

use std::time::Duration;

use parley_actors::events::delivery::EventSettings;
use parley_actors::inbound::worker::InboundSettings;
use serde::{Deserialize, Serialize};

/// `[actors]`: conversations and the inbound pipeline.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(default)]
pub struct ActorSettings {
    /// Hours without messages after which the next message starts a new conversation.
    pub conversation_idle_hours: u64,
    /// Milliseconds without turns after which an identity's conversation actor rests: it
    /// stops, and what it cached about the identity is kept without a task until
    /// `conversation_actor_idle_secs`.
    pub conversation_actor_rest_ms: u64,
    /// Live conversation actors that wait the whole rest; an actor started while this many or
    /// more are live rests after `conversation_actor_busy_rest_ms` instead.
    pub conversation_actors_warm: usize,
    /// Milliseconds without turns after which an actor started on a busy server rests (at
    /// most `conversation_actor_rest_ms`).
    pub conversation_actor_busy_rest_ms: u64,
    /// Seconds without turns after which what Parley keeps about an identity is dropped.
    pub conversation_actor_idle_secs: u64,
    /// Longest an API chat call waits for its turn, in seconds.
    pub turn_timeout_secs: u64,
    /// Webhook events answered at the same time.
    pub inbound_concurrency: usize,
    /// Webhook events held in memory beyond those being answered, per workspace.
    pub inbound_queue: usize,
    /// Model calls a workspace may have in flight at once (0: no bound), so that one
    /// business's burst leaves the model's capacity open to the others.
    pub model_calls_per_workspace: usize,
    /// First retry delay of an event after a transient failure, in milliseconds; doubles.
    pub inbound_retry_base_ms: u64,
    /// Longest retry delay of an event, in seconds.
    pub inbound_retry_max_secs: u64,
    /// How often the events table is swept for due retries, in milliseconds.
    pub inbound_sweep_ms: u64,
    /// Comma-separated words that, sent alone on WhatsApp, opt the person out of campaign
    /// templates (compared ignoring case).
    pub stop_words: String,
    /// How often the scheduler sweeps the tasks table, in milliseconds; tasks due within one
    /// sweep get a live actor (tasks created or resumed inside it, at once).
    pub scheduler_sweep_ms: u64,
    /// Most scheduled, paused or running tasks a workspace may have.
    pub scheduler_task_quota: u64,
    /// Shortest time between two runs a recurrence may ask for, in seconds.
    pub scheduler_min_interval_secs: u64,
    /// Runs kept per task: older ones are deleted as new ones are recorded.
    pub scheduler_runs_kept: u64,
    /// How often conversations handed to a person are looked at for their automatic return
    /// to the assistant, in milliseconds.
    pub handoff_sweep_ms: u64,
    /// How often the event webhook deliveries are looked at for retries that fell due, in
    /// milliseconds (new events are delivered at once).
    pub event_delivery_sweep_ms: u64,
    /// Most event deliveries in flight to one endpoint at once (at least 1).
    pub event_delivery_per_endpoint: usize,
}

impl Default for ActorSettings {
    fn default() -> Self {
        let inbound = InboundSettings::default();
        Self {
            conversation_idle_hours: 24,
            conversation_actor_rest_ms: 5_000,
            conversation_actors_warm: 1_000,
            conversation_actor_busy_rest_ms: 1_000,
            conversation_actor_idle_secs: 600,
            turn_timeout_secs: 300,
            inbound_concurrency: inbound.concurrency,
            inbound_queue: inbound.queue,
            model_calls_per_workspace: 64,
            inbound_retry_base_ms: millis(inbound.retry_base),
            inbound_retry_max_secs: inbound.retry_max.as_secs(),
            inbound_sweep_ms: millis(inbound.sweep_every),
            stop_words: inbound.stop_words.join(","),
            scheduler_sweep_ms: 60_000,
            scheduler_task_quota: 1_000,
            scheduler_min_interval_secs: 60,
            scheduler_runs_kept: 100,
            handoff_sweep_ms: 30_000,
            event_delivery_sweep_ms: 1_000,
            event_delivery_per_endpoint: EventSettings::default().per_endpoint,
        }
    }
}

impl ActorSettings {
    /// The idle time after which a conversation closes.
    pub fn conversation_idle(&self) -> chrono::Duration {
        let hours = i64::try_from(self.conversation_idle_hours).unwrap_or(i64::MAX);
        chrono::Duration::try_hours(hours).unwrap_or(chrono::Duration::MAX)
    }

    /// How long a conversation actor waits for a turn before it rests: never longer than
    /// Parley keeps the identity.
    pub fn conversation_actor_rest(&self) -> Duration {
        Duration::from_millis(self.conversation_actor_rest_ms)
            .min(Duration::from_secs(self.conversation_actor_idle_secs))
    }
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}
