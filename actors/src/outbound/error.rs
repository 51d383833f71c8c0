//! Why a message did not go out, as every sender hears it.

use parley_persistence::PersistenceError;
use uuid::Uuid;

use crate::channel::SendError;
use crate::quotas::{Exceeded, QuotaError};
use crate::tree::RuntimeError;
use crate::whatsapp::GraphError;

/// Why a message did not go out.
#[derive(Clone, Debug, thiserror::Error)]
pub enum OutboundError {
    /// The channel has no template of that name in that language.
    #[error("the channel has no template of that name and language")]
    TemplateNotFound,
    /// The template is a carousel and the send said otherwise, or the other way round.
    #[error("the template's shape does not match the send's template type")]
    TemplateShape,
    /// The send gives more or fewer parameters than the template has placeholders.
    #[error(transparent)]
    ParameterCount(#[from] crate::whatsapp::template::ParameterMismatch),
    /// Meta could not list the channel's templates.
    #[error(transparent)]
    Templates(#[from] GraphError),
    /// The message was stored and its send failed; the failure is recorded on it.
    #[error("{error}")]
    NotSent {
        /// The stored message.
        message_id: Uuid,
        /// Why it was not sent.
        error: SendError,
    },
    /// The identity has no phone number to send to.
    #[error("the identity has no phone number")]
    NoPhone,
    /// Free text outside the 24-hour window since the person's last message; nothing stored.
    #[error("outside the 24-hour window since the person's last message; send a template")]
    OutsideWindow,
    /// The channel is not active (it awaits credentials); nothing stored.
    #[error("the channel is not active")]
    ChannelInactive,
    /// The send did not finish within the caller's patience; it goes on and is recorded.
    #[error("the send did not finish in time; it goes on and is recorded")]
    TimedOut,
    /// The database failed.
    #[error("storage failed: {0}")]
    Storage(String),
    /// The actors could not be reached.
    #[error(transparent)]
    Unavailable(#[from] RuntimeError),
    /// The workspace's message quota is used up; nothing stored.
    #[error(transparent)]
    QuotaExceeded(Exceeded),
}

impl From<QuotaError> for OutboundError {
    fn from(error: QuotaError) -> Self {
        match error {
            QuotaError::Exceeded(exceeded) => Self::QuotaExceeded(exceeded),
            QuotaError::Storage(error) => error.into(),
        }
    }
}

impl From<PersistenceError> for OutboundError {
    /// A database that cannot be reached or written right now makes the send unavailable (a
    /// 503 to an API caller); anything else is a storage failure.
    fn from(error: PersistenceError) -> Self {
        if error.is_unavailable() {
            tracing::warn!(%error, "a send waits for the database");
            return Self::Unavailable(RuntimeError::Unavailable(
                "the database cannot be reached or written right now".to_owned(),
            ));
        }
        Self::Storage(error.to_string())
    }
}
