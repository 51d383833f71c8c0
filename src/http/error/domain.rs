//! Domain errors into HTTP: each error the actors answer becomes an [`ApiError`] by one `From`
//! impl, so a handler only writes `?`.

use parley_actors::channel::SendError;
use parley_actors::flow::{CreateFlowError, FlowMoveError};
use parley_actors::llm::LlmError;
use parley_actors::outbound::OutboundError;
use parley_actors::scheduler::{TaskMove, TaskMoveError};
use parley_actors::store::StoreError;
use parley_actors::whatsapp::{GraphError, MetaError};
use parley_actors::{RuntimeError, TurnError};

use parley_persistence::PersistenceError;

use super::ApiError;

impl From<RuntimeError> for ApiError {
    /// An actor (re)starting or not answering: the service is not ready for this now.
    fn from(error: RuntimeError) -> Self {
        Self::not_ready(error.to_string())
    }
}

impl From<GraphError> for ApiError {
    /// Meta's refusal is a 502 carrying Meta's code; no answer in time a 504.
    fn from(error: GraphError) -> Self {
        match error {
            GraphError::Api(refusal) if matches!(refusal.code, Some(131052 | 131053)) => {
                Self::media_refused(refusal)
            }
            GraphError::Api(refusal) => Self::MetaRefused(refusal),
            GraphError::Timeout(_) => Self::UpstreamTimeout(error.to_string()),
            other => Self::UpstreamFailed(other.to_string()),
        }
    }
}

impl From<SendError> for ApiError {
    /// A send that did not go out, as the API answers it.
    fn from(error: SendError) -> Self {
        match error {
            SendError::Refused(refusal) if matches!(refusal.code, Some(131052 | 131053)) => {
                Self::media_refused(refusal)
            }
            SendError::Refused(refusal) => Self::MetaRefused(refusal),
            SendError::WindowClosed => Self::outside_service_window(),
            SendError::CredentialsInvalid(_) => {
                let refusal = error.to_json();
                Self::MetaRefused(MetaError {
                    code: refusal["code"].as_i64(),
                    message: error.to_string(),
                    title: None,
                    details: None,
                    http_status: None,
                })
            }
            SendError::Inactive => Self::Conflict(error.to_string()),
            SendError::UnknownChannel => Self::NotFound("Channel"),
            SendError::Unavailable(message) => Self::UpstreamFailed(message),
            SendError::NotOwner => Self::not_owner("channel"),
            SendError::AlreadyTaken | SendError::Storage(_) => {
                Self::Internal(anyhow::anyhow!(error))
            }
        }
    }
}

impl From<OutboundError> for ApiError {
    /// A message that did not go out, as the API answers it.
    fn from(error: OutboundError) -> Self {
        match error {
            OutboundError::QuotaExceeded(exceeded) => Self::QuotaExceeded(exceeded),
            OutboundError::TemplateNotFound => Self::NotFound("Template"),
            OutboundError::TemplateShape => Self::invalid_field(
                ["templateType"],
                "must be carousel exactly when the template has a CAROUSEL component",
            ),
            OutboundError::ParameterCount(mismatch) => Self::invalid_field(
                ["templateComponents", mismatch.component],
                mismatch.to_string(),
            ),
            OutboundError::Templates(error) => error.into(),
            OutboundError::NotSent { error, .. } => error.into(),
            OutboundError::Unavailable(error) => error.into(),
            OutboundError::OutsideWindow => Self::outside_service_window(),
            OutboundError::ChannelInactive => {
                Self::Conflict("The channel is not active".to_owned())
            }
            OutboundError::TimedOut => Self::send_timed_out(),
            OutboundError::NoPhone => {
                Self::Conflict("The identity has no phone number to send to on WhatsApp".to_owned())
            }
            OutboundError::Storage(_) => Self::Internal(anyhow::anyhow!(error)),
        }
    }
}

impl From<CreateFlowError> for ApiError {
    /// A flow that was not created.
    fn from(error: CreateFlowError) -> Self {
        match error {
            CreateFlowError::CampaignNotFound => Self::NotFound("Campaign"),
            CreateFlowError::ChannelNotFound => Self::NotFound("Channel"),
            CreateFlowError::ChannelMismatch => {
                Self::invalid_field(["channelUid"], "must be the campaign's channel")
            }
            CreateFlowError::CampaignNotUsable(status) => Self::ConflictCode {
                code: "campaign_not_usable",
                message: format!(
                    "The campaign is {status}; only ACTIVE and DEPRECATED campaigns start flows"
                ),
            },
            CreateFlowError::ChannelInactive => Self::ConflictCode {
                code: "channel_inactive",
                message: "The channel is not active; give it credentials first".to_owned(),
            },
            CreateFlowError::Storage(_) => Self::Internal(anyhow::anyhow!(error)),
        }
    }
}

impl From<FlowMoveError> for ApiError {
    /// A flow that did not move: 409 `invalid_transition` naming both states.
    fn from(error: FlowMoveError) -> Self {
        match error {
            FlowMoveError::InvalidTransition { .. } => Self::ConflictCode {
                code: "invalid_transition",
                message: error.to_string(),
            },
            FlowMoveError::Gone => Self::NotFound("Flow"),
            FlowMoveError::Storage(error) => error.into(),
        }
    }
}

impl From<TaskMoveError> for ApiError {
    /// A task that did not move: 409 naming the status it is in.
    fn from(error: TaskMoveError) -> Self {
        match error {
            TaskMoveError::Refused { how, .. } => Self::ConflictCode {
                code: match how {
                    TaskMove::Pause => "task_not_scheduled",
                    TaskMove::Resume => "task_not_paused",
                },
                message: error.to_string(),
            },
            TaskMoveError::Gone => Self::NotFound("Scheduled task"),
            TaskMoveError::Storage(error) => error.into(),
        }
    }
}

impl From<StoreError> for ApiError {
    /// A write that did not happen: what it names is not there, or the database said no.
    fn from(error: StoreError) -> Self {
        match error {
            StoreError::NotFound(what) => Self::NotFound(what),
            StoreError::Storage(error) => error.into(),
        }
    }
}

impl From<TurnError> for ApiError {
    /// A turn that produced no reply. The model's own words stay in the log: they may name
    /// internal addresses.
    fn from(error: TurnError) -> Self {
        match error {
            TurnError::QuotaExceeded(exceeded) => Self::QuotaExceeded(exceeded),
            TurnError::IdentityNotFound => Self::NotFound("Identity"),
            TurnError::ChannelNotFound => Self::NotFound("Channel"),
            TurnError::NoAssistant => Self::Conflict(error.to_string()),
            TurnError::HumanMode => Self::in_human_mode(),
            TurnError::NoConversation => Self::NotFound("Conversation"),
            TurnError::Llm(LlmError::NotConfigured) => Self::Unavailable {
                code: "llm_not_configured",
                message: LlmError::NotConfigured.to_string(),
            },
            TurnError::Llm(e @ LlmError::Timeout(_)) => {
                tracing::warn!(error = %e, "the language model timed out");
                Self::model_timed_out()
            }
            TurnError::Llm(e) => {
                tracing::warn!(error = %e, "the language model failed");
                Self::model_failed()
            }
            TurnError::Timeout => Self::UpstreamTimeout(
                "The turn did not finish in time; it goes on and its reply will be stored"
                    .to_owned(),
            ),
            TurnError::Unavailable(error) => error.into(),
            TurnError::NotOwner => Self::not_owner("identity"),
            TurnError::Template(_) | TurnError::Storage(_) => {
                Self::Internal(anyhow::anyhow!(error))
            }
        }
    }
}

impl From<PersistenceError> for ApiError {
    fn from(err: PersistenceError) -> Self {
        match err {
            PersistenceError::Conflict(_) => Self::taken(),
            // A concurrent delete won the race: what this request refers to is gone.
            PersistenceError::Vanished(_) => Self::NotFound("A resource this request refers to"),
            PersistenceError::Unavailable(db) => {
                // The cause stays in the log; the caller hears that it may try again.
                tracing::warn!(error = %db, "the database is unavailable");
                Self::Unavailable {
                    code: "storage_unavailable",
                    message: "The database cannot be reached or written right now; try again \
                              shortly"
                        .to_owned(),
                }
            }
            PersistenceError::Database(db) => Self::Internal(anyhow::Error::new(db)),
        }
    }
}
