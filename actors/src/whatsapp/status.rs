//! A status Meta reports about a message Parley sent.

use parley_persistence::MessageStatus;
use serde_json::Value;

use super::error::MetaError;
use super::text::text;

/// What Meta reports about a message Parley sent.
#[derive(Clone, Debug, PartialEq)]
pub struct StatusReport {
    /// The sent message's id.
    pub wamid: String,
    /// `sent`, `delivered`, `read` or `failed`.
    pub status: MessageStatus,
    /// Meta's error for a failure.
    pub error: Option<MetaError>,
}

impl StatusReport {
    /// Reads one raw status; `None` for a status Parley does not track.
    pub fn parse(raw: &Value) -> Option<Self> {
        let wamid = text(&raw["id"])?;
        let status = MessageStatus::parse(raw["status"].as_str()?).filter(|s| {
            matches!(
                s,
                MessageStatus::Sent
                    | MessageStatus::Delivered
                    | MessageStatus::Read
                    | MessageStatus::Failed
            )
        })?;
        let error = raw["errors"].get(0).map(MetaError::from_report);
        Some(Self {
            wamid,
            status,
            error,
        })
    }

    /// Meta's error code of a failure.
    pub fn error_code(&self) -> Option<i64> {
        self.error.as_ref().and_then(|e| e.code)
    }
}
