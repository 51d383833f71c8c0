//! What a send asks of a channel actor and what it answers.

use parley_persistence::MessageStatus;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use uuid::Uuid;

use crate::tree::RuntimeError;
use crate::whatsapp::{MetaError, Outgoing};

/// Meta accepted the message (or the sandbox recorded it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Accepted {
    /// The message's platform id.
    pub platform_message_id: String,
    /// Sent (accepted by Meta) or delivered (sandbox).
    pub status: MessageStatus,
}

/// Why a message was not sent.
#[derive(Clone, Debug, thiserror::Error, PartialEq, Eq)]
pub enum SendError {
    /// The channel does not exist (any more).
    #[error("the channel does not exist")]
    UnknownChannel,
    /// The channel is inactive.
    #[error("the channel is not active")]
    Inactive,
    /// Meta refused the credentials earlier (190); new ones are needed.
    #[error("the channel's credentials are invalid: {0}")]
    CredentialsInvalid(String),
    /// More than 24 hours since the person's last message: only a template may be sent.
    #[error("outside the 24-hour window since the person's last message; send a template")]
    WindowClosed,
    /// Meta refused the message (or kept failing with the same error until the retries ran
    /// out); its kind says whether it is worth another try later.
    #[error("Meta refused the message: {0}")]
    Refused(MetaError),
    /// Meta could not be reached or kept failing; the message may be tried again later.
    #[error("Meta could not take the message: {0}")]
    Unavailable(String),
    /// The stored message was not pending: another sender has it, or it was sent already.
    #[error("the message is being sent or was sent already")]
    AlreadyTaken,
    /// The database failed.
    #[error("storage failed: {0}")]
    Storage(String),
    /// This node does not own the channel (a cluster's partition moved); its owner sends.
    #[error("this node does not own the channel")]
    NotOwner,
}

impl SendError {
    /// The error object stored with a failed message.
    pub fn to_json(&self) -> Value {
        match self {
            Self::Refused(error) => error.to_json(),
            Self::CredentialsInvalid(message) => json!({"code": 190, "message": message}),
            Self::WindowClosed => json!({"code": 131047, "message": self.to_string()}),
            other => json!({"code": null, "message": other.to_string()}),
        }
    }

    /// Whether trying again later may succeed (Meta or the database was down, Meta's own
    /// trouble, or a throttle that outlasted the retries).
    pub fn is_transient(&self) -> bool {
        match self {
            Self::Unavailable(_) | Self::Storage(_) | Self::NotOwner => true,
            Self::Refused(error) => error.kind().is_retryable(),
            _ => false,
        }
    }
}

impl From<parley_persistence::PersistenceError> for SendError {
    fn from(error: parley_persistence::PersistenceError) -> Self {
        Self::Storage(error.to_string())
    }
}

impl From<RuntimeError> for SendError {
    fn from(error: RuntimeError) -> Self {
        Self::Unavailable(error.to_string())
    }
}

/// A send asked of a channel actor (and, on a cluster, of its owner over HTTP).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SendRequest {
    /// The stored message to claim before each attempt and to record the answer on; `None`
    /// for a message nobody stored.
    pub message_id: Option<Uuid>,
    /// What to send to whom.
    pub outgoing: Outgoing,
    /// Whether a stored message Meta could not take (down, timing out) stays pending for a
    /// later try (replies, retried with their webhook event) rather than being failed (a
    /// caller who is told it failed).
    pub keep_when_unavailable: bool,
    /// Whether the channel tries again what Meta asks to retry (130429, 131056, 5xx, no
    /// answer), up to `whatsapp.max_retries`: replies, the send endpoint and tasks, which have
    /// no retry policy of their own. A flow's send is one attempt: the flow retries it under
    /// its own `maxRetries` and `retryDelayMs`, each attempt counted.
    pub channel_retries: bool,
    /// Where it waits for the number's room (a peer that does not say sends a direct message).
    #[serde(default)]
    pub lane: Lane,
}

/// Where a send waits for its number's room. Meta counts a number's messages together, and a
/// campaign at the number's full rate leaves none spare: a person waiting for an answer goes
/// first, so campaign sends wait while a direct message does.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Lane {
    /// A message someone waits for: a reply, an operator's or the send endpoint's message, a
    /// task's.
    #[default]
    Direct,
    /// A flow's send, which yields to direct messages.
    Campaign,
}

/// A send's answer as one node tells another (`SendError` keeps Meta's HTTP status, which
/// decides its kind, out of its own serialized form).
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "answer")]
pub enum SendAnswer {
    /// [`Accepted`].
    Accepted {
        /// The message's platform id.
        platform_message_id: String,
        /// Sent or delivered.
        status: MessageStatus,
    },
    /// [`SendError::Refused`], with the HTTP status Meta answered with.
    Refused {
        /// Meta's error.
        error: MetaError,
        /// The HTTP status of Meta's answer.
        http_status: Option<u16>,
    },
    /// Any other [`SendError`], by its kind.
    Failed {
        /// `unknown_channel`, `inactive`, `credentials_invalid`, `window_closed`,
        /// `unavailable`, `already_taken`, `storage`, `not_owner`.
        kind: String,
        /// Its sentence.
        message: String,
    },
}

impl From<Result<Accepted, SendError>> for SendAnswer {
    fn from(outcome: Result<Accepted, SendError>) -> Self {
        let (kind, message) = match outcome {
            Ok(accepted) => {
                return Self::Accepted {
                    platform_message_id: accepted.platform_message_id,
                    status: accepted.status,
                };
            }
            Err(SendError::Refused(error)) => {
                let http_status = error.http_status;
                return Self::Refused { error, http_status };
            }
            Err(SendError::CredentialsInvalid(m)) => ("credentials_invalid", m),
            Err(SendError::Unavailable(m)) => ("unavailable", m),
            Err(SendError::Storage(m)) => ("storage", m),
            Err(other) => {
                let kind = match other {
                    SendError::UnknownChannel => "unknown_channel",
                    SendError::Inactive => "inactive",
                    SendError::WindowClosed => "window_closed",
                    SendError::AlreadyTaken => "already_taken",
                    _ => "not_owner",
                };
                (kind, other.to_string())
            }
        };
        Self::Failed {
            kind: kind.to_owned(),
            message,
        }
    }
}

impl From<SendAnswer> for Result<Accepted, SendError> {
    fn from(answer: SendAnswer) -> Self {
        match answer {
            SendAnswer::Accepted {
                platform_message_id,
                status,
            } => Ok(Accepted {
                platform_message_id,
                status,
            }),
            SendAnswer::Refused {
                mut error,
                http_status,
            } => {
                error.http_status = http_status;
                Err(SendError::Refused(error))
            }
            SendAnswer::Failed { kind, message } => Err(match kind.as_str() {
                "unknown_channel" => SendError::UnknownChannel,
                "inactive" => SendError::Inactive,
                "credentials_invalid" => SendError::CredentialsInvalid(message),
                "window_closed" => SendError::WindowClosed,
                "already_taken" => SendError::AlreadyTaken,
                "storage" => SendError::Storage(message),
                "not_owner" => SendError::NotOwner,
                _ => SendError::Unavailable(message),
            }),
        }
    }
}
