//! What one node of a cluster asks of another (DESIGN §2 "Routing"): a turn for an identity
//! the asked node owns, a send or a Graph call (templates) through a channel it owns. Not operations of the API document:
//! they answer only requests carrying the cluster's shared secret (404 to anyone else, as for
//! a route that does not exist), and a node that does not own what it is asked about answers
//! 503 `not_owner`, after which the asking node reads the leases again and retries once.
//!
//! `extract::Forward` sends a whole API request (a chat, a stream, a handoff) to the node that
//! owns its identity or channel and relays the answer as it comes.

use axum::extract::{FromRequestParts, Path, State};
use axum::http::request::Parts;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use parley_actors::channel::remote::{GraphAnswer, GraphOp};
use parley_actors::channel::{SendAnswer, SendRequest};
use parley_actors::cluster::FORWARDED_HEADER;
use parley_actors::conversation::remote::{RemoteAnswer, RemoteTurn};
use uuid::Uuid;

use super::AppState;
use super::error::{ApiError, Result};

/// The routes the other nodes call.
pub(crate) fn router() -> Router<AppState> {
    Router::new()
        .route("/_cluster/turns", post(turn))
        .route("/_cluster/channels/{channel_id}/send", post(send))
        .route("/_cluster/channels/{channel_id}/graph", post(graph))
}

/// A request from another node of the cluster (it carries the shared secret).
pub(crate) struct Peer;

impl FromRequestParts<AppState> for Peer {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self> {
        let given = parts.headers.get(FORWARDED_HEADER).map(|v| v.as_bytes());
        match given {
            Some(given) if state.actors.ownership().is_peer_secret(given) => Ok(Self),
            _ => Err(ApiError::NotFound("Route")),
        }
    }
}

async fn turn(
    _peer: Peer,
    State(state): State<AppState>,
    Json(turn): Json<RemoteTurn>,
) -> Response {
    let outcome = state.actors.conversations().turn_for_peer(turn).await;
    answer(
        RemoteAnswer::from(outcome),
        |a| matches!(a, RemoteAnswer::Failed { kind, .. } if kind == parley_actors::cluster::NOT_OWNER),
    )
}

async fn send(
    _peer: Peer,
    State(state): State<AppState>,
    Path(channel_id): Path<Uuid>,
    Json(request): Json<SendRequest>,
) -> Response {
    let outcome = state.actors.channels().send_here(channel_id, request).await;
    answer(
        SendAnswer::from(outcome),
        |a| matches!(a, SendAnswer::Failed { kind, .. } if kind == parley_actors::cluster::NOT_OWNER),
    )
}

async fn graph(
    _peer: Peer,
    State(state): State<AppState>,
    Path(channel_id): Path<Uuid>,
    Json(op): Json<GraphOp>,
) -> Response {
    let outcome = state.actors.channels().graph_here(channel_id, op).await;
    answer(outcome, |a| {
        matches!(
            a,
            GraphAnswer::Failed {
                not_owner: true,
                ..
            }
        )
    })
}

/// The answer as JSON, or 503 `not_owner` when this node does not own what it was asked.
fn answer<T: serde::Serialize>(answer: T, not_owner: impl Fn(&T) -> bool) -> Response {
    if not_owner(&answer) {
        return ApiError::not_owner("partition").into_response();
    }
    Json(answer).into_response()
}
