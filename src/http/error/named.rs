//! Refusals several handlers share, each worded once: a conversation a person holds, a
//! partition that moved, WhatsApp's 24-hour window, and upstreams that failed or were slow.

use super::ApiError;

impl ApiError {
    /// 409 `conversation_in_human_mode`: a person has the conversation; the assistant does not
    /// answer until it is resumed.
    pub(crate) fn in_human_mode() -> Self {
        Self::ConflictCode {
            code: "conversation_in_human_mode",
            message: "A person has taken this conversation over; the assistant does not answer \
                      it until it is resumed (POST /conversation/{identity_id}/resume/{channel_id})"
                .to_owned(),
        }
    }

    /// 503 `not_owner`: on a cluster, this node does not own `what` (its partition moved);
    /// the forwarding node reads the leases again and retries once.
    pub(crate) fn not_owner(what: &str) -> Self {
        Self::Unavailable {
            code: parley_actors::cluster::NOT_OWNER,
            message: format!(
                "This node does not own the {what} any more; ask again and its owner answers"
            ),
        }
    }

    /// 409 `outside_service_window`: free text outside WhatsApp's 24-hour window.
    pub(crate) fn outside_service_window() -> Self {
        Self::ConflictCode {
            code: "outside_service_window",
            message: "The person has not written on this channel in the last 24 hours: WhatsApp \
                      takes only an approved template now (POST /channels/{channel_id}/waba/send)"
                .to_owned(),
        }
    }

    /// 504: the language model did not answer in time.
    pub(crate) fn model_timed_out() -> Self {
        Self::UpstreamTimeout(
            "The language model did not answer in time; the message is kept".to_owned(),
        )
    }

    /// 502: the language model failed after its retries.
    pub(crate) fn model_failed() -> Self {
        Self::UpstreamFailed("The language model failed to answer; the message is kept".to_owned())
    }

    /// 504: Meta did not answer a send in time (the send goes on).
    pub(crate) fn send_timed_out() -> Self {
        Self::UpstreamTimeout(
            "Meta did not answer in time; the send goes on and its outcome is recorded on the \
             message"
                .to_owned(),
        )
    }

    /// 502: Meta could not be asked about a channel's credentials.
    pub(crate) fn credentials_unverified() -> Self {
        Self::UpstreamFailed(
            "Meta could not be reached to verify the channel's credentials".to_owned(),
        )
    }

    /// 502 `media_refused`: Meta would not take or fetch a file (131053: a type or size it
    /// refuses; 131052: it could not download it); Meta's code and words in `details`.
    pub(crate) fn media_refused(refusal: parley_actors::whatsapp::MetaError) -> Self {
        let code = refusal.code;
        Self::BadGateway {
            code: "media_refused",
            message: format!("Meta refused the file: {}", refusal.message),
            details: vec![super::FieldError {
                path: Vec::new(),
                message: refusal.message,
                code,
            }],
        }
    }

    /// 413 `file_too_large`: the file at `field` is over its kind's limit.
    pub(crate) fn file_too_large(field: &'static str, message: String) -> Self {
        Self::FileTooLarge { field, message }
    }
}
