//! The one route a node answers the others on (DESIGN §2 "Routing"): [`PeerCall`], every kind
//! of [`crate::cluster::Call`] in one typed enum, each served by the local part of its handle
//! once the placement has checked that this node owns what it is about. The front door only
//! checks the shared secret and relays the body and the answer (`src/http/peer.rs`).

use serde::Deserialize;
use serde_json::Value;

use super::ActorRuntime;
use crate::channel::remote::{GraphCall, SendCall};
use crate::cluster::{LineStream, NotOwnerHere};
use crate::conversation::remote::{ModeCall, StreamedTurnCall, TurnCall};
use crate::inbound::remote::StoreCall;

/// What another node asks of this one: `{"call": <kind>, "body": <the call>}`, the kind being
/// each call's [`Call::KIND`].
#[derive(Debug, Deserialize)]
#[serde(tag = "call", content = "body", rename_all = "snake_case")]
pub enum PeerCall {
    /// A WhatsApp, follow-up or API turn for an identity this node owns.
    Turn(TurnCall),
    /// An API caller's streamed turn: its tokens are told as they come.
    StreamedTurn(StreamedTurnCall),
    /// A change of who answers an identity's conversation.
    Mode(ModeCall),
    /// A send through a channel this node owns.
    Send(SendCall),
    /// A Graph call (templates, the webhook's registration) through a channel this node owns.
    Graph(GraphCall),
    /// A person's message for a channel this node owns, to store and answer.
    StoreEvent(StoreCall),
}

/// The answer to a [`PeerCall`].
pub enum PeerReply {
    /// The call's answer, as JSON.
    Answer(Value),
    /// A streamed call's answer: one JSON line per piece, then the answer's.
    Lines(LineStream),
    /// This node does not own what the call is about (503 `not_owner`): the caller reads the
    /// leases again and asks the new owner.
    NotOwner,
}

impl std::fmt::Debug for PeerReply {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Answer(value) => f.debug_tuple("Answer").field(value).finish(),
            Self::Lines(_) => f.write_str("Lines"),
            Self::NotOwner => f.write_str("NotOwner"),
        }
    }
}

fn reply<W: serde::Serialize>(served: Result<W, NotOwnerHere>) -> PeerReply {
    match served {
        Ok(wire) => PeerReply::Answer(serde_json::to_value(wire).unwrap_or(Value::Null)),
        Err(NotOwnerHere) => PeerReply::NotOwner,
    }
}

impl ActorRuntime {
    /// Whether `given` is the cluster's shared secret: only then is a peer call answered.
    pub fn accepts_peer(&self, given: &[u8]) -> bool {
        self.placement.is_peer_secret(given)
    }

    /// Answers another node's call.
    pub async fn answer_peer(&self, call: PeerCall) -> PeerReply {
        let placement = &self.placement;
        let conversations = self.handles.conversations.local();
        let channels = self.handles.channels.local();
        match call {
            PeerCall::Turn(call) => {
                let request = call.clone().into_request(None);
                let here = conversations.turn(call.key(), None, request);
                reply(placement.serve(&call, here).await)
            }
            PeerCall::StreamedTurn(call) => {
                let (conversations, turn) = (conversations.clone(), call.0.clone());
                let served = placement.serve_streamed(&call, move |sink| async move {
                    let key = turn.key();
                    conversations
                        .turn(key, None, turn.into_request(Some(sink)))
                        .await
                });
                match served {
                    Ok(lines) => PeerReply::Lines(lines),
                    Err(NotOwnerHere) => PeerReply::NotOwner,
                }
            }
            PeerCall::Mode(call) => {
                let key = (call.workspace_id, call.identity_id);
                let here = conversations.change_mode(key, call.change.clone());
                reply(placement.serve(&call, here).await)
            }
            PeerCall::Send(call) => {
                let here = channels.send(call.channel_id, call.request.clone());
                reply(placement.serve(&call, here).await)
            }
            PeerCall::Graph(call) => {
                let here = channels.graph(call.channel_id, call.op.clone());
                reply(placement.serve(&call, here).await)
            }
            PeerCall::StoreEvent(call) => {
                let here = self.handles.inbound.store_here(call.clone().into());
                reply(placement.serve(&call, here).await)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use uuid::Uuid;

    use super::*;
    use crate::channel::remote::GraphOp;
    use crate::cluster::Call;
    use crate::conversation::ModeChange;

    /// What a caller puts on the wire for `call`, as `Placement` sends it.
    fn envelope<C: Call>(call: &C) -> Value {
        json!({"call": C::KIND, "body": call})
    }

    #[test]
    fn every_kind_of_call_reads_back_as_its_variant_of_the_one_enum() {
        let id = Uuid::now_v7();
        let turn = TurnCall {
            workspace_id: 1,
            identity_id: id,
            channel_id: id,
            text: "hi".to_owned(),
            origin: crate::conversation::remote::WireOrigin::Api,
            metadata: None,
            attachments: Vec::new(),
        };
        let read = |value: Value| serde_json::from_value::<PeerCall>(value).expect("a call");
        assert!(matches!(read(envelope(&turn)), PeerCall::Turn(_)));
        assert!(matches!(
            read(envelope(&StreamedTurnCall(turn))),
            PeerCall::StreamedTurn(_)
        ));
        let mode = ModeCall {
            workspace_id: 1,
            identity_id: id,
            change: ModeChange::GiveBack { channel_id: id },
        };
        assert!(matches!(read(envelope(&mode)), PeerCall::Mode(_)));
        let graph = GraphCall {
            channel_id: id,
            op: GraphOp::ListTemplates,
        };
        assert!(matches!(read(envelope(&graph)), PeerCall::Graph(_)));
        let stored = StoreCall {
            workspace_id: 1,
            channel_id: id,
            platform_message_id: "wamid.A".to_owned(),
            payload: json!({"from": "14155550100"}),
            received_at: parley_persistence::clock::now(),
        };
        assert!(matches!(read(envelope(&stored)), PeerCall::StoreEvent(_)));
        let send: Value = json!({"call": SendCall::KIND, "body": {"channel_id": id, "request": {
            "message_id": null, "keep_when_unavailable": false, "channel_retries": true,
            "outgoing": {"to": "14155550100", "identity_id": null,
                         "content": {"kind": "text", "body": "hi", "context": null}}}}});
        assert!(
            serde_json::from_value::<PeerCall>(send.clone()).is_ok(),
            "{send}"
        );
    }
}
