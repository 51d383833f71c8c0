//! Middleware: request ids, the request span, the metrics and the 500 log, the panic answer
//! and the time limit.
//!
//! Every request passes through all of it, so each piece is a plain `tower` service whose
//! future wraps the inner one in place: `axum::middleware::from_fn` would box the inner
//! service and the future, per layer and per request.

use std::any::Any;
use std::future::Future;
use std::pin::Pin;
use std::sync::LazyLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll, ready};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::{MatchedPath, Request};
use axum::http::{HeaderValue, Response};
use axum::response::IntoResponse;
use tower::{Layer, Service};
use tower_http::request_id::{MakeRequestId, RequestId};
use uuid::Uuid;

use crate::http::error::{ApiError, InternalErrorReport};

/// Longest request id a client may choose.
const MAX_REQUEST_ID: usize = 128;

/// Drops a client's `x-request-id` unless it is a plain token (at most 128 characters of
/// `[A-Za-z0-9._-]`), so that a new one is made: a client cannot write whatever it likes into
/// the logs.
pub(crate) fn drop_unplain_request_id(mut request: Request) -> Request {
    let plain = request
        .headers()
        .get("x-request-id")
        .map(|v| v.to_str().is_ok_and(is_plain_request_id));
    if plain == Some(false) {
        request.headers_mut().remove("x-request-id");
    }
    request
}

/// Makes request ids shaped as UUIDs: the first half of a UUIDv7 taken when the process
/// starts (its millisecond and 12 random bits), then a counter. Unique within the process
/// and, but for two starts in one millisecond drawing the same bits, across restarts; and
/// no call for randomness per request, as a UUIDv4 each time would make.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct RequestIds;

impl MakeRequestId for RequestIds {
    fn make_request_id<B>(&mut self, _: &axum::http::Request<B>) -> Option<RequestId> {
        static START: LazyLock<u64> = LazyLock::new(|| Uuid::now_v7().as_u64_pair().0);
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let id = Uuid::from_u64_pair(*START, NEXT.fetch_add(1, Ordering::Relaxed));
        let mut text = Uuid::encode_buffer();
        HeaderValue::from_str(id.hyphenated().encode_lower(&mut text))
            .ok()
            .map(RequestId::new)
    }
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

/// Counts and times every request (the metrics) and logs every 5xx with its cause; inside the
/// request span, so with its request id.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct ObserveLayer;

impl<S> Layer<S> for ObserveLayer {
    type Service = Observe<S>;

    fn layer(&self, inner: S) -> Observe<S> {
        Observe { inner }
    }
}

/// See [`ObserveLayer`].
#[derive(Clone, Debug)]
pub(crate) struct Observe<S> {
    inner: S,
}

impl<S, B> Service<Request> for Observe<S>
where
    S: Service<Request, Response = Response<B>>,
{
    type Response = Response<B>;
    type Error = S::Error;
    type Future = Observed<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request) -> Self::Future {
        Observed {
            method: crate::metrics::method_label(request.method()),
            route: request.extensions().get::<MatchedPath>().cloned(),
            started: Instant::now(),
            inner: self.inner.call(request),
        }
    }
}

pin_project_lite::pin_project! {
    /// The future of [`Observe`].
    pub(crate) struct Observed<F> {
        #[pin]
        inner: F,
        method: &'static str,
        route: Option<MatchedPath>,
        started: Instant,
    }
}

impl<F, B, E> Future for Observed<F>
where
    F: Future<Output = Result<Response<B>, E>>,
{
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let result = ready!(this.inner.poll(cx));
        if let Ok(response) = &result {
            let status = response.status();
            crate::metrics::http_request(
                this.method,
                this.route.as_ref(),
                status,
                this.started.elapsed(),
            );
            if status.is_server_error() {
                match response.extensions().get::<InternalErrorReport>() {
                    Some(InternalErrorReport(cause)) => {
                        tracing::error!(status = %status, cause = %cause, "request failed");
                    }
                    None => tracing::warn!(status = %status, "request failed"),
                }
            }
        }
        Poll::Ready(result)
    }
}

/// Answers 503 `timeout` when the handler has not produced a response head in its limit.
/// A streaming body, once started, is not cut by this.
#[derive(Clone, Copy, Debug)]
pub(crate) struct LimitDurationLayer(pub(crate) Duration);

impl<S> Layer<S> for LimitDurationLayer {
    type Service = LimitDuration<S>;

    fn layer(&self, inner: S) -> LimitDuration<S> {
        LimitDuration {
            inner,
            limit: self.0,
        }
    }
}

/// See [`LimitDurationLayer`].
#[derive(Clone, Debug)]
pub(crate) struct LimitDuration<S> {
    inner: S,
    limit: Duration,
}

impl<S> Service<Request> for LimitDuration<S>
where
    S: Service<Request, Response = Response<Body>>,
{
    type Response = Response<Body>;
    type Error = S::Error;
    type Future = Limited<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request) -> Self::Future {
        Limited {
            inner: tokio::time::timeout(self.limit, self.inner.call(request)),
            limit: self.limit,
        }
    }
}

pin_project_lite::pin_project! {
    /// The future of [`LimitDuration`].
    pub(crate) struct Limited<F> {
        #[pin]
        inner: tokio::time::Timeout<F>,
        limit: Duration,
    }
}

impl<F, E> Future for Limited<F>
where
    F: Future<Output = Result<Response<Body>, E>>,
{
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        Poll::Ready(match ready!(this.inner.poll(cx)) {
            Ok(result) => result,
            Err(_) => Ok(ApiError::Unavailable {
                code: "timeout",
                message: format!(
                    "The request took longer than {} seconds",
                    this.limit.as_secs()
                ),
            }
            .into_response()),
        })
    }
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

#[cfg(test)]
mod tests {
    use axum::Router;
    use axum::routing::get;
    use serde_json::Value;
    use tower::ServiceExt;

    use super::*;

    async fn get_path(app: &Router, path: &str) -> (u16, Vec<u8>) {
        let request = Request::get(path).body(Body::empty()).expect("request");
        let response = app.clone().oneshot(request).await.expect("answered");
        let status = response.status().as_u16();
        let body = axum::body::to_bytes(response.into_body(), 1 << 16)
            .await
            .expect("body");
        (status, body.to_vec())
    }

    #[tokio::test]
    async fn a_handler_past_the_limit_is_a_503_timeout_and_one_within_it_answers() {
        let app = Router::new()
            .route(
                "/slow",
                get(|| async {
                    tokio::time::sleep(Duration::from_secs(5)).await;
                    "late"
                }),
            )
            .route("/quick", get(|| async { "on time" }))
            .route_layer(LimitDurationLayer(Duration::from_millis(100)));

        let (status, body) = get_path(&app, "/slow").await;
        assert_eq!(status, 503);
        let body: Value = serde_json::from_slice(&body).expect("JSON");
        assert_eq!(body["error"], "timeout", "{body}");

        assert_eq!(get_path(&app, "/quick").await, (200, b"on time".to_vec()));
    }

    #[test]
    fn request_ids_are_distinct_uuids() {
        let request = Request::get("/").body(()).expect("request");
        let ids: Vec<String> = (0..3)
            .map(|_| {
                let id = RequestIds.make_request_id(&request).expect("an id");
                id.header_value().to_str().expect("text").to_owned()
            })
            .collect();
        for id in &ids {
            assert!(Uuid::parse_str(id).is_ok(), "{id}");
        }
        assert!(ids[0] != ids[1] && ids[1] != ids[2], "{ids:?}");
    }
}
