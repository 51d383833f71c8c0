//! A channel another node of the cluster owns (DESIGN §2 "Routing"): its sends and its Graph
//! calls (templates, the webhook's registration) are [`Call`]s run on its owner, so that one
//! actor per number keeps Meta's limits cluster-wide.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use uuid::Uuid;

use super::{Accepted, SendAnswer, SendError, SendRequest};
use crate::cluster::{Call, PeerError};
use crate::whatsapp::{GraphError, MetaError};

/// What a Graph call answers on a node that does not own the channel.
pub(super) const NOT_HERE: &str = "this node does not own the channel";

/// A send through a channel, run on its owner.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SendCall {
    /// The channel.
    pub channel_id: Uuid,
    /// What to send.
    pub request: SendRequest,
}

impl Call for SendCall {
    const KIND: &'static str = "send";
    type Answer = Result<Accepted, SendError>;
    type Wire = SendAnswer;

    fn owner_key(&self) -> Uuid {
        self.channel_id
    }

    fn into_wire(answer: Self::Answer) -> SendAnswer {
        answer.into()
    }

    fn from_wire(wire: SendAnswer) -> Self::Answer {
        wire.into()
    }

    fn is_not_owner(answer: &Self::Answer) -> bool {
        matches!(answer, Err(SendError::NotOwner))
    }

    fn unreachable(error: PeerError) -> Self::Answer {
        Err(SendError::Unavailable(error.to_string()))
    }
}

/// A Graph call of a channel's (what the channel's actor asks Meta).
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "op")]
pub enum GraphOp {
    /// The channel's templates.
    ListTemplates,
    /// Submits a template.
    CreateTemplate {
        /// What is submitted.
        body: Value,
    },
    /// Registers Parley's webhook with Meta.
    RegisterWebhook,
}

/// A Graph call through a channel, run on its owner.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct GraphCall {
    /// The channel.
    pub channel_id: Uuid,
    /// The call.
    pub op: GraphOp,
}

/// The owner's answer to a [`GraphCall`] (a [`MetaError`] keeps its HTTP status, which
/// decides its kind, out of its own serialized form).
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
    /// Meta could not be asked.
    Failed {
        /// Why.
        message: String,
    },
}

impl Call for GraphCall {
    const KIND: &'static str = "graph";
    type Answer = Result<Value, GraphError>;
    type Wire = GraphAnswer;

    fn owner_key(&self) -> Uuid {
        self.channel_id
    }

    fn into_wire(answer: Self::Answer) -> GraphAnswer {
        match answer {
            Ok(value) => GraphAnswer::Ok { value },
            Err(GraphError::Api(error)) => GraphAnswer::Meta {
                http_status: error.http_status,
                error,
            },
            Err(error) => GraphAnswer::Failed {
                message: error.to_string(),
            },
        }
    }

    fn from_wire(wire: GraphAnswer) -> Self::Answer {
        match wire {
            GraphAnswer::Ok { value } => Ok(value),
            GraphAnswer::Meta {
                mut error,
                http_status,
            } => {
                error.http_status = http_status;
                Err(GraphError::Api(error))
            }
            GraphAnswer::Failed { message } => Err(GraphError::Connection(message)),
        }
    }

    fn is_not_owner(answer: &Self::Answer) -> bool {
        matches!(answer, Err(GraphError::Connection(message)) if message == NOT_HERE)
    }

    fn unreachable(error: PeerError) -> Self::Answer {
        Err(GraphError::Connection(error.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metas_refusal_crosses_with_its_http_status() {
        let refusal = MetaError {
            code: Some(131_047),
            message: "outside the window".to_owned(),
            title: None,
            details: None,
            http_status: Some(400),
        };
        let wire = GraphCall::into_wire(Err(GraphError::Api(refusal.clone())));
        let json = serde_json::to_value(&wire).expect("json");
        let back: GraphAnswer = serde_json::from_value(json).expect("answer");
        assert_eq!(GraphCall::from_wire(back), Err(GraphError::Api(refusal)));
    }

    #[test]
    fn a_node_that_lost_the_channel_says_so() {
        assert!(GraphCall::is_not_owner(&Err(GraphError::Connection(
            NOT_HERE.to_owned()
        ))));
        assert!(!GraphCall::is_not_owner(&Err(GraphError::Timeout(5))));
        assert!(SendCall::is_not_owner(&Err(SendError::NotOwner)));
    }
}
