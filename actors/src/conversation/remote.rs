//! A turn for an identity another node owns (DESIGN §2 "Routing"): the inbound worker and the
//! scheduler ask the owner over HTTP (`POST /_cluster/turns`), which runs it in the identity's
//! actor there and answers the stored reply; the caller then delivers it like its own.

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::registry::Conversations;
use super::{TurnError, TurnOrigin, TurnOutcome, TurnRequest};
use crate::domain::Phone;
use crate::outbound::Parcel;
use crate::tree::RuntimeError;

/// Where a turn asked of another node comes from (an API caller's turn is forwarded as its
/// whole HTTP request instead).
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum RemoteOrigin {
    /// [`TurnOrigin::WhatsApp`].
    WhatsApp {
        /// WhatsApp's id of the inbound message.
        wamid: String,
        /// The sender.
        from: Phone,
        /// Whether an earlier attempt may have stored it.
        retried: bool,
    },
    /// [`TurnOrigin::FollowUp`].
    FollowUp {
        /// What the assistant is asked to do.
        instructions: String,
        /// Who receives the message.
        to: Phone,
    },
}

/// A turn one node asks of the identity's owner.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RemoteTurn {
    /// The identity's workspace.
    pub workspace_id: i64,
    /// The identity.
    pub identity_id: Uuid,
    /// The channel it arrived on or is addressed to.
    pub channel_id: Uuid,
    /// Its text.
    pub text: String,
    /// Who waits for the reply.
    pub origin: RemoteOrigin,
}

/// The owner's answer.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "answer")]
pub enum RemoteAnswer {
    /// The reply, stored (pending for its channel, unless sent already).
    Replied {
        /// Its conversation.
        conversation_id: Uuid,
        /// The stored reply.
        message_id: Uuid,
        /// Its text.
        reply: String,
        /// Whether it is the fallback message.
        fallback: bool,
        /// What the asking node hands its channel: the reply as the owner stored it, so that
        /// the asker need not read it back (`None` when an earlier attempt stored it, or from
        /// a node that does not send one: the asker then sends what the table holds).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        parcel: Option<Parcel>,
    },
    /// No reply: why, by kind (`identity_not_found`, `channel_not_found`, `no_assistant`,
    /// `human_mode`, `no_conversation`, `not_owner`, `refused`, `transient`).
    Failed {
        /// The kind.
        kind: String,
        /// Its sentence.
        message: String,
    },
}

impl RemoteTurn {
    /// The request as the owner's actor takes it; `None` for an API caller's turn.
    pub fn of(workspace_id: i64, identity_id: Uuid, request: &TurnRequest) -> Option<Self> {
        let origin = match &request.origin {
            TurnOrigin::Api { .. } => return None,
            TurnOrigin::WhatsApp {
                wamid,
                from,
                retried,
            } => RemoteOrigin::WhatsApp {
                wamid: wamid.clone(),
                from: from.clone(),
                retried: *retried,
            },
            TurnOrigin::FollowUp { instructions, to } => RemoteOrigin::FollowUp {
                instructions: instructions.clone(),
                to: to.clone(),
            },
        };
        Some(Self {
            workspace_id,
            identity_id,
            channel_id: request.channel_id,
            text: request.text.clone(),
            origin,
        })
    }

    fn into_request(self) -> TurnRequest {
        let origin = match self.origin {
            RemoteOrigin::WhatsApp {
                wamid,
                from,
                retried,
            } => TurnOrigin::WhatsApp {
                wamid,
                from,
                retried,
            },
            RemoteOrigin::FollowUp { instructions, to } => {
                TurnOrigin::FollowUp { instructions, to }
            }
        };
        TurnRequest {
            channel_id: self.channel_id,
            text: self.text,
            origin,
            metadata: None,
        }
    }
}

impl From<Result<TurnOutcome, TurnError>> for RemoteAnswer {
    fn from(outcome: Result<TurnOutcome, TurnError>) -> Self {
        let error = match outcome {
            Ok(outcome) => {
                return Self::Replied {
                    conversation_id: outcome.conversation_id,
                    message_id: outcome.message_id,
                    reply: outcome.reply,
                    fallback: outcome.fallback,
                    parcel: outcome.parcel,
                };
            }
            Err(error) => error,
        };
        let kind = match &error {
            TurnError::IdentityNotFound => "identity_not_found",
            TurnError::ChannelNotFound => "channel_not_found",
            TurnError::NoAssistant => "no_assistant",
            TurnError::HumanMode => "human_mode",
            TurnError::NoConversation => "no_conversation",
            TurnError::NotOwner => "not_owner",
            e if e.is_transient() => "transient",
            _ => "refused",
        };
        Self::Failed {
            kind: kind.to_owned(),
            message: error.to_string(),
        }
    }
}

impl From<RemoteAnswer> for Result<TurnOutcome, TurnError> {
    fn from(answer: RemoteAnswer) -> Self {
        match answer {
            RemoteAnswer::Replied {
                conversation_id,
                message_id,
                reply,
                fallback,
                parcel,
            } => Ok(TurnOutcome {
                conversation_id,
                message_id,
                reply,
                tool_calls: Vec::new(),
                usage: crate::llm::Usage::default(),
                fallback,
                // Sent here, where its channel is reached.
                parcel,
            }),
            RemoteAnswer::Failed { kind, message } => Err(match kind.as_str() {
                "identity_not_found" => TurnError::IdentityNotFound,
                "channel_not_found" => TurnError::ChannelNotFound,
                "no_assistant" => TurnError::NoAssistant,
                "human_mode" => TurnError::HumanMode,
                "no_conversation" => TurnError::NoConversation,
                "not_owner" => TurnError::NotOwner,
                "refused" => TurnError::Refused(message),
                _ => TurnError::Unavailable(RuntimeError::Unavailable(message)),
            }),
        }
    }
}

impl Conversations {
    /// Runs `turn` here, for another node that does not own its identity;
    /// [`TurnError::NotOwner`] when this node does not own it either.
    ///
    /// # Errors
    /// As [`Conversations::turn`].
    pub async fn turn_for_peer(&self, turn: RemoteTurn) -> Result<TurnOutcome, TurnError> {
        if !self.ownership().owns(turn.identity_id) {
            return Err(TurnError::NotOwner);
        }
        let (workspace_id, identity_id) = (turn.workspace_id, turn.identity_id);
        self.turn(workspace_id, identity_id, turn.into_request())
            .await
    }

    /// Asks the node that owns the identity for the turn.
    pub(super) async fn turn_at_owner(&self, turn: RemoteTurn) -> Result<TurnOutcome, TurnError> {
        let identity_id = turn.identity_id;
        let body = serde_json::to_value(&turn).map_err(|e| TurnError::Storage(e.to_string()))?;
        let answer = self
            .ownership()
            .post_to_owner(identity_id, "/_cluster/turns", &body)
            .await;
        crate::measure::cluster_forward("turn", answer.is_ok());
        let answer =
            answer.map_err(|e| TurnError::Unavailable(RuntimeError::Unavailable(e.to_string())))?;
        let answer: RemoteAnswer = serde_json::from_value(answer)
            .map_err(|e| TurnError::Unavailable(RuntimeError::Unavailable(e.to_string())))?;
        answer.into()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::whatsapp::{OutboundContent, Outgoing};

    fn replied(parcel: Option<Parcel>) -> RemoteAnswer {
        RemoteAnswer::Replied {
            conversation_id: Uuid::from_u128(1),
            message_id: Uuid::from_u128(2),
            reply: "On its way.".to_owned(),
            fallback: false,
            parcel,
        }
    }

    #[test]
    fn the_owner_hands_its_replys_parcel_back_so_the_asker_need_not_read_it() {
        let parcel = Parcel {
            message_id: Uuid::from_u128(2),
            channel_id: Uuid::from_u128(3),
            outgoing: Outgoing {
                to: "14155550100".to_owned(),
                identity_id: Some(Uuid::from_u128(4)),
                content: OutboundContent::Text {
                    body: "On its way.".to_owned(),
                    context: Some("wamid.A".to_owned()),
                },
            },
        };
        let wire = serde_json::to_value(replied(Some(parcel.clone()))).expect("json");
        let back: RemoteAnswer = serde_json::from_value(wire).expect("an answer");
        let outcome = Result::<TurnOutcome, TurnError>::from(back).expect("replied");
        assert_eq!(outcome.parcel, Some(parcel));
    }

    #[test]
    fn an_answer_without_a_parcel_is_sent_from_the_table() {
        let wire = serde_json::to_value(replied(None)).expect("json");
        assert!(wire.get("parcel").is_none(), "{wire}");
        // As a node of the release before sends it.
        let older = json!({"answer": "replied", "conversation_id": Uuid::from_u128(1),
                           "message_id": Uuid::from_u128(2), "reply": "On its way.",
                           "fallback": false});
        let back: RemoteAnswer = serde_json::from_value(older).expect("an answer");
        let outcome = Result::<TurnOutcome, TurnError>::from(back).expect("replied");
        assert_eq!(outcome.parcel, None);
        assert_eq!(outcome.message_id, Uuid::from_u128(2));
    }
}
