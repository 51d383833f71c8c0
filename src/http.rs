//! The HTTP front door: shared state, the router of every resource, and the middleware every
//! request passes through (request id, tracing, panics, server-error logging, time and size
//! limits).

mod admin;
mod api_keys;
mod assistants;
mod auth;
mod channels;
mod chat;
mod conversations;
mod envelope;
mod error;
mod extract;
mod health;
mod identities;
mod identity_journey;
mod memory;
mod middleware;
mod pagination;
mod sandbox;
mod stages;
mod templates;
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
use tower_http::request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer};
use tower_http::trace::TraceLayer;

use crate::config::Settings;
use crate::http::error::ApiError;
use parley_actors::secrets::SecretBox;

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
}

/// Builds the application's router with its middleware.
pub fn router(state: AppState) -> Router {
    let body_limit = state.settings.body_limit_bytes;
    let timeout = Duration::from_secs(state.settings.request_timeout_secs);
    Router::new()
        .merge(health::router())
        .merge(workspaces::router())
        .merge(api_keys::router())
        .merge(workers::router())
        .merge(assistants::router())
        .merge(channels::router())
        .merge(stages::router())
        .merge(identities::router())
        .merge(identity_journey::router())
        .merge(memory::router())
        .merge(conversations::router())
        .merge(chat::router())
        .merge(admin::router())
        .merge(webhooks::router())
        .merge(sandbox::router())
        .merge(templates::router())
        .fallback(unknown_route)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(
            ServiceBuilder::new()
                .layer(SetRequestIdLayer::x_request_id(MakeRequestUuid))
                .layer(PropagateRequestIdLayer::x_request_id())
                .layer(TraceLayer::new_for_http().make_span_with(middleware::request_span))
                .layer(CatchPanicLayer::custom(middleware::panic_response))
                .layer(axum::middleware::from_fn(middleware::log_server_errors))
                .layer(axum::middleware::from_fn(move |req, next| {
                    middleware::limit_duration(timeout, req, next)
                }))
                .layer(axum::middleware::from_fn(move |req, next| {
                    middleware::announce_body_limit(body_limit, req, next)
                }))
                .layer(DefaultBodyLimit::max(body_limit)),
        )
        .with_state(state)
}

/// Tells the identity's live conversation actor, if any, that its identity, stage or memory
/// changed through the API, so that its next turn sees the change.
pub(crate) async fn invalidate_identity(
    state: &AppState,
    workspace_id: i64,
    identity_id: uuid::Uuid,
) {
    if let Ok(conversations) = state.actors.conversations() {
        conversations.invalidate(workspace_id, identity_id).await;
    }
}

async fn unknown_route() -> ApiError {
    ApiError::NotFound("Route")
}

async fn method_not_allowed() -> ApiError {
    ApiError::MethodNotAllowed
}
