//! Operator views: `GET /admin/actors`, the live actor tree with counts. With a workspace's
//! admin key it shows that workspace's actors only; with the operator token
//! (`server.operator_token`, what `parley admin actors` uses) the whole installation's.

use axum::extract::State;
use serde::Serialize;

use crate::domain::Permission;
use crate::http::AppState;
use crate::http::auth::Viewer;
use crate::http::envelope::Envelope;
use crate::http::error::{ApiError, Result};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub(crate) fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(get_actor_tree))
}

/// One supervisor and how many actors it runs (for the viewer's workspace, or all).
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub(crate) struct SupervisorRecord {
    /// Its path, e.g. `root/conversations`.
    path: String,
    /// Actors it runs.
    live: usize,
    /// `root/conversations` only: identities whose actor rests, their cache kept without an
    /// actor until their idle timeout.
    #[serde(skip_serializing_if = "Option::is_none")]
    resting: Option<usize>,
}

/// The tree as the endpoint answers it.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub(crate) struct ActorTree {
    /// Always `root`.
    root: String,
    /// `installation` for the operator, `workspace` for a workspace admin.
    scope: String,
    /// The supervisors under the root.
    supervisors: Vec<SupervisorRecord>,
}

/// Show the live actor tree.
///
/// Supervisors and the actors under them, with their state. Needs the operator token.
#[utoipa::path(
    get,
    path = "/admin/actors",
    tag = "admin",
    responses((status = 200, body = Envelope<ActorTree>)),
)]
#[tracing::instrument(skip_all)]
async fn get_actor_tree(
    viewer: Viewer,
    State(state): State<AppState>,
) -> Result<Envelope<ActorTree>> {
    let (scope, tree) = match viewer {
        Viewer::Operator => ("installation", state.actors.tree().await),
        Viewer::Workspace(caller) => {
            caller.require(Permission::Admin)?;
            ("workspace", state.actors.tree_of(caller.workspace_id).await)
        }
    };
    let tree = tree.map_err(|e| ApiError::Unavailable {
        code: "not_ready",
        message: e.to_string(),
    })?;
    let supervisors = tree
        .into_iter()
        .map(|s| SupervisorRecord {
            path: s.path,
            live: s.live_children,
            resting: s.resting,
        })
        .collect();
    Ok(Envelope::ok(
        "Actor tree retrieved successfully",
        ActorTree {
            root: "root".to_owned(),
            scope: scope.to_owned(),
            supervisors,
        },
    ))
}
