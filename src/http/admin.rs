//! Operator views: `GET /admin/actors`, the live actor tree with counts (admin permission).

use axum::Router;
use axum::extract::State;
use axum::routing::get;
use serde::Serialize;

use crate::domain::Permission;
use crate::http::AppState;
use crate::http::auth::Caller;
use crate::http::envelope::Envelope;
use crate::http::error::{ApiError, Result};

pub(crate) fn router() -> Router<AppState> {
    Router::new().route("/admin/actors", get(get_actor_tree))
}

#[derive(Debug, Serialize)]
struct SupervisorRecord {
    path: String,
    live: usize,
}

#[derive(Debug, Serialize)]
struct ActorTree {
    root: &'static str,
    supervisors: Vec<SupervisorRecord>,
}

#[tracing::instrument(skip_all, fields(workspace_id = caller.workspace_id))]
async fn get_actor_tree(
    caller: Caller,
    State(state): State<AppState>,
) -> Result<Envelope<ActorTree>> {
    caller.require(Permission::Admin)?;
    let tree = state
        .actors
        .tree()
        .await
        .map_err(|e| ApiError::Unavailable {
            code: "not_ready",
            message: e.to_string(),
        })?;
    let supervisors = tree
        .into_iter()
        .map(|s| SupervisorRecord {
            path: s.path,
            live: s.live_children,
        })
        .collect();
    Ok(Envelope::ok(
        "Actor tree retrieved successfully",
        ActorTree {
            root: "root",
            supervisors,
        },
    ))
}
