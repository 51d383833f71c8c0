//! What a turn is asked and what it answers: the request with its origin (an API caller,
//! perhaps streaming, or a WhatsApp sender), the outcome, and why a turn can fail.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::sync::mpsc;
use uuid::Uuid;

use crate::channel::{Accepted, SendError};
use crate::domain::Phone;
use crate::llm::{LlmError, Usage};
use crate::outbound::{Outbox, Parcel};
use crate::tree::RuntimeError;

/// One message of an identity to answer.
#[derive(Clone, Debug)]
pub struct TurnRequest {
    /// The channel it arrived on (or is addressed to).
    pub channel_id: Uuid,
    /// Its text.
    pub text: String,
    /// Who is waiting for the reply.
    pub origin: TurnOrigin,
    /// What an API caller attached to the message; kept on the stored message.
    pub metadata: Option<Value>,
    /// The files the person sent with it, stored with the message for the media worker to
    /// fetch.
    pub attachments: Vec<crate::whatsapp::message::InboundMedia>,
}

/// Who a turn answers, which decides what happens to the reply.
#[derive(Clone, Debug)]
pub enum TurnOrigin {
    /// An API caller waits for the reply; a streaming caller also gets [`TurnEvent`]s.
    Api {
        /// Where to send events as the turn goes, for streaming callers.
        events: Option<mpsc::Sender<TurnEvent>>,
    },
    /// A WhatsApp message. The reply is stored `pending` for the channel to send, and a turn
    /// for a message already answered answers the stored reply instead of asking the model
    /// again.
    WhatsApp {
        /// WhatsApp's id of the inbound message.
        wamid: String,
        /// The sender, who receives the reply.
        from: Phone,
        /// Whether an earlier attempt may have stored the message (and its reply): false only
        /// on the first processing of an event the webhook has just stored, which spares the
        /// turn looking for them.
        retried: bool,
    },
    /// A scheduled follow-up: no message of the person; the assistant writes to them with
    /// these instructions, and the reply is stored `pending` for the channel to send.
    FollowUp {
        /// What the assistant is asked to do.
        instructions: String,
        /// The person's phone, who receives the message.
        to: Phone,
    },
}

/// What a streaming caller hears while its turn runs (and, on a cluster, what the identity's
/// owner tells the node the caller asked).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TurnEvent {
    /// The turn was accepted: the identity, channel and assistant exist; the model is next.
    Accepted,
    /// A piece of the reply, as the model produced it.
    Token(String),
}

impl TurnOrigin {
    /// A bounded label for metrics: `api`, `whatsapp` or `follow_up`.
    pub(crate) fn label(&self) -> &'static str {
        match self {
            Self::Api { .. } => "api",
            Self::WhatsApp { .. } => "whatsapp",
            Self::FollowUp { .. } => "follow_up",
        }
    }
}

impl TurnRequest {
    pub(crate) fn wamid(&self) -> Option<&str> {
        match &self.origin {
            TurnOrigin::WhatsApp { wamid, .. } => Some(wamid),
            TurnOrigin::Api { .. } | TurnOrigin::FollowUp { .. } => None,
        }
    }

    /// The WhatsApp id of a message an earlier attempt may have stored.
    pub(crate) fn wamid_to_resume(&self) -> Option<&str> {
        match &self.origin {
            TurnOrigin::WhatsApp {
                wamid,
                retried: true,
                ..
            } => Some(wamid),
            _ => None,
        }
    }

    pub(crate) fn events(&self) -> Option<&mpsc::Sender<TurnEvent>> {
        match &self.origin {
            TurnOrigin::Api { events } => events.as_ref(),
            TurnOrigin::WhatsApp { .. } | TurnOrigin::FollowUp { .. } => None,
        }
    }

    /// The follow-up instructions, for a scheduled follow-up.
    pub(crate) fn follow_up(&self) -> Option<&str> {
        match &self.origin {
            TurnOrigin::FollowUp { instructions, .. } => Some(instructions),
            _ => None,
        }
    }
}

/// A tool the assistant used during a turn.
#[derive(Clone, Debug, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ToolCallRecord {
    /// Tool name.
    pub name: String,
    /// Arguments as the model gave them (parsed when they were JSON).
    pub arguments: Value,
    /// What the tool answered.
    pub result: Value,
}

/// The answer of a turn (it crosses between the nodes of a cluster as it is).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct TurnOutcome {
    /// The conversation the turn belongs to.
    pub conversation_id: Uuid,
    /// The stored reply.
    pub message_id: Uuid,
    /// The reply's text.
    pub reply: String,
    /// Tools used on the way.
    pub tool_calls: Vec<ToolCallRecord>,
    /// Tokens used by every model call of the turn.
    pub usage: Usage,
    /// Whether the reply is the assistant's fallback message because the model failed.
    pub fallback: bool,
    /// For a reply stored for a channel to send (a WhatsApp sender, a follow-up), what goes
    /// on the wire; `None` for an answer to an API caller, or a reply an earlier attempt
    /// stored (sent by what the table holds, if it is still pending).
    pub parcel: Option<Parcel>,
}

impl TurnOutcome {
    /// Sends the reply this turn stored for a channel, if it is still pending.
    ///
    /// # Errors
    /// Why it was not sent; [`SendError::AlreadyTaken`] when it is not pending any more.
    pub async fn deliver(&self, outbox: &Outbox) -> Result<Accepted, SendError> {
        match &self.parcel {
            Some(parcel) => outbox.deliver(parcel.clone()).await,
            None => outbox.deliver_stored(self.message_id).await,
        }
    }
}

/// Why a turn produced no reply (it crosses between the nodes of a cluster as it is).
#[derive(Clone, Debug, thiserror::Error, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "error", content = "detail")]
pub enum TurnError {
    /// The identity does not exist (any more).
    #[error("identity not found")]
    IdentityNotFound,
    /// The channel does not exist in the identity's workspace.
    #[error("channel not found")]
    ChannelNotFound,
    /// The channel has no synced worker, or the worker no assistant.
    #[error("the channel has no synced worker with an assistant")]
    NoAssistant,
    /// The model failed and the assistant has no fallback message.
    #[error(transparent)]
    Llm(LlmError),
    /// The instructions could not be rendered.
    #[error("the assistant's instructions could not be rendered: {0}")]
    Template(String),
    /// The database failed.
    #[error("storage failed: {0}")]
    Storage(String),
    /// The turn did not finish within the caller's patience; it goes on and is stored.
    #[error("the turn did not finish in time")]
    Timeout,
    /// A person has taken the conversation over: the assistant does not answer it (a WhatsApp
    /// message is stored for the person).
    #[error(
        "a person has taken this conversation over; the assistant does not answer it until it is resumed"
    )]
    HumanMode,
    /// The workspace's token quota is used up: no model was called.
    #[error(transparent)]
    QuotaExceeded(crate::quotas::Exceeded),
    /// The identity has no open conversation on the channel.
    #[error("the identity has no open conversation on this channel")]
    NoConversation,
    /// The conversation actor could not be reached or failed during the turn.
    #[error("the conversation actor is unavailable: {0}")]
    Unavailable(#[from] RuntimeError),
    /// This node does not own the identity (a cluster's partition moved); its owner answers.
    #[error("this node does not own the identity")]
    NotOwner,
}

impl From<parley_persistence::PersistenceError> for TurnError {
    /// A database that cannot be reached or written right now makes the turn unavailable (a
    /// 503 to an API caller, a retry for a WhatsApp message); anything else is a storage
    /// failure.
    fn from(error: parley_persistence::PersistenceError) -> Self {
        if error.is_unavailable() {
            tracing::warn!(%error, "a turn waits for the database");
            return Self::Unavailable(RuntimeError::Unavailable(
                "the database cannot be reached or written right now".to_owned(),
            ));
        }
        Self::Storage(error.to_string())
    }
}

impl TurnError {
    /// Whether the same turn may succeed later (the model, the database or the actor was
    /// down), as opposed to a request that can never be answered.
    pub fn is_transient(&self) -> bool {
        match self {
            Self::Llm(error) => !matches!(error, LlmError::NotConfigured),
            Self::Storage(_) | Self::Timeout | Self::Unavailable(_) | Self::NotOwner => true,
            Self::IdentityNotFound
            | Self::ChannelNotFound
            | Self::NoAssistant
            | Self::HumanMode
            | Self::NoConversation
            | Self::QuotaExceeded(_)
            | Self::Template(_) => false,
        }
    }
}
