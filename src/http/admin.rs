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
    /// The supervisors under the root (of the node that answered).
    supervisors: Vec<SupervisorRecord>,
    /// On a cluster, for the operator: every node with the partitions it owns (absent on a
    /// single node).
    #[serde(skip_serializing_if = "Option::is_none")]
    nodes: Option<Vec<NodeRecord>>,
}

/// A node of the cluster.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub(crate) struct NodeRecord {
    /// Its id (new at each start).
    id: uuid::Uuid,
    /// How the other nodes reach it.
    url: String,
    /// Whether its heartbeat is younger than the lease time.
    alive: bool,
    /// Whether it is stopping.
    draining: bool,
    /// Whether it is the node that answered.
    this_node: bool,
    /// The partitions whose lease it holds.
    partitions: Vec<i32>,
}

/// The cluster's nodes, for the operator on a cluster.
async fn nodes(state: &AppState, operator: bool) -> Result<Option<Vec<NodeRecord>>> {
    let Some(here) = state.actors.node_id().filter(|_| operator) else {
        return Ok(None);
    };
    let ttl = state.settings.cluster.lease_ttl().as_millis();
    let ttl = u64::try_from(ttl).unwrap_or(u64::MAX);
    let nodes = parley_persistence::cluster::nodes(&state.db, ttl).await?;
    Ok(Some(
        nodes
            .into_iter()
            .map(|node| NodeRecord {
                this_node: node.id == here,
                id: node.id,
                url: node.url,
                alive: node.alive,
                draining: node.draining,
                partitions: node.partitions,
            })
            .collect(),
    ))
}

/// Show the live actor tree.
///
/// Supervisors and the actors under them, with their state. Needs the operator token (or a
/// workspace's admin key, for that workspace's actors). On a cluster the operator also sees
/// `nodes`: every node and the partitions it owns.
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
    let nodes = nodes(&state, matches!(viewer, Viewer::Operator)).await?;
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
            nodes,
        },
    ))
}
