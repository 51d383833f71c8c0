//! Operator views: `GET /admin/actors`, the live actor tree with counts. With a workspace's
//! admin key it shows that workspace's actors only; with the operator token
//! (`server.operator_token`, what `parley admin actors` uses) the whole installation's.

use axum::extract::{FromRequestParts, State};
use axum::http::header::AUTHORIZATION;
use axum::http::request::Parts;
use serde::Serialize;
use subtle::ConstantTimeEq;

use crate::domain::Permission;
use crate::http::AppState;
use crate::http::auth::Caller;
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

/// Who is looking.
pub(crate) enum Viewer {
    /// The operator, with the configured token.
    Operator,
    /// A workspace's key.
    Workspace(Caller),
}

impl FromRequestParts<AppState> for Viewer {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &AppState,
    ) -> Result<Self, Self::Rejection> {
        let presented = parts
            .headers
            .get(AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.split_once(' '))
            .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
            .map(|(_, token)| token.trim());
        if let (Some(presented), Some(operator)) =
            (presented, state.settings.server.operator_token.as_ref())
            && !operator.expose().is_empty()
            && bool::from(presented.as_bytes().ct_eq(operator.expose().as_bytes()))
        {
            return Ok(Self::Operator);
        }
        Caller::from_request_parts(parts, state)
            .await
            .map(Self::Workspace)
    }
}

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
