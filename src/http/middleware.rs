//! Middleware: the request span, the 500 log, the panic answer and the time limit.

use std::any::Any;
use std::time::Duration;

use axum::body::Body;
use axum::extract::Request;
use axum::http::Response;
use axum::middleware::Next;
use axum::response::IntoResponse;

use crate::http::error::{ApiError, InternalErrorReport};
use crate::http::extract::BodyLimit;

/// Longest request id a client may choose.
const MAX_REQUEST_ID: usize = 128;

/// Drops a client's `x-request-id` unless it is a plain token (at most 128 characters of
/// `[A-Za-z0-9._-]`), so that a new one is made: a client cannot write whatever it likes into
/// the logs.
pub(crate) async fn drop_unplain_request_id(mut request: Request, next: Next) -> Response<Body> {
    let plain = request
        .headers()
        .get("x-request-id")
        .map(|v| v.to_str().is_ok_and(is_plain_request_id));
    if plain == Some(false) {
        request.headers_mut().remove("x-request-id");
    }
    next.run(request).await
}

/// Whether a client's request id may be kept.
fn is_plain_request_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= MAX_REQUEST_ID
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// The span every request runs in; handlers and the auth extractor fill in the ids.
pub(crate) fn request_span(request: &Request) -> tracing::Span {
    let request_id = request
        .headers()
        .get("x-request-id")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    tracing::info_span!(
        "request",
        method = %request.method(),
        path = %request.uri().path(),
        request_id,
        workspace_id = tracing::field::Empty,
        api_key_id = tracing::field::Empty,
    )
}

/// Logs every 5xx with its cause, inside the request span (so with its request id).
pub(crate) async fn log_server_errors(request: Request, next: Next) -> Response<Body> {
    let response = next.run(request).await;
    if response.status().is_server_error() {
        match response.extensions().get::<InternalErrorReport>() {
            Some(InternalErrorReport(cause)) => {
                tracing::error!(status = %response.status(), cause = %cause, "request failed");
            }
            None => tracing::warn!(status = %response.status(), "request failed"),
        }
    }
    response
}

/// Answers 503 `timeout` when the handler has not produced a response head in `limit`.
/// A streaming body, once started, is not cut by this.
pub(crate) async fn limit_duration(
    limit: Duration,
    request: Request,
    next: Next,
) -> Response<Body> {
    match tokio::time::timeout(limit, next.run(request)).await {
        Ok(response) => response,
        Err(_) => ApiError::Unavailable {
            code: "timeout",
            message: format!("The request took longer than {} seconds", limit.as_secs()),
        }
        .into_response(),
    }
}

/// Tells the JSON extractor the body limit so that a 413 can state it.
pub(crate) async fn announce_body_limit(
    limit: usize,
    mut request: Request,
    next: Next,
) -> Response<Body> {
    request.extensions_mut().insert(BodyLimit(limit));
    next.run(request).await
}

/// Turns a handler panic into our 500 body; the panic message goes to the log only.
pub(crate) fn panic_response(panic: Box<dyn Any + Send + 'static>) -> Response<Body> {
    let detail = panic
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| panic.downcast_ref::<&str>().copied())
        .unwrap_or("unknown panic");
    ApiError::Internal(anyhow::anyhow!("handler panicked: {detail}")).into_response()
}
