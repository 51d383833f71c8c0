//! The body of every refusal (DESIGN §4): the sentence a client may see, the machine code and
//! the per-field (or Meta's) details.

use serde::Serialize;

use super::{ApiError, FieldError};

/// The error body as the OpenAPI document names it in `responses(...)`.
pub(crate) type Refusal = ErrorBody<'static>;

/// The error body of every refusal (DESIGN §4).
#[derive(Serialize, utoipa::ToSchema)]
#[schema(
    as = Error,
    example = json!({
        "message": "Invalid request: name is required",
        "error": "validation_failed",
        "details": [{"path": ["name"], "message": "is required"}]
    })
)]
pub(crate) struct ErrorBody<'a> {
    /// What went wrong, as a sentence.
    message: String,
    /// Machine code, e.g. `validation_failed`, `not_found`, `conflict`.
    #[schema(value_type = String)]
    error: &'a str,
    /// Per-field problems (empty when the refusal is not about fields).
    #[schema(value_type = Vec<FieldError>)]
    details: std::borrow::Cow<'a, [FieldError]>,
}

impl ApiError {
    /// The refusal's body, as it is sent: the message a client may see and the per-field (or
    /// Meta's) details.
    pub(crate) fn body(&self) -> ErrorBody<'static> {
        let details = match self {
            Self::MetaRefused(refusal) => vec![FieldError {
                path: Vec::new(),
                message: refusal.message.clone(),
                code: refusal.code,
            }],
            Self::BadRequest { details, .. } | Self::BadGateway { details, .. } => details.clone(),
            Self::FileTooLarge { field, message } => {
                vec![FieldError::new([*field], message.clone())]
            }
            Self::QuotaExceeded(exceeded) => vec![FieldError::new(
                exceeded.quota.split('.'),
                format!(
                    "{} of {} used; resets at {}",
                    exceeded.used,
                    exceeded.limit,
                    exceeded
                        .resets_at
                        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
                ),
            )],
            _ => Vec::new(),
        };
        ErrorBody {
            message: self.public_message(),
            error: self.code(),
            details: std::borrow::Cow::Owned(details),
        }
    }
}
