//! Meta's errors, typed once: the error object of a Graph API answer or of a `failed` delivery
//! report, and the [`MetaErrorKind`] that decides what every sender does next (the channel's
//! send job, flows, the send endpoint, the opt-out on 131050). Classified by the HTTP status
//! and Meta's code together: Meta's 5xx answers carry codes too (1, 2, 131000, 131016), and
//! those are worth another try.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::text::text;

/// Meta's code for a number over its throughput (back off; every sender of the number waits).
pub const THROUGHPUT_EXCEEDED: i64 = 130_429;
/// Meta's code for too many messages to one recipient (wait before that recipient only).
pub const PAIR_RATE_LIMIT: i64 = 131_056;
/// Meta's code for free text more than 24 hours after the person's last message.
pub const OUTSIDE_WINDOW: i64 = 131_047;
/// Meta's code for a person who stopped marketing messages from the business (an opt-out).
pub const STOPPED_MARKETING: i64 = 131_050;
/// Meta's code for an access token it refuses.
pub const INVALID_TOKEN: i64 = 190;

/// What a Meta error means for the message and the number.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MetaErrorKind {
    /// Too fast (130429 for the number, 131056 for one recipient): try again after a wait.
    Throttled,
    /// This recipient cannot get the message (undeliverable, a marketing cap, stopped marketing
    /// messages): final for them, the number is fine.
    Recipient,
    /// Free text outside the 24-hour window: only a template may go.
    Window,
    /// The channel's credentials are refused (190): nothing more goes out until they change.
    Credentials,
    /// Meta had trouble (a 5xx, its codes 1, 2, 131000, 131016): the same message may succeed
    /// later.
    Transient,
    /// Meta refused this message for good (an invalid parameter, a template problem).
    Permanent,
}

impl MetaErrorKind {
    /// Whether the same message may go through if sent again later.
    pub fn is_retryable(self) -> bool {
        matches!(self, Self::Throttled | Self::Transient)
    }
}

/// An error object Meta answered, or reported on a message it could not deliver.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MetaError {
    /// Meta's error code (`130429`, `131026`, `190`, …); `None` when Meta gave none.
    pub code: Option<i64>,
    /// Meta's message.
    pub message: String,
    /// Meta's short title (delivery reports carry one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Meta's `error_data.details`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<String>,
    /// The HTTP status of the answer that carried it (none for a delivery report).
    #[serde(skip)]
    pub http_status: Option<u16>,
}

impl MetaError {
    /// An error object of a Graph API answer (`{"error": {...}}`'s inside), with its status.
    pub fn from_answer(error: &Value, http_status: u16) -> Self {
        Self {
            code: error["code"].as_i64(),
            message: text(&error["message"]).unwrap_or_else(|| "unknown error".to_owned()),
            title: text(&error["error_user_title"]),
            details: text(&error["error_data"]["details"]),
            http_status: Some(http_status),
        }
    }

    /// A non-2xx answer without an error object: the status says it all.
    pub fn bare(http_status: u16, body: &str) -> Self {
        Self {
            code: None,
            message: body.chars().take(200).collect(),
            title: None,
            details: None,
            http_status: Some(http_status),
        }
    }

    /// One error of a `failed` delivery report (`statuses[].errors[0]`).
    pub fn from_report(error: &Value) -> Self {
        Self {
            code: error["code"].as_i64(),
            message: text(&error["message"])
                .or_else(|| text(&error["title"]))
                .unwrap_or_else(|| "failed".to_owned()),
            title: text(&error["title"]),
            details: text(&error["error_data"]["details"]),
            http_status: None,
        }
    }

    /// What the error means, by Meta's code and the answer's status together.
    pub fn kind(&self) -> MetaErrorKind {
        match self.code {
            Some(INVALID_TOKEN) => MetaErrorKind::Credentials,
            Some(THROUGHPUT_EXCEEDED | PAIR_RATE_LIMIT) => MetaErrorKind::Throttled,
            Some(OUTSIDE_WINDOW) => MetaErrorKind::Window,
            // Undeliverable, a marketing cap for the user, stopped marketing, spam limit.
            Some(131_026 | 131_049 | STOPPED_MARKETING | 131_048) => MetaErrorKind::Recipient,
            // Meta's own trouble: unknown error, service down, something went wrong.
            Some(1 | 2 | 131_000 | 131_016) => MetaErrorKind::Transient,
            _ if self.http_status.is_some_and(|s| s >= 500 || s == 429) => MetaErrorKind::Transient,
            _ => MetaErrorKind::Permanent,
        }
    }

    /// The error as it is stored with a message and shown by the API.
    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

impl std::fmt::Display for MetaError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.code {
            Some(code) => write!(f, "Meta error {code}: {}", self.message),
            None => write!(f, "Meta error: {}", self.message),
        }
    }
}

impl std::error::Error for MetaError {}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn answered(code: i64, status: u16) -> MetaError {
        MetaError::from_answer(&json!({"code": code, "message": "x"}), status)
    }

    #[test]
    fn a_coded_5xx_is_transient_and_the_same_code_on_a_4xx_is_not() {
        assert_eq!(answered(131_000, 500).kind(), MetaErrorKind::Transient);
        assert_eq!(answered(100, 503).kind(), MetaErrorKind::Transient);
        assert_eq!(answered(100, 400).kind(), MetaErrorKind::Permanent);
        assert_eq!(answered(2, 400).kind(), MetaErrorKind::Transient);
    }

    #[test]
    fn codes_name_their_kind_whatever_the_status() {
        assert_eq!(answered(190, 401).kind(), MetaErrorKind::Credentials);
        assert_eq!(answered(130_429, 400).kind(), MetaErrorKind::Throttled);
        assert_eq!(answered(131_056, 400).kind(), MetaErrorKind::Throttled);
        assert_eq!(answered(131_047, 400).kind(), MetaErrorKind::Window);
        assert_eq!(answered(131_050, 400).kind(), MetaErrorKind::Recipient);
        assert!(!MetaErrorKind::Recipient.is_retryable());
    }

    #[test]
    fn a_report_error_keeps_its_title_and_details() {
        let error = MetaError::from_report(&json!({"code": 131_026, "title": "Undeliverable",
                                                   "error_data": {"details": "d"}}));
        assert_eq!(error.message, "Undeliverable");
        assert_eq!(error.to_json()["details"], "d");
        assert_eq!(error.kind(), MetaErrorKind::Recipient);
    }
}
