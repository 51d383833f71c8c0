//! Sending an API request on, whole, to the node of the cluster that owns what it is about
//! (DESIGN §2 "Routing"), and relaying the answer as it comes (a stream stays a stream).

use axum::body::{Body, Bytes};
use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderName, Method, StatusCode};
use axum::response::Response;
use parley_actors::cluster::{FORWARDED_HEADER, NOT_OWNER_HEADER};
use uuid::Uuid;

use crate::http::AppState;
use crate::http::error::{ApiError, Result};

/// What an API request needs to be sent on to another node whole.
pub(crate) struct Forward {
    method: Method,
    path_and_query: String,
    headers: HeaderMap,
    /// Whether it came from another node already (then it is answered here or refused).
    from_peer: bool,
}

impl FromRequestParts<AppState> for Forward {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self> {
        let from_peer = parts
            .headers
            .get(FORWARDED_HEADER)
            .is_some_and(|v| state.actors.ownership().is_peer_secret(v.as_bytes()));
        Ok(Self {
            method: parts.method.clone(),
            path_and_query: parts
                .uri
                .path_and_query()
                .map_or_else(|| parts.uri.path().to_owned(), ToString::to_string),
            headers: if state.actors.ownership().is_clustered() {
                parts.headers.clone()
            } else {
                HeaderMap::new()
            },
            from_peer,
        })
    }
}

/// Headers a relay must not copy: they describe one connection, not the message (and the
/// idempotency key is kept by the node the client asked, which records the relayed answer).
const HOP_BY_HOP: [&str; 7] = [
    "connection",
    "keep-alive",
    "transfer-encoding",
    "upgrade",
    "host",
    "content-length",
    "idempotency-key",
];

impl Forward {
    /// `None` when this node answers the request (it owns `id`, or there is no cluster);
    /// otherwise the owner's answer, relayed as it comes (a stream stays a stream). A request
    /// another node forwarded here is refused with 503 `not_owner` when this node no longer
    /// owns `id`.
    ///
    /// # Errors
    /// 503 `not_owner` (see above); 503 when no owner could be reached.
    pub(crate) async fn elsewhere(
        &self,
        state: &AppState,
        id: Uuid,
        body: Option<Bytes>,
    ) -> Result<Option<Response>> {
        let ownership = state.actors.ownership();
        if ownership.owns(id) {
            return Ok(None);
        }
        if self.from_peer {
            return Err(ApiError::not_owner("identity or channel"));
        }
        let Some((client, secret)) = ownership.peer_client() else {
            return Ok(None);
        };
        for attempt in 0..2 {
            let url = ownership
                .owner_url_fresh(id)
                .await
                .map_err(|e| unavailable(&e.to_string()))?;
            let mut request =
                client.request(self.method.clone(), format!("{url}{}", self.path_and_query));
            for (name, value) in &self.headers {
                if !HOP_BY_HOP.contains(&name.as_str()) && name.as_str() != FORWARDED_HEADER {
                    request = request.header(name, value);
                }
            }
            request = request.header(FORWARDED_HEADER, secret);
            if let Some(body) = &body {
                request = request.body(body.clone());
            }
            let answer = request.send().await;
            parley_actors::measure::cluster_forward("http", answer.is_ok());
            let answer = match answer {
                Ok(answer) => answer,
                // The owner as last read is gone (a takeover under way): read the leases
                // again and try the new owner once.
                Err(_) if attempt == 0 => {
                    ownership.refresh_owners().await;
                    continue;
                }
                Err(error) => return Err(unavailable(&error.to_string())),
            };
            if answer.status() == StatusCode::SERVICE_UNAVAILABLE
                && answer.headers().contains_key(NOT_OWNER_HEADER)
                && attempt == 0
            {
                ownership.refresh_owners().await;
                continue;
            }
            return Ok(Some(relay(answer)));
        }
        Err(unavailable("the owner kept moving"))
    }
}

fn unavailable(why: &str) -> ApiError {
    ApiError::Unavailable {
        code: "owner_unreachable",
        message: format!("The node that owns this could not be reached ({why}); try again"),
    }
}

/// The owner's answer as this node's, its body streamed through.
fn relay(answer: reqwest::Response) -> Response {
    let status = answer.status();
    let mut headers = HeaderMap::new();
    for (name, value) in answer.headers() {
        if !HOP_BY_HOP.contains(&name.as_str()) {
            headers.append(HeaderName::clone(name), value.clone());
        }
    }
    let mut response = Response::new(Body::from_stream(answer.bytes_stream()));
    *response.status_mut() = status;
    *response.headers_mut() = headers;
    response
}
