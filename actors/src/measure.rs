//! What the runtime counts and times, through the `metrics` facade (the server installs the
//! Prometheus recorder; without one, every call here is a no-op). Every metric the actors
//! emit is named here, once. Labels are small closed sets (outcomes, kinds, Meta's error
//! codes): never an id of a person, a message or a secret.

use std::time::Duration;

use metrics::{
    Unit, counter, describe_counter, describe_gauge, describe_histogram, gauge, histogram,
};

/// Model calls by mode (`complete`, `stream`) and outcome (`ok`, `error`).
pub const MODEL_REQUESTS: &str = "parley_model_requests_total";
/// Time of a model call, whole (retries included).
pub const MODEL_SECONDS: &str = "parley_model_request_seconds";
/// Time from the start of a streamed model call to its first token.
pub const MODEL_FIRST_TOKEN: &str = "parley_model_first_token_seconds";
/// Turns by origin (`api`, `whatsapp`, `follow_up`) and outcome (`ok`, `fallback`, `error`).
pub const TURNS: &str = "parley_turns_total";
/// Time of a turn inside its conversation actor (model calls included).
pub const TURN_SECONDS: &str = "parley_turn_seconds";
/// Tool calls by source (`builtin`, `mcp`) and outcome (`ok`, `error`).
pub const TOOL_CALLS: &str = "parley_tool_calls_total";
/// Graph API send attempts by outcome (`sent`, `failed`) and Meta's error code (`none`).
pub const GRAPH_SENDS: &str = "parley_whatsapp_sends_total";
/// Time a send waited for the number's and the recipient's rate limits.
pub const LIMITER_WAIT: &str = "parley_whatsapp_limiter_wait_seconds";
/// Actors that failed, by kind.
pub const ACTOR_FAILURES: &str = "parley_actor_failures_total";
/// Supervisors restarted by the root, by kind.
pub const ACTOR_RESTARTS: &str = "parley_actor_restarts_total";
/// Flow recipients reaching a state (`sent`, `failed`, `skipped`, …).
pub const FLOW_RECIPIENTS: &str = "parley_flow_recipients_total";
/// Scheduled-task runs by outcome (`succeeded`, `failed`).
pub const TASK_RUNS: &str = "parley_scheduled_task_runs_total";
/// Conversations handed to a person, by who asked (`api`, `tool`).
pub const HANDOFFS: &str = "parley_handoffs_total";
/// Conversations given back to the assistant, by why (`api`, `timeout`).
pub const RESUMES: &str = "parley_handoff_resumes_total";
/// Operators' messages to people, by outcome (`sent`, `failed`).
pub const OPERATOR_MESSAGES: &str = "parley_operator_messages_total";
/// Event webhook attempts by outcome (`succeeded`, `retried`, `failed`).
pub const EVENT_DELIVERIES: &str = "parley_event_deliveries_total";
/// Event webhook deliveries waiting (pending).
pub const EVENT_BACKLOG: &str = "parley_event_deliveries_pending";
/// Age of the oldest pending event webhook delivery.
pub const EVENT_OLDEST: &str = "parley_event_delivery_oldest_pending_seconds";
/// Partitions this node holds (a cluster member).
pub const CLUSTER_PARTITIONS: &str = "parley_cluster_partitions_owned";
/// Partitions this node took over, by how (`free`: nobody held it, `expired`: its holder's
/// lease ran out, so the work it left is resumed as after a crash).
pub const CLUSTER_TAKEOVERS: &str = "parley_cluster_takeovers_total";
/// Calls sent to the owning node, by kind (`turn`, `streamed_turn`, `mode`, `send`, `graph`)
/// and outcome (`ok`, `retried`, `error`).
pub const CLUSTER_FORWARDS: &str = "parley_cluster_forwards_total";
/// Media fetches by outcome (`stored`, `retried`, `failed`).
pub const MEDIA_FETCHES: &str = "parley_media_fetches_total";
/// Quotas that refused work, by quota (the first refusal of each in its period, per node).
pub const QUOTAS_REACHED: &str = "parley_quotas_reached_total";
/// Bytes of media kept in the media store.
pub const MEDIA_BYTES: &str = "parley_media_stored_bytes_total";

/// Gives every metric above its help text and unit; call once after installing a recorder.
pub fn describe() {
    describe_counter!(MODEL_REQUESTS, "Model calls by mode and outcome");
    describe_histogram!(MODEL_SECONDS, Unit::Seconds, "Time of a model call");
    describe_histogram!(
        MODEL_FIRST_TOKEN,
        Unit::Seconds,
        "Time to the first token of a streamed model call"
    );
    describe_counter!(TURNS, "Conversation turns by origin and outcome");
    describe_gauge!(CLUSTER_PARTITIONS, "Partitions this cluster node holds");
    describe_counter!(CLUSTER_TAKEOVERS, "Partitions this node took over");
    describe_counter!(
        CLUSTER_FORWARDS,
        "Requests and calls sent to the owning node"
    );
    describe_histogram!(TURN_SECONDS, Unit::Seconds, "Time of a conversation turn");
    describe_counter!(TOOL_CALLS, "Tool calls by source and outcome");
    describe_counter!(
        GRAPH_SENDS,
        "WhatsApp Graph API send attempts by outcome and Meta error code"
    );
    describe_histogram!(
        LIMITER_WAIT,
        Unit::Seconds,
        "Time a send waited for the rate limits"
    );
    describe_counter!(ACTOR_FAILURES, "Actors that failed, by kind");
    describe_counter!(ACTOR_RESTARTS, "Supervisors restarted, by kind");
    describe_counter!(FLOW_RECIPIENTS, "Flow recipients reaching a state");
    describe_counter!(TASK_RUNS, "Scheduled-task runs by outcome");
    describe_counter!(HANDOFFS, "Conversations handed to a person, by who asked");
    describe_counter!(RESUMES, "Conversations given back to the assistant, by why");
    describe_counter!(
        OPERATOR_MESSAGES,
        "Operators' messages to people, by outcome"
    );
    describe_counter!(EVENT_DELIVERIES, "Event webhook attempts by outcome");
    describe_counter!(MEDIA_FETCHES, "Media fetches by outcome");
    describe_counter!(QUOTAS_REACHED, "Workspace quotas reached, by quota");
    describe_counter!(MEDIA_BYTES, Unit::Bytes, "Bytes of media kept");
    describe_gauge!(EVENT_BACKLOG, "Event webhook deliveries waiting");
    describe_gauge!(
        EVENT_OLDEST,
        Unit::Seconds,
        "Age of the oldest pending event webhook delivery"
    );
}

pub(crate) fn model_call(mode: &'static str, ok: bool, elapsed: Duration) {
    counter!(MODEL_REQUESTS, "mode" => mode, "outcome" => outcome(ok)).increment(1);
    histogram!(MODEL_SECONDS, "mode" => mode).record(elapsed);
}

pub(crate) fn first_token(elapsed: Duration) {
    histogram!(MODEL_FIRST_TOKEN).record(elapsed);
}

pub(crate) fn turn(origin: &'static str, result: &'static str, elapsed: Duration) {
    counter!(TURNS, "origin" => origin, "outcome" => result).increment(1);
    histogram!(TURN_SECONDS, "origin" => origin).record(elapsed);
}

pub(crate) fn tool_call(source: &'static str, ok: bool) {
    counter!(TOOL_CALLS, "source" => source, "outcome" => outcome(ok)).increment(1);
}

pub(crate) fn graph_sent() {
    counter!(GRAPH_SENDS, "outcome" => "sent", "code" => "none").increment(1);
}

/// A failed attempt, with Meta's error code when Meta answered one.
pub(crate) fn graph_send_failed(code: Option<i64>) {
    let code = code.map_or_else(|| "none".to_owned(), |c| c.to_string());
    counter!(GRAPH_SENDS, "outcome" => "failed", "code" => code).increment(1);
}

pub(crate) fn limiter_wait(elapsed: Duration) {
    histogram!(LIMITER_WAIT).record(elapsed);
}

pub(crate) fn actor_failed(kind: &'static str) {
    counter!(ACTOR_FAILURES, "kind" => kind).increment(1);
}

pub(crate) fn actor_restarted(kind: &'static str) {
    counter!(ACTOR_RESTARTS, "kind" => kind).increment(1);
}

pub(crate) fn flow_recipient(status: &'static str) {
    counter!(FLOW_RECIPIENTS, "status" => status).increment(1);
}

pub(crate) fn task_run(result: &'static str) {
    counter!(TASK_RUNS, "outcome" => result).increment(1);
}

fn outcome(ok: bool) -> &'static str {
    if ok { "ok" } else { "error" }
}

pub(crate) fn handoff(by: &'static str) {
    counter!(HANDOFFS, "by" => by).increment(1);
}

pub(crate) fn resume(why: &'static str) {
    counter!(RESUMES, "why" => why).increment(1);
}

/// An operator's message went out (`sent`) or did not (`failed`).
pub(crate) fn operator_message(sent: bool) {
    let outcome = if sent { "sent" } else { "failed" };
    counter!(OPERATOR_MESSAGES, "outcome" => outcome).increment(1);
}

pub(crate) fn event_delivery(outcome: &'static str) {
    counter!(EVENT_DELIVERIES, "outcome" => outcome).increment(1);
}

#[allow(clippy::cast_precision_loss)]
pub(crate) fn event_backlog(pending: u64, oldest_seconds: f64) {
    gauge!(EVENT_BACKLOG).set(pending as f64);
    gauge!(EVENT_OLDEST).set(oldest_seconds);
}

#[allow(clippy::cast_precision_loss)]
pub(crate) fn cluster_partitions(held: usize) {
    gauge!(CLUSTER_PARTITIONS).set(held as f64);
}

pub(crate) fn cluster_takeovers(how: &'static str, count: usize) {
    counter!(CLUSTER_TAKEOVERS, "how" => how).increment(count as u64);
}

/// A call sent to the owning node (`kind`: the call's `KIND`).
pub fn cluster_forward(kind: &'static str, ok: bool) {
    counter!(CLUSTER_FORWARDS, "kind" => kind, "outcome" => outcome(ok)).increment(1);
}

pub(crate) fn cluster_not_owner_retry() {
    counter!(CLUSTER_FORWARDS, "kind" => "any", "outcome" => "retried").increment(1);
}

/// A workspace's quota refused work for the first time in its period.
pub(crate) fn quota_reached(quota: &str) {
    let quota = quota.split('.').next().unwrap_or(quota).to_owned();
    counter!(QUOTAS_REACHED, "quota" => quota).increment(1);
}

/// A media fetch ended (`stored`, `retried`, `failed`); `bytes` kept when it stored one.
pub(crate) fn media_fetch(outcome: &'static str, bytes: u64) {
    counter!(MEDIA_FETCHES, "outcome" => outcome).increment(1);
    if bytes > 0 {
        counter!(MEDIA_BYTES).increment(bytes);
    }
}
