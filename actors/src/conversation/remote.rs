//! A turn or a mode change for an identity another node owns (DESIGN §2 "Routing"): a [`Call`]
//! its owner runs in the identity's actor there. A WhatsApp or follow-up turn answers the
//! stored reply with its parcel (what goes on the wire), which the asking node then sends
//! without reading it back; an API caller's turn answers what the API answers, and a streamed
//! one tells its tokens as they come.

use parley_persistence::entities::conversation;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::sync::mpsc;
use uuid::Uuid;

use super::handoff::ModeChange;
use super::{ConversationKey, TurnError, TurnEvent, TurnOrigin, TurnOutcome, TurnRequest};
use crate::cluster::{Call, PeerError, StreamedCall};
use crate::domain::Phone;
use crate::tree::RuntimeError;

/// Where a turn asked of another node comes from ([`TurnOrigin`] as it crosses).
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum WireOrigin {
    /// [`TurnOrigin::Api`]; a streamed one is a [`StreamedTurnCall`].
    Api,
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
pub struct TurnCall {
    /// The identity's workspace.
    pub workspace_id: i64,
    /// The identity.
    pub identity_id: Uuid,
    /// The channel it arrived on or is addressed to.
    pub channel_id: Uuid,
    /// Its text.
    pub text: String,
    /// Who waits for the reply.
    pub origin: WireOrigin,
    /// What an API caller attached to the message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Value>,
    /// The files the person sent with it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attachments: Vec<crate::whatsapp::message::InboundMedia>,
}

impl TurnCall {
    /// The call of `request` for the identity `key`.
    pub fn of(key: ConversationKey, request: &TurnRequest) -> Self {
        let origin = match &request.origin {
            TurnOrigin::Api { .. } => WireOrigin::Api,
            TurnOrigin::WhatsApp {
                wamid,
                from,
                retried,
            } => WireOrigin::WhatsApp {
                wamid: wamid.clone(),
                from: from.clone(),
                retried: *retried,
            },
            TurnOrigin::FollowUp { instructions, to } => WireOrigin::FollowUp {
                instructions: instructions.clone(),
                to: to.clone(),
            },
        };
        Self {
            workspace_id: key.0,
            identity_id: key.1,
            channel_id: request.channel_id,
            text: request.text.clone(),
            origin,
            metadata: request.metadata.clone(),
            attachments: request.attachments.clone(),
        }
    }

    /// The identity the turn is for.
    pub fn key(&self) -> ConversationKey {
        (self.workspace_id, self.identity_id)
    }

    /// The request as the owner's actor takes it; `events`: where a streamed turn's owner
    /// tells its tokens.
    pub fn into_request(self, events: Option<mpsc::Sender<TurnEvent>>) -> TurnRequest {
        let origin = match self.origin {
            WireOrigin::Api => TurnOrigin::Api { events },
            WireOrigin::WhatsApp {
                wamid,
                from,
                retried,
            } => TurnOrigin::WhatsApp {
                wamid,
                from,
                retried,
            },
            WireOrigin::FollowUp { instructions, to } => TurnOrigin::FollowUp { instructions, to },
        };
        TurnRequest {
            channel_id: self.channel_id,
            text: self.text,
            origin,
            metadata: self.metadata,
            attachments: self.attachments,
        }
    }
}

/// A call to the identity's owner answered by its actor: the answer crosses as it is, and a
/// node that cannot reach the owner answers that the actor is unavailable.
macro_rules! identity_call {
    ($call:ty, $kind:literal, $answer:ty, |$me:ident| $identity:expr) => {
        impl Call for $call {
            const KIND: &'static str = $kind;
            type Answer = Result<$answer, TurnError>;
            type Wire = Result<$answer, TurnError>;

            fn owner_key(&self) -> Uuid {
                let $me = self;
                $identity
            }

            fn into_wire(answer: Self::Answer) -> Self::Wire {
                answer
            }

            fn from_wire(wire: Self::Wire) -> Self::Answer {
                wire
            }

            fn is_not_owner(answer: &Self::Answer) -> bool {
                matches!(answer, Err(TurnError::NotOwner))
            }

            fn unreachable(error: PeerError) -> Self::Answer {
                Err(TurnError::Unavailable(RuntimeError::Unavailable(
                    error.to_string(),
                )))
            }
        }
    };
}

identity_call!(TurnCall, "turn", TurnOutcome, |call| call.identity_id);

/// An API caller's streamed turn: the owner tells each [`TurnEvent`] as it comes.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(transparent)]
pub struct StreamedTurnCall(pub TurnCall);

identity_call!(StreamedTurnCall, "streamed_turn", TurnOutcome, |call| call
    .0
    .identity_id);

impl StreamedCall for StreamedTurnCall {
    type Line = TurnEvent;
}

/// A change of who answers an identity's conversation, asked of the identity's owner.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ModeCall {
    /// The identity's workspace.
    pub workspace_id: i64,
    /// The identity.
    pub identity_id: Uuid,
    /// The change.
    pub change: ModeChange,
}

identity_call!(ModeCall, "mode", conversation::Model, |call| call
    .identity_id);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::{LlmError, Usage};
    use crate::outbound::Parcel;
    use crate::whatsapp::{OutboundContent, Outgoing};

    #[test]
    fn the_owner_hands_its_replys_parcel_back_so_the_asker_need_not_read_it() {
        let parcel = Parcel {
            message_id: Uuid::from_u128(2),
            channel_id: Uuid::from_u128(3),
            outgoing: Outgoing {
                to: "14155550100".to_owned(),
                identity_id: Some(Uuid::from_u128(4)),
                operator: None,
                content: OutboundContent::Text {
                    body: "On its way.".to_owned(),
                    context: Some("wamid.A".to_owned()),
                },
            },
        };
        let outcome = TurnOutcome {
            conversation_id: Uuid::from_u128(1),
            message_id: Uuid::from_u128(2),
            reply: "On its way.".to_owned(),
            tool_calls: Vec::new(),
            usage: Usage::default(),
            fallback: false,
            parcel: Some(parcel.clone()),
        };
        let wire = serde_json::to_value(TurnCall::into_wire(Ok(outcome))).expect("json");
        let back: Result<TurnOutcome, TurnError> = serde_json::from_value(wire).expect("answer");
        assert_eq!(
            TurnCall::from_wire(back).expect("replied").parcel,
            Some(parcel)
        );
    }

    #[test]
    fn a_turns_failure_crosses_as_what_it_is() {
        for error in [
            TurnError::HumanMode,
            TurnError::NotOwner,
            TurnError::Llm(LlmError::Timeout(30_000)),
            TurnError::Unavailable(RuntimeError::Unavailable("gone".to_owned())),
        ] {
            let wire = serde_json::to_value(TurnCall::into_wire(Err(error.clone()))).expect("json");
            let back: Result<TurnOutcome, TurnError> =
                serde_json::from_value(wire).expect("answer");
            assert_eq!(
                back.err().map(|e| e.to_string()),
                Some(error.to_string()),
                "{error:?}"
            );
        }
    }

    #[test]
    fn an_api_callers_turn_keeps_its_metadata_on_the_way() {
        let request = TurnRequest {
            channel_id: Uuid::from_u128(9),
            text: "hello".to_owned(),
            origin: TurnOrigin::Api { events: None },
            metadata: Some(serde_json::json!({"source": "crm"})),
            attachments: Vec::new(),
        };
        let call = TurnCall::of((7, Uuid::from_u128(1)), &request);
        let wire = serde_json::to_string(&call).expect("json");
        let back: TurnCall = serde_json::from_str(&wire).expect("call");
        assert_eq!(back.key(), (7, Uuid::from_u128(1)));
        let request = back.into_request(None);
        assert_eq!(request.metadata, Some(serde_json::json!({"source": "crm"})));
        assert!(matches!(request.origin, TurnOrigin::Api { events: None }));
    }
}
