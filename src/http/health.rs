//! Liveness and readiness probes; neither needs a key. Orchestrators probe them apart:
//! `/health/live` says the process answers (restart it when it does not); `/health/ready`
//! says it can do its work, the database answering and taking a write (send it no traffic
//! while it cannot). `/health` is readiness too, so that a plain health check sees a database
//! Parley cannot write; `/ready` stays as its older name.

use std::time::Duration;

use axum::extract::State;
use parley_persistence::{clock, health};
use serde::Serialize;

use crate::http::AppState;
use crate::http::envelope::Envelope;
use crate::http::error::{ApiError, Refusal, Result};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

/// Longest the readiness probe waits for the database.
const PROBE_TIMEOUT: Duration = Duration::from_secs(3);

pub(crate) fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(get_health))
        .routes(routes!(get_live))
        .routes(routes!(get_ready))
        .routes(routes!(get_ready_older))
}

#[derive(Serialize, utoipa::ToSchema)]
struct Health {
    status: &'static str,
    version: &'static str,
    database: &'static str,
}

#[derive(Serialize, utoipa::ToSchema)]
struct Liveness {
    status: &'static str,
    version: &'static str,
}

/// Health: the process answers and the database takes a write.
///
/// 503 `not_ready` when the database cannot be reached or written (a read-only file or
/// standby, a full disk, a restart under way).
#[utoipa::path(
    get,
    path = "/health",
    tag = "health",
    responses((status = 200, body = Envelope<Health>), (status = 503, body = Refusal)),
)]
async fn get_health(State(state): State<AppState>) -> Result<Envelope<Health>> {
    writable(&state).await?;
    Ok(Envelope::ok(
        "Parley is running",
        Health {
            status: "ok",
            version: env!("CARGO_PKG_VERSION"),
            database: "ok",
        },
    ))
}

/// Liveness: the process answers HTTP.
#[utoipa::path(
    get,
    path = "/health/live",
    tag = "health",
    responses((status = 200, body = Envelope<Liveness>)),
)]
async fn get_live() -> Envelope<Liveness> {
    Envelope::ok(
        "Parley is running",
        Liveness {
            status: "ok",
            version: env!("CARGO_PKG_VERSION"),
        },
    )
}

#[derive(Serialize, utoipa::ToSchema)]
struct Readiness {
    database: &'static str,
}

/// Readiness: the database answers and takes a write.
///
/// 503 `not_ready` when it cannot be reached or written.
#[utoipa::path(
    get,
    path = "/health/ready",
    tag = "health",
    responses((status = 200, body = Envelope<Readiness>), (status = 503, body = Refusal)),
)]
async fn get_ready(State(state): State<AppState>) -> Result<Envelope<Readiness>> {
    writable(&state).await?;
    Ok(Envelope::ok(
        "Parley is ready",
        Readiness { database: "ok" },
    ))
}

/// Readiness, under its older name (as `/health/ready`).
#[utoipa::path(
    get,
    path = "/ready",
    tag = "health",
    responses((status = 200, body = Envelope<Readiness>), (status = 503, body = Refusal)),
)]
async fn get_ready_older(state: State<AppState>) -> Result<Envelope<Readiness>> {
    get_ready(state).await
}

/// The database answers and takes the probe's write, within [`PROBE_TIMEOUT`].
async fn writable(state: &AppState) -> Result<()> {
    let probe = health::probe_write(&state.db, clock::now());
    match tokio::time::timeout(PROBE_TIMEOUT, probe).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(error)) => {
            tracing::warn!(%error, "readiness check failed: the database cannot be written");
            Err(not_ready())
        }
        Err(_) => {
            tracing::warn!("readiness check failed: the database did not answer in time");
            Err(not_ready())
        }
    }
}

fn not_ready() -> ApiError {
    ApiError::Unavailable {
        code: "not_ready",
        message: "The database cannot be reached or written".to_owned(),
    }
}
