//! `Idempotency-Key` on the POST routes that act on the outside world (`POST
//! /channels/{id}/waba/send`, the chat call, and flows and scheduled tasks as they come): the same key and
//! body within 24 hours answers the first response again without acting again; the same key
//! with another body is a 409 `idempotency_key_reused`. Keys are kept per workspace.
//!
//! A request with a key reserves it before it runs, so two retries racing each other act once:
//! the second is a 409 `idempotency_key_in_progress` until the first has answered.

use axum::body::{Body, to_bytes};
use axum::extract::{FromRequestParts, Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use parley_persistence::idempotency::{self, Reservation};
use parley_persistence::{PersistenceError, clock};
use serde_json::Value;
use sha2::{Digest, Sha256};
use uuid::Uuid;

use crate::http::AppState;
use crate::http::auth::Caller;
use crate::http::error::ApiError;

/// The request header carrying the key.
const HEADER: &str = "idempotency-key";
/// Longest key accepted.
pub(crate) const MAX_KEY_LEN: usize = 255;
/// How long a key answers for.
const KEPT: chrono::Duration = chrono::Duration::hours(24);

/// Middleware: requests without the header pass straight through.
pub(crate) async fn idempotent(
    State(state): State<AppState>,
    request: Request,
    next: Next,
) -> Response {
    let key = request
        .headers()
        .get(HEADER)
        .filter(|_| request.method() == axum::http::Method::POST)
        .cloned();
    let Some(key) = key else {
        return next.run(request).await;
    };
    match keyed(state, key, request, next).await {
        Ok(response) | Err(response) => response,
    }
}

async fn keyed(
    state: AppState,
    key: HeaderValue,
    request: Request,
    next: Next,
) -> Result<Response, Response> {
    let key = parse_key(&key).map_err(IntoResponse::into_response)?;
    let (mut parts, body) = request.into_parts();
    let caller = Caller::from_request_parts(&mut parts, &state)
        .await
        .map_err(IntoResponse::into_response)?;
    let limit = state.settings.server.body_limit_bytes;
    let body = to_bytes(body, limit)
        .await
        .map_err(|_| ApiError::PayloadTooLarge(limit).into_response())?;
    let fingerprint = fingerprint(parts.method.as_str(), parts.uri.path(), &body);
    let now = clock::now();
    let reserved = idempotency::reserve(
        &state.db,
        caller.workspace_id,
        &key,
        &fingerprint,
        now - KEPT,
        now,
    )
    .await
    .map_err(|e| stored_error(e).into_response())?;
    let id = match reserved {
        Reservation::Reserved(id) => id,
        Reservation::Taken(first) => return Err(replay(first, &fingerprint)),
    };
    let response = next.run(Request::from_parts(parts, Body::from(body))).await;
    Ok(keep(&state, id, response).await)
}

/// 400 unless the key is 1 to 255 visible ASCII characters.
fn parse_key(raw: &HeaderValue) -> Result<String, ApiError> {
    let key = raw.to_str().unwrap_or_default().trim();
    let visible = key.bytes().all(|b| b.is_ascii_graphic());
    if key.is_empty() || key.len() > MAX_KEY_LEN || !visible {
        return Err(ApiError::BadRequest {
            code: "invalid_idempotency_key",
            message: format!(
                "The Idempotency-Key header must be 1 to {MAX_KEY_LEN} visible ASCII characters"
            ),
            details: vec![crate::http::error::FieldError::new(
                ["Idempotency-Key"],
                "must be 1 to 255 visible ASCII characters",
            )],
        });
    }
    Ok(key.to_owned())
}

/// What makes two requests the same: method, path and body.
fn fingerprint(method: &str, path: &str, body: &[u8]) -> String {
    let mut hash = Sha256::new();
    hash.update(method.as_bytes());
    hash.update(b" ");
    hash.update(path.as_bytes());
    hash.update(b"\n");
    hash.update(body);
    hash.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// The answer for a key used before: the first answer again, or a 409.
fn replay(
    first: parley_persistence::entities::idempotency_key::Model,
    fingerprint: &str,
) -> Response {
    if first.fingerprint != fingerprint {
        return conflict(
            "idempotency_key_reused",
            "This Idempotency-Key was used for another request",
        );
    }
    let (Some(status), Some(body)) = (first.status_code, first.response) else {
        return conflict(
            "idempotency_key_in_progress",
            "A request with this Idempotency-Key is still being answered; try again shortly",
        );
    };
    let status = u16::try_from(status)
        .ok()
        .and_then(|s| StatusCode::from_u16(s).ok())
        .unwrap_or(StatusCode::OK);
    let mut response = (status, axum::Json(body)).into_response();
    response
        .headers_mut()
        .insert("idempotent-replayed", HeaderValue::from_static("true"));
    response
}

/// Keeps the answer for the key's retries. An answer a retry may improve on (a bug, the
/// service not ready) releases the key instead.
async fn keep(state: &AppState, id: Uuid, response: Response) -> Response {
    let status = response.status();
    let retry_may_help =
        status == StatusCode::INTERNAL_SERVER_ERROR || status == StatusCode::SERVICE_UNAVAILABLE;
    let (parts, body) = response.into_parts();
    let bytes = to_bytes(body, usize::MAX).await.unwrap_or_default();
    let stored = if retry_may_help {
        idempotency::release(&state.db, id).await
    } else {
        let json: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        idempotency::complete(&state.db, id, status.as_u16(), json).await
    };
    if let Err(error) = stored {
        tracing::error!(%error, "the answer to an idempotent request could not be kept");
    }
    let mut response = Response::from_parts(parts, Body::from(bytes));
    response.headers_mut().remove(header::CONTENT_LENGTH);
    response
}

fn conflict(code: &'static str, message: &str) -> Response {
    ApiError::ConflictCode {
        code,
        message: message.to_owned(),
    }
    .into_response()
}

fn stored_error(error: PersistenceError) -> ApiError {
    match error {
        PersistenceError::Conflict(_) => ApiError::ConflictCode {
            code: "idempotency_key_in_progress",
            message: "A request with this Idempotency-Key is still being answered; try again \
                      shortly"
                .to_owned(),
        },
        other => other.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fingerprint_tells_bodies_and_paths_apart() {
        let a = fingerprint("POST", "/x", b"{}");
        assert_eq!(a, fingerprint("POST", "/x", b"{}"));
        assert_ne!(a, fingerprint("POST", "/x", b"{\"a\":1}"));
        assert_ne!(a, fingerprint("POST", "/y", b"{}"));
    }

    #[test]
    fn keys_are_visible_ascii_of_bounded_length() {
        assert!(parse_key(&HeaderValue::from_static("order-42/retry_1")).is_ok());
        assert!(parse_key(&HeaderValue::from_static("")).is_err());
        assert!(parse_key(&HeaderValue::from_static("two words")).is_err());
        let long = "k".repeat(256);
        assert!(parse_key(&HeaderValue::from_str(&long).expect("header")).is_err());
    }
}
