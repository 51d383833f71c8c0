//! Prometheus metrics: one recorder for the process (the `metrics` facade's global), rendered
//! by `GET /metrics` in the same HTTP server (no second listener), with its upkeep on a timer.
//!
//! The HTTP layer counts requests by route template and status; the webhook counts events;
//! the actors count turns, model calls, tool calls, Graph sends, limiter waits, failures,
//! flow recipients and task runs (`parley_actors::measure`); the database's writer records its
//! batch sizes (`parley_persistence::WRITE_BATCH`). Gauges that describe the present
//! (live actors by kind, database pool connections) are read at each scrape. No label
//! carries an id of a person or a secret.

use std::sync::OnceLock;
use std::time::Duration;

use axum::extract::MatchedPath;
use axum::http::{Method, StatusCode};
use metrics::{
    Unit, counter, describe_counter, describe_gauge, describe_histogram, gauge, histogram,
};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use parley_actors::ActorRuntime;
use parley_persistence::{DatabaseConnection, WRITE_BATCH};

/// HTTP requests by method, route template and status.
const HTTP_REQUESTS: &str = "parley_http_requests_total";
/// Time to a response's head, by method and route template.
const HTTP_SECONDS: &str = "parley_http_request_duration_seconds";
/// Webhook events by outcome (`stored`, `duplicate`, `status`, `ignored`, `refused`).
const WEBHOOK_EVENTS: &str = "parley_webhook_events_total";
/// Console sign-ins by outcome (`accepted`, `refused`, `throttled`).
const CONSOLE_SIGN_INS: &str = "parley_console_sign_ins_total";
/// Live actors by kind, at the scrape.
const LIVE_ACTORS: &str = "parley_live_actors";
/// Database pool connections by state (`idle`, `in_use`), at the scrape.
const DB_CONNECTIONS: &str = "parley_db_pool_connections";
/// The installation's usage by metric, every workspace together (read from the database at
/// each scrape: the cluster's figures, the same on every node).
const USAGE: &str = "parley_usage_total";

/// Histogram buckets, in seconds: sub-millisecond hot paths up to a minute-long model call.
const BUCKETS: [f64; 16] = [
    0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
    60.0,
];

/// Buckets of the writer's batch sizes (`parley_persistence::WRITE_BATCH`), in writes: one
/// alone up to its most per commit.
const BATCH_BUCKETS: [f64; 7] = [1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0];

/// How often histograms are rotated and idle series dropped.
const UPKEEP_EVERY: Duration = Duration::from_secs(5);

static RECORDER: OnceLock<Option<PrometheusHandle>> = OnceLock::new();

/// Installs the process's recorder (once; later calls answer the same handle) and starts its
/// upkeep on the current runtime. `None` when another recorder was installed first.
pub(crate) fn install() -> Option<PrometheusHandle> {
    RECORDER
        .get_or_init(|| {
            let recorder = PrometheusBuilder::new()
                .set_buckets(&BUCKETS)
                .and_then(|builder| {
                    builder.set_buckets_for_metric(
                        Matcher::Full(WRITE_BATCH.to_owned()),
                        &BATCH_BUCKETS,
                    )
                })
                .unwrap_or_else(|_| PrometheusBuilder::new())
                .build_recorder();
            let handle = recorder.handle();
            if let Err(error) = metrics::set_global_recorder(recorder) {
                tracing::warn!(%error, "metrics recorder not installed");
                return None;
            }
            describe();
            parley_actors::measure::describe();
            let upkeep = handle.clone();
            tokio::spawn(async move {
                let mut every = tokio::time::interval(UPKEEP_EVERY);
                loop {
                    every.tick().await;
                    upkeep.run_upkeep();
                }
            });
            Some(handle)
        })
        .clone()
}

fn describe() {
    describe_counter!(HTTP_REQUESTS, "HTTP requests by method, route and status");
    describe_histogram!(
        HTTP_SECONDS,
        Unit::Seconds,
        "Time to a response's head, by method and route"
    );
    describe_counter!(WEBHOOK_EVENTS, "Webhook events by outcome");
    describe_counter!(CONSOLE_SIGN_INS, "Operator console sign-ins by outcome");
    describe_histogram!(
        WRITE_BATCH,
        Unit::Count,
        "Writes committed together by the database's writer (1: a write alone)"
    );
    describe_gauge!(LIVE_ACTORS, "Live actors by kind");
    describe_gauge!(DB_CONNECTIONS, "Database pool connections by state");
    describe_gauge!(
        USAGE,
        "The installation's usage by metric, all workspaces together"
    );
}

/// Renders every family, reading the gauges of the present first.
pub(crate) async fn render(
    handle: &PrometheusHandle,
    actors: &ActorRuntime,
    db: &DatabaseConnection,
) -> String {
    if let Ok(tree) = actors.tree().await {
        for supervisor in tree {
            let kind = supervisor
                .path
                .rsplit('/')
                .next()
                .unwrap_or_default()
                .to_owned();
            gauge!(LIVE_ACTORS, "kind" => kind).set(supervisor.live_children as f64);
        }
    }
    let (size, idle) = parley_persistence::pool_connections(db);
    gauge!(DB_CONNECTIONS, "state" => "idle").set(idle as f64);
    gauge!(DB_CONNECTIONS, "state" => "in_use").set(f64::from(size) - idle as f64);
    // The installation's usage, every workspace and node together, by metric only.
    match parley_persistence::usage::installation_totals(db).await {
        Ok(totals) => {
            for (metric, value) in totals {
                gauge!(USAGE, "metric" => metric).set(value as f64);
            }
        }
        Err(error) => tracing::warn!(%error, "the installation's usage could not be read"),
    }
    handle.render()
}

/// Counts and times one request under its route template (`/workers/{worker_id}`, never the
/// concrete path), or `unmatched`; called by the HTTP layer's observer once the response head
/// is ready.
pub(crate) fn http_request(
    method: &'static str,
    route: Option<&MatchedPath>,
    status: StatusCode,
    elapsed: Duration,
) {
    let route = route.map_or("unmatched", MatchedPath::as_str).to_owned();
    histogram!(HTTP_SECONDS, "method" => method, "route" => route.clone()).record(elapsed);
    counter!(HTTP_REQUESTS, "method" => method, "route" => route, "status" => status.as_str().to_owned())
        .increment(1);
}

/// A request's method as a label: the common ones by name, any other as `other` (a client
/// cannot grow the label set).
pub(crate) fn method_label(method: &Method) -> &'static str {
    match *method {
        Method::GET => "GET",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::PATCH => "PATCH",
        Method::DELETE => "DELETE",
        Method::HEAD => "HEAD",
        Method::OPTIONS => "OPTIONS",
        _ => "other",
    }
}

/// Counts a console sign-in by outcome.
pub(crate) fn console_sign_in(outcome: &'static str) {
    counter!(CONSOLE_SIGN_INS, "outcome" => outcome).increment(1);
}

/// Counts webhook events by outcome.
pub(crate) fn webhook_events(outcome: &'static str, count: u32) {
    if count > 0 {
        counter!(WEBHOOK_EVENTS, "outcome" => outcome).increment(u64::from(count));
    }
}
