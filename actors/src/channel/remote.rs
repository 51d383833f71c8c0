//! A channel another node of the cluster owns (DESIGN §2 "Routing"): its sends and its Graph
//! calls (templates, the webhook's registration) are asked of its owner over HTTP, so that
//! one actor per number keeps Meta's limits cluster-wide. The owner answers through
//! `Channels::send_here` and `Channels::graph_here`.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use uuid::Uuid;

use super::{Accepted, SendAnswer, SendError, SendRequest};
use crate::cluster::Ownership;
use crate::whatsapp::{GraphError, MetaError};

/// What a Graph call answers on a node that does not own the channel.
pub(super) const NOT_HERE: &str = "this node does not own the channel";

/// A Graph call asked of a channel's owner.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "op")]
pub enum GraphOp {
    /// [`Channels::list_templates`].
    ListTemplates,
    /// [`Channels::create_template`].
    CreateTemplate {
        /// What is submitted.
        body: Value,
    },
    /// [`Channels::register_webhook`].
    RegisterWebhook,
}

/// The owner's answer to a [`GraphOp`].
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "answer")]
pub enum GraphAnswer {
    /// What the call answered.
    Ok {
        /// Its value.
        value: Value,
    },
    /// Meta's refusal.
    Meta {
        /// Meta's error.
        error: MetaError,
        /// The HTTP status Meta answered with.
        http_status: Option<u16>,
    },
    /// Meta could not be asked, or this node does not own the channel (`not_owner`).
    Failed {
        /// Why.
        message: String,
        /// Whether the owner moved.
        not_owner: bool,
    },
}

impl From<Result<Value, GraphError>> for GraphAnswer {
    fn from(outcome: Result<Value, GraphError>) -> Self {
        match outcome {
            Ok(value) => Self::Ok { value },
            Err(GraphError::Api(error)) => Self::Meta {
                http_status: error.http_status,
                error,
            },
            Err(error) => Self::Failed {
                not_owner: error.to_string().contains(NOT_HERE),
                message: error.to_string(),
            },
        }
    }
}

/// Asks the node that owns the channel for a Graph call.
pub(super) async fn graph_at_owner(
    ownership: &Ownership,
    channel_id: Uuid,
    op: &GraphOp,
) -> Result<Value, GraphError> {
    let path = format!("/_cluster/channels/{channel_id}/graph");
    let body = serde_json::to_value(op).map_err(|e| GraphError::Malformed(e.to_string()))?;
    let answer = ownership.post_to_owner(channel_id, &path, &body).await;
    crate::measure::cluster_forward("graph", answer.is_ok());
    let answer = answer.map_err(|e| GraphError::Connection(e.to_string()))?;
    match serde_json::from_value(answer).map_err(|e| GraphError::Malformed(e.to_string()))? {
        GraphAnswer::Ok { value } => Ok(value),
        GraphAnswer::Meta {
            mut error,
            http_status,
        } => {
            error.http_status = http_status;
            Err(GraphError::Api(error))
        }
        GraphAnswer::Failed { message, .. } => Err(GraphError::Connection(message)),
    }
}

/// Asks the node that owns the channel to send (`POST /_cluster/channels/{id}/send`).
pub(super) async fn send_at_owner(
    ownership: &Ownership,
    channel_id: Uuid,
    request: &SendRequest,
) -> Result<Accepted, SendError> {
    let path = format!("/_cluster/channels/{channel_id}/send");
    let body = serde_json::to_value(request).map_err(|e| SendError::Storage(e.to_string()))?;
    let answer = ownership.post_to_owner(channel_id, &path, &body).await;
    crate::measure::cluster_forward("send", answer.is_ok());
    let answer: SendAnswer =
        serde_json::from_value(answer.map_err(|e| SendError::Unavailable(e.to_string()))?)
            .map_err(|e| SendError::Unavailable(e.to_string()))?;
    answer.into()
}
