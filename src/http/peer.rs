//! The one route the other nodes of a cluster call (`POST /_cluster/call`, DESIGN §2
//! "Routing"). Not an operation of the API document: it answers only requests carrying the
//! cluster's shared secret (404 to anyone else, as for a route that does not exist, and each
//! such request counts as a failed authentication), then hands the call to the actors' side
//! (`parley_actors::runtime::peer`), which decides everything else, and relays the answer: JSON,
//! a stream of JSON lines, or 503 `not_owner` when this node no longer owns what it was asked
//! about.

use std::convert::Infallible;
use std::net::SocketAddr;

use axum::Router;
use axum::body::Body;
use axum::extract::{ConnectInfo, Request, State};
use axum::http::{Method, header};
use axum::response::{IntoResponse, Response};
use axum::routing::any;
use futures_util::StreamExt;
use parley_actors::cluster::{PEER_ROUTE, PEER_SECRET_HEADER};
use parley_actors::runtime::peer::{PeerCall, PeerReply};

use super::AppState;
use super::error::ApiError;

/// The route the other nodes call.
pub(crate) fn router() -> Router<AppState> {
    Router::new().route(PEER_ROUTE, any(answer))
}

async fn answer(State(state): State<AppState>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let given = parts.headers.get(PEER_SECRET_HEADER).map(|v| v.as_bytes());
    if !given.is_some_and(|given| state.actors.accepts_peer(given)) {
        let peer = parts.extensions.get::<ConnectInfo<SocketAddr>>();
        let refused = state
            .auth_failures
            .refuse_from(peer.map(|ConnectInfo(peer)| peer.ip()));
        return match refused {
            ApiError::Unauthenticated => ApiError::NotFound("Route"),
            too_many => too_many,
        }
        .into_response();
    }
    if parts.method != Method::POST {
        return ApiError::MethodNotAllowed.into_response();
    }
    let limit = state.settings.server.body_limit_bytes;
    let Ok(body) = axum::body::to_bytes(body, limit).await else {
        return ApiError::invalid_field(["call"], "could not be read").into_response();
    };
    let call: PeerCall = match serde_json::from_slice(&body) {
        Ok(call) => call,
        Err(error) => {
            return ApiError::invalid_field(["call"], format!("is not a call: {error}"))
                .into_response();
        }
    };
    match state.actors.answer_peer(call).await {
        PeerReply::Answer(value) => axum::Json(value).into_response(),
        PeerReply::Lines(lines) => {
            let body = Body::from_stream(lines.map(Ok::<_, Infallible>));
            ([(header::CONTENT_TYPE, "application/x-ndjson")], body).into_response()
        }
        PeerReply::NotOwner => ApiError::not_owner("partition").into_response(),
    }
}
