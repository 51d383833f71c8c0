//! `GET /metrics`: the Prometheus text exposition of every family (see `crate::metrics`).
//! It shows the whole installation (every tenant's traffic), so it needs the operator token,
//! unless `server.metrics_public` opens it for a private scrape network; a workspace's key, even
//! an admin's, is refused (SECURITY.md: operator views are the operator's).

use axum::extract::{FromRequestParts, Request, State};
use axum::http::header::CONTENT_TYPE;
use axum::response::{IntoResponse, Response};

use crate::http::AppState;
use crate::http::auth::Viewer;
use crate::http::error::{ApiError, Result};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

/// The exposition format's content type.
const EXPOSITION: &str = "text/plain; version=0.0.4; charset=utf-8";

pub(crate) fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(get_metrics))
}

/// Prometheus metrics: HTTP requests, webhook events, turns, model and tool calls, Graph
/// sends, limiter waits, live actors, actor failures, flow recipients, task runs and database
/// pool connections. Needs the operator token, unless `PARLEY_METRICS_PUBLIC=true`.
#[utoipa::path(
    get,
    path = "/metrics",
    tag = "admin",
    responses((status = 200, content_type = "text/plain", body = String,
               description = "Prometheus text exposition format 0.0.4")),
)]
async fn get_metrics(State(state): State<AppState>, request: Request) -> Result<Response> {
    if !state.settings.server.metrics_public {
        let (mut parts, _) = request.into_parts();
        if let Viewer::Workspace(_) = Viewer::from_request_parts(&mut parts, &state).await? {
            return Err(ApiError::Forbidden(
                "Metrics cover the whole installation: they need the operator token".to_owned(),
            ));
        }
    }
    let Some(handle) = state.metrics.as_ref() else {
        return Err(ApiError::Unavailable {
            code: "metrics_unavailable",
            message: "Metrics are not recorded in this process".to_owned(),
        });
    };
    let body = crate::metrics::render(handle, &state.actors, &state.db).await;
    Ok(([(CONTENT_TYPE, EXPOSITION)], body).into_response())
}
