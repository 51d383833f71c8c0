//! Liveness and readiness probes; neither needs a key.

use axum::extract::State;
use serde::Serialize;

use crate::http::AppState;
use crate::http::envelope::Envelope;
use crate::http::error::{ApiError, Result};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub(crate) fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(get_health))
        .routes(routes!(get_ready))
}

#[derive(Serialize, utoipa::ToSchema)]
struct Health {
    status: &'static str,
    version: &'static str,
}

/// Liveness: the process answers HTTP.
#[utoipa::path(
    get,
    path = "/health",
    tag = "health",
    responses((status = 200, body = Envelope<Health>)),
)]
async fn get_health() -> Envelope<Health> {
    Envelope::ok(
        "Parley is running",
        Health {
            status: "ok",
            version: env!("CARGO_PKG_VERSION"),
        },
    )
}

#[derive(Serialize, utoipa::ToSchema)]
struct Readiness {
    database: &'static str,
}

/// Readiness: the database answers.
#[utoipa::path(
    get,
    path = "/ready",
    tag = "health",
    responses((status = 200, body = Envelope<Readiness>)),
)]
async fn get_ready(State(state): State<AppState>) -> Result<Envelope<Readiness>> {
    match state.db.ping().await {
        Ok(()) => Ok(Envelope::ok(
            "Parley is ready",
            Readiness { database: "ok" },
        )),
        Err(error) => {
            tracing::warn!(%error, "readiness check failed: database unreachable");
            Err(ApiError::Unavailable {
                code: "not_ready",
                message: "The database is not reachable".to_owned(),
            })
        }
    }
}
