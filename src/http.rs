//! The HTTP front door: shared state, the router of every resource, and the middleware every
//! request passes through (request id, tracing, panics, server-error logging, time and size
//! limits).

mod admin;
mod api_keys;
mod assistants;
mod auth;
mod campaigns;
pub(crate) use auth::rate_limits::KeyLimits;
pub(crate) use auth::{AuthFailures, KnownKeys};
pub(crate) use console::{Pulse as ConsolePulse, Sessions as ConsoleSessions};
pub(crate) use lookup::IdentityPaths;
pub(crate) use webhooks::WebhookChannels;
mod channels;
mod chat;
mod console;
mod conversations;
mod envelope;
mod error;
mod event_webhooks;
mod extract;
mod flows;
mod health;
mod idempotency;
mod identities;
mod lookup;
mod mcps;
mod media;
mod memory;
mod metrics;
mod middleware;
pub(crate) mod openapi;
mod operators;
mod pagination;
mod peer;
mod response;
mod sandbox;
mod scheduled_tasks;
mod send;
mod stages;
mod templates;
mod uploads;
mod usage;
mod validation;
mod webhooks;
mod workers;
mod workspaces;

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use parley_actors::ActorRuntime;
use parley_persistence::DatabaseConnection;
use tower::ServiceBuilder;
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::request_id::{PropagateRequestIdLayer, SetRequestIdLayer};
use tower_http::trace::TraceLayer;
use utoipa_axum::router::OpenApiRouter;

use crate::config::Settings;
use crate::http::error::ApiError;
use parley_actors::domain::SecretBox;

/// What every handler can reach; cheap to clone.
#[derive(Clone)]
pub struct AppState {
    /// Configuration in force.
    pub settings: Arc<Settings>,
    /// Connection pool.
    pub db: DatabaseConnection,
    /// The live actor tree.
    pub actors: Arc<ActorRuntime>,
    /// Seals and opens secrets kept in the database.
    pub secrets: Arc<SecretBox>,
    /// Failed authentications per client address.
    pub(crate) auth_failures: auth::AuthFailures,
    /// Keys that authenticated recently.
    pub(crate) known_keys: auth::KnownKeys,
    /// Requests per second per key, for workspaces with that quota.
    pub(crate) key_limits: auth::rate_limits::KeyLimits,
    /// Identity paths the conversation endpoints resolved recently.
    pub(crate) identity_paths: lookup::IdentityPaths,
    /// Channels that webhooks were addressed to recently.
    pub(crate) webhook_channels: webhooks::WebhookChannels,
    /// The operator console's sessions.
    pub(crate) console: console::Sessions,
    /// What wakes the console's open pages when what they show moved.
    pub(crate) console_pulse: console::Pulse,
    /// The Prometheus recorder's handle (`None` when another recorder was installed first).
    pub(crate) metrics: Option<metrics_exporter_prometheus::PrometheusHandle>,
}

/// Builds the application's router with its middleware.
pub fn router(state: AppState) -> Router {
    let body_limit = state.settings.server.body_limit_bytes;
    let timeout = Duration::from_secs(state.settings.server.request_timeout_secs);
    // Plain requests answer within the general limit (503 `timeout` after it). Conversation and
    // send routes wait on upstreams under their own limits (504) and finish claimed work
    // whatever happens to the client, so the general limit does not cut them.
    let plain = OpenApiRouter::new()
        .merge(health::router())
        .merge(workspaces::router())
        .merge(api_keys::router())
        .merge(operators::router())
        .merge(workers::router())
        .merge(assistants::router())
        .merge(channels::router())
        .merge(stages::router())
        .merge(identities::router())
        .merge(memory::router())
        .merge(conversations::router())
        .merge(event_webhooks::router())
        .merge(admin::router())
        .merge(usage::router())
        .merge(metrics::router())
        .merge(webhooks::router())
        .merge(sandbox::router())
        .merge(templates::router())
        .merge(mcps::router())
        .merge(campaigns::router())
        .merge(media::router())
        .route_layer(middleware::LimitDurationLayer(timeout));
    let acting = axum::middleware::from_fn_with_state(state.clone(), idempotency::idempotent);
    let mut upstream_bound = OpenApiRouter::new()
        .merge(chat::router())
        .merge(send::router())
        .merge(flows::router())
        .merge(scheduled_tasks::router())
        .route_layer(acting);
    openapi::with_idempotency_key(upstream_bound.get_openapi_mut());
    // Uploads take bodies up to the largest file WhatsApp sends, and wait on Meta under their
    // own limit.
    let form_limit = uploads::form_limit(state.settings.media.settings().limits.largest());
    let (routes, routed) = plain
        .merge(upstream_bound)
        .merge(uploads::router(form_limit))
        .merge(sandbox::media_router(form_limit))
        .split_for_parts();
    let routes = routes
        .merge(openapi::routes(openapi::document(routed)))
        .merge(console::router(form_limit))
        .merge(peer::router());
    with_middleware(routes, body_limit).with_state(state)
}

/// The middleware every request passes through, outermost first: a request id, the request
/// span, the metrics and the log of server errors (panics included: the catcher sits inside
/// it, so a panic is logged like any 500, with the request id), the panic catcher, and the
/// body limit.
fn with_middleware<S: Clone + Send + Sync + 'static>(
    routes: Router<S>,
    body_limit: usize,
) -> Router<S> {
    routes
        .fallback(unknown_route)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(
            ServiceBuilder::new()
                .map_request(middleware::drop_unplain_request_id)
                .layer(SetRequestIdLayer::x_request_id(middleware::RequestIds))
                .layer(PropagateRequestIdLayer::x_request_id())
                .layer(TraceLayer::new_for_http().make_span_with(middleware::request_span))
                .layer(middleware::ObserveLayer)
                .layer(axum::middleware::from_fn(auth::rate_limits::headers))
                .layer(CatchPanicLayer::custom(middleware::panic_response))
                // Tells the JSON extractor the limit, so that a 413 can state it.
                .layer(axum::Extension(extract::BodyLimit(body_limit)))
                .layer(DefaultBodyLimit::max(body_limit)),
        )
}

async fn unknown_route() -> ApiError {
    ApiError::NotFound("Route")
}

async fn method_not_allowed() -> ApiError {
    ApiError::MethodNotAllowed
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::sync::{Arc, Mutex};

    use axum::body::Body;
    use axum::routing::get;
    use tower::ServiceExt;

    use super::*;

    #[derive(Clone, Default)]
    struct Lines(Arc<Mutex<Vec<u8>>>);

    impl Write for Lines {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            if let Ok(mut lines) = self.0.lock() {
                lines.extend_from_slice(buf);
            }
            Ok(buf.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[allow(clippy::panic)]
    async fn boom() -> &'static str {
        panic!("boom in a handler")
    }

    #[tokio::test]
    async fn a_panic_is_a_500_logged_as_a_failed_request_with_its_request_id() {
        let lines = Lines::default();
        let writer = lines.clone();
        let subscriber = tracing_subscriber::fmt()
            .json()
            .with_span_list(true)
            .with_writer(move || writer.clone())
            .finish();
        let _guard = tracing::subscriber::set_default(subscriber);
        let app = with_middleware(Router::new().route("/boom", get(boom)), 1024);

        let request = axum::http::Request::get("/boom")
            .header("x-request-id", "panic-42")
            .body(Body::empty())
            .expect("request");
        let response = app.oneshot(request).await.expect("answered");

        assert_eq!(response.status(), 500);
        let logged = String::from_utf8(lines.0.lock().expect("lines").clone()).expect("utf-8");
        let failed = logged
            .lines()
            .find(|l| l.contains("request failed"))
            .unwrap_or_else(|| panic!("no request-failed line: {logged}"));
        assert!(failed.contains("panic-42"), "{failed}");
        assert!(failed.contains("boom in a handler"), "{failed}");
    }
}
