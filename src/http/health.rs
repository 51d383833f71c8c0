//! Liveness and readiness probes; neither needs a key.

use axum::Router;
use axum::extract::State;
use axum::routing::get;
use serde::Serialize;

use crate::http::AppState;
use crate::http::envelope::Envelope;
use crate::http::error::{ApiError, Result};

pub(crate) fn router() -> Router<AppState> {
    Router::new()
        .route("/health", get(get_health))
        .route("/ready", get(get_ready))
}

#[derive(Serialize)]
struct Health {
    status: &'static str,
    version: &'static str,
}

/// Liveness: the process answers HTTP.
async fn get_health() -> Envelope<Health> {
    Envelope::ok(
        "Parley is running",
        Health {
            status: "ok",
            version: env!("CARGO_PKG_VERSION"),
        },
    )
}

#[derive(Serialize)]
struct Readiness {
    database: &'static str,
}

/// Readiness: the database answers.
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
