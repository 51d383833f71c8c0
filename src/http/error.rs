//! The one error type of the HTTP layer and its body, `{"message", "error", "details"}`.
//! How each domain error of the actors becomes one is in `domain`.

mod body;
mod domain;
mod named;

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use parley_actors::whatsapp::MetaError;
use parley_persistence::PersistenceError;
use serde::Serialize;

pub(crate) use self::body::Refusal;

/// Result of a handler.
pub(crate) type Result<T, E = ApiError> = std::result::Result<T, E>;

/// One step of the path to a field in a request: an object key or an array index.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(untagged)]
pub(crate) enum PathSegment {
    /// Object key.
    Key(String),
    /// Array index.
    Index(usize),
}

impl From<&str> for PathSegment {
    fn from(key: &str) -> Self {
        Self::Key(key.to_owned())
    }
}

impl From<usize> for PathSegment {
    fn from(index: usize) -> Self {
        Self::Index(index)
    }
}

/// What is wrong with one field.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub(crate) struct FieldError {
    /// Where the field is, e.g. `["languages", 0]`.
    pub(crate) path: Vec<PathSegment>,
    /// What is wrong, as a sentence.
    pub(crate) message: String,
    /// An upstream's own error code (Meta's), when the problem comes from there.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) code: Option<i64>,
}

impl FieldError {
    /// A problem with the field at `path`.
    pub(crate) fn new(
        path: impl IntoIterator<Item = impl Into<PathSegment>>,
        message: impl Into<String>,
    ) -> Self {
        Self {
            path: path.into_iter().map(Into::into).collect(),
            message: message.into(),
            code: None,
        }
    }
}

/// Every way a request can fail, each with its status and machine code.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ApiError {
    /// 400: the request is not acceptable as sent.
    #[error("{message}")]
    BadRequest {
        /// Machine code, e.g. `validation_failed`.
        code: &'static str,
        /// Human sentence.
        message: String,
        /// Per-field problems.
        details: Vec<FieldError>,
    },
    /// 401: no key, an unknown key, or a revoked or expired one.
    #[error("User not authenticated")]
    Unauthenticated,
    /// 401: a webhook whose signature is missing or wrong.
    #[error("Webhook signature refused: {0}")]
    WebhookSignature(&'static str),
    /// 403: the key lacks a permission or access to the workspace.
    #[error("{0}")]
    Forbidden(String),
    /// 404: no such resource in the caller's reach (other workspaces' resources included).
    #[error("{0} not found")]
    NotFound(&'static str),
    /// 405: the path exists but not with this method.
    #[error("Method not allowed")]
    MethodNotAllowed,
    /// 409: the request contradicts the current state.
    #[error("{0}")]
    Conflict(String),
    /// 409 with a machine code of its own (`flow_active`, `idempotency_key_reused`, …).
    #[error("{message}")]
    ConflictCode {
        /// Machine code.
        code: &'static str,
        /// Human sentence.
        message: String,
    },
    /// 429: the client is going too fast; `Retry-After` says when to come back.
    #[error("{message}")]
    RateLimited {
        /// Human sentence.
        message: String,
        /// Seconds until a try may succeed (at least 1).
        retry_after_secs: u64,
    },
    /// 429 `quota_exceeded`: the workspace used up a quota; `details` names it and
    /// `Retry-After` says when it resets.
    #[error("{0}")]
    QuotaExceeded(parley_actors::quotas::Exceeded),
    /// 416: the `Range` asked for lies outside a file of `size` bytes.
    #[error("The range asked for lies outside the file, which has {size} bytes")]
    RangeNotSatisfiable {
        /// The file's size, for `Content-Range: bytes */{size}`.
        size: u64,
    },
    /// 413 `file_too_large`: a file is over its kind's limit.
    #[error("Invalid request: {field} {message}")]
    FileTooLarge {
        /// The field that carried it.
        field: &'static str,
        /// What is wrong, as a phrase after the field's name.
        message: String,
    },
    /// 413: the body is over the configured limit.
    #[error("Request body is larger than the limit of {0} bytes")]
    PayloadTooLarge(usize),
    /// 502: an upstream (the model, Meta, an MCP server) failed.
    #[error("{0}")]
    UpstreamFailed(String),
    /// 502 with a machine code and details of its own (`mcp_unreachable`).
    #[error("{message}")]
    BadGateway {
        /// Machine code.
        code: &'static str,
        /// Human sentence.
        message: String,
        /// What failed where.
        details: Vec<FieldError>,
    },
    /// 502: Meta refused the request; its code and message go in `details`.
    #[error("Meta refused the request: {}", .0.message)]
    MetaRefused(MetaError),
    /// 504: an upstream did not answer in time.
    #[error("{0}")]
    UpstreamTimeout(String),
    /// 503: the service cannot serve yet, or the request ran past its time limit.
    #[error("{message}")]
    Unavailable {
        /// Machine code, `not_ready` or `timeout`.
        code: &'static str,
        /// Human sentence.
        message: String,
    },
    /// 500: a bug or an unexpected failure; logged, never shown.
    #[error(transparent)]
    Internal(#[from] anyhow::Error),
}

impl ApiError {
    /// 400 `validation_failed` with the given field problems.
    pub(crate) fn invalid(details: Vec<FieldError>) -> Self {
        let message = match details.as_slice() {
            [only] => format!("Invalid request: {}", describe(only)),
            _ => "Invalid request: see details".to_owned(),
        };
        Self::BadRequest {
            code: "validation_failed",
            message,
            details,
        }
    }

    /// A write refused by a unique constraint, said as `message` (409); any other failure
    /// as itself.
    pub(crate) fn unique(error: PersistenceError, message: impl Into<String>) -> Self {
        match error {
            PersistenceError::Conflict(_) => Self::Conflict(message.into()),
            other => other.into(),
        }
    }

    /// 403: the key lacks `permission`.
    pub(crate) fn lacking(permission: crate::domain::Permission) -> Self {
        Self::Forbidden(format!("This API key lacks the '{permission}' permission"))
    }

    /// For a 429, the seconds after which a try may succeed.
    pub(crate) fn retry_after_secs(&self) -> Option<u64> {
        match self {
            Self::RateLimited {
                retry_after_secs, ..
            } => Some(*retry_after_secs),
            Self::QuotaExceeded(exceeded) => Some(exceeded.retry_after_secs()),
            _ => None,
        }
    }

    /// 429: too many failed authentications from one address; a try may succeed after
    /// `retry_after_secs`.
    pub(crate) fn too_many_failures(retry_after_secs: u64) -> Self {
        Self::RateLimited {
            message: format!(
                "Too many failed authentications from this address; try again in \
                 {retry_after_secs} s"
            ),
            retry_after_secs: retry_after_secs.max(1),
        }
    }

    /// 409: a unique value is already taken.
    pub(crate) fn taken() -> Self {
        Self::Conflict("A resource with the same unique value already exists".to_owned())
    }

    /// 503 `not_ready`: a part of the service is (re)starting.
    pub(crate) fn not_ready(message: impl Into<String>) -> Self {
        Self::Unavailable {
            code: "not_ready",
            message: message.into(),
        }
    }

    /// 400 `validation_failed` for one field.
    pub(crate) fn invalid_field(
        path: impl IntoIterator<Item = impl Into<PathSegment>>,
        message: impl Into<String>,
    ) -> Self {
        Self::invalid(vec![FieldError::new(path, message)])
    }

    pub(crate) fn status(&self) -> StatusCode {
        match self {
            Self::BadRequest { .. } => StatusCode::BAD_REQUEST,
            Self::Unauthenticated | Self::WebhookSignature(_) => StatusCode::UNAUTHORIZED,
            Self::Forbidden(_) => StatusCode::FORBIDDEN,
            Self::NotFound(_) => StatusCode::NOT_FOUND,
            Self::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            Self::Conflict(_) | Self::ConflictCode { .. } => StatusCode::CONFLICT,
            Self::PayloadTooLarge(_) | Self::FileTooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            Self::RangeNotSatisfiable { .. } => StatusCode::RANGE_NOT_SATISFIABLE,
            Self::RateLimited { .. } | Self::QuotaExceeded(_) => StatusCode::TOO_MANY_REQUESTS,
            Self::UpstreamFailed(_) | Self::MetaRefused(_) | Self::BadGateway { .. } => {
                StatusCode::BAD_GATEWAY
            }
            Self::UpstreamTimeout(_) => StatusCode::GATEWAY_TIMEOUT,
            Self::Unavailable { .. } => StatusCode::SERVICE_UNAVAILABLE,
            Self::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// The sentence a client may see: a bug's cause stays in the log.
    pub(crate) fn public_message(&self) -> String {
        match self {
            Self::Internal(_) => "Internal server error".to_owned(),
            other => other.to_string(),
        }
    }

    pub(crate) fn code(&self) -> &'static str {
        match self {
            Self::BadRequest { code, .. }
            | Self::Unavailable { code, .. }
            | Self::ConflictCode { code, .. }
            | Self::BadGateway { code, .. } => code,
            Self::Unauthenticated => "unauthenticated",
            Self::WebhookSignature(_) => "invalid_signature",
            Self::Forbidden(_) => "forbidden",
            Self::NotFound(_) => "not_found",
            Self::MethodNotAllowed => "method_not_allowed",
            Self::Conflict(_) => "conflict",
            Self::PayloadTooLarge(_) => "payload_too_large",
            Self::FileTooLarge { .. } => "file_too_large",
            Self::RangeNotSatisfiable { .. } => "range_not_satisfiable",
            Self::RateLimited { .. } => "rate_limited",
            Self::QuotaExceeded(_) => "quota_exceeded",
            Self::UpstreamFailed(_) | Self::MetaRefused(_) => "upstream_failed",
            Self::UpstreamTimeout(_) => "upstream_timeout",
            Self::Internal(_) => "internal_error",
        }
    }
}

fn describe(error: &FieldError) -> String {
    let path: Vec<String> = error
        .path
        .iter()
        .map(|s| match s {
            PathSegment::Key(k) => k.clone(),
            PathSegment::Index(i) => i.to_string(),
        })
        .collect();
    if path.is_empty() {
        error.message.clone()
    } else {
        format!("{} {}", path.join("."), error.message)
    }
}

/// The text of a 500's cause, handed to the logging middleware through the response's
/// extensions so that the body never carries it.
#[derive(Clone, Debug)]
pub(crate) struct InternalErrorReport(pub(crate) String);

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut response = (self.status(), Json(self.body())).into_response();
        if let Some(retry_after_secs) = self.retry_after_secs() {
            response.headers_mut().insert(
                axum::http::header::RETRY_AFTER,
                axum::http::HeaderValue::from(retry_after_secs),
            );
        }
        if let Self::RangeNotSatisfiable { size } = &self
            && let Ok(value) = axum::http::HeaderValue::from_str(&format!("bytes */{size}"))
        {
            response
                .headers_mut()
                .insert(axum::http::header::CONTENT_RANGE, value);
        }
        if let Self::Unavailable { code, .. } = &self
            && *code == parley_actors::cluster::NOT_OWNER
        {
            response.headers_mut().insert(
                parley_actors::cluster::NOT_OWNER_HEADER,
                axum::http::HeaderValue::from_static("1"),
            );
        }
        if let Self::Internal(cause) = &self {
            response
                .extensions_mut()
                .insert(InternalErrorReport(format!("{cause:#}")));
        }
        response
    }
}
