//! A person's message for a channel another node owns (DESIGN §2 "Routing"): a [`Call`] its
//! owner runs, storing the webhook event with its own writer's batch and handing it to its
//! own inbound worker at once, so that the event needs no news and no read to be answered.

use std::time::Duration;

use chrono::{DateTime, Utc};
use parley_persistence::PersistenceError;
use parley_persistence::webhook_events::NewEvent;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use uuid::Uuid;

use crate::cluster::{Call, PeerError};

/// A webhook event to store on the node that owns its channel.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct StoreCall {
    /// The channel's workspace.
    pub workspace_id: i64,
    /// The channel it came to.
    pub channel_id: Uuid,
    /// WhatsApp's id of the message.
    pub platform_message_id: String,
    /// What is kept of the message.
    pub payload: Value,
    /// When the webhook received it.
    pub received_at: DateTime<Utc>,
}

impl From<&NewEvent> for StoreCall {
    fn from(event: &NewEvent) -> Self {
        Self {
            workspace_id: event.workspace_id,
            channel_id: event.channel_id,
            platform_message_id: event.platform_message_id.clone(),
            payload: event.payload.clone(),
            received_at: event.now,
        }
    }
}

impl From<StoreCall> for NewEvent {
    fn from(call: StoreCall) -> Self {
        Self {
            workspace_id: call.workspace_id,
            channel_id: call.channel_id,
            platform_message_id: call.platform_message_id,
            payload: call.payload,
            now: call.received_at,
        }
    }
}

/// Why an event was not stored where its channel runs.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// This node's database refused it (here, as the owner).
    #[error(transparent)]
    Storage(#[from] PersistenceError),
    /// The owner failed to store it or did not answer in time: the caller stores it itself.
    #[error("the channel's node did not store the event: {0}")]
    Owner(String),
}

impl Call for StoreCall {
    const KIND: &'static str = "store_event";
    /// The stored event's id; `None` when the channel already had the message (a
    /// re-delivery).
    type Answer = Result<Option<Uuid>, StoreError>;
    type Wire = Result<Option<Uuid>, String>;
    /// Meta waits for the webhook's answer: an owner slower than this is passed over, and the
    /// node that received the webhook stores the event itself.
    const WAIT: Option<Duration> = Some(Duration::from_secs(1));

    fn owner_key(&self) -> Uuid {
        self.channel_id
    }

    fn into_wire(answer: Self::Answer) -> Self::Wire {
        answer.map_err(|error| error.to_string())
    }

    fn from_wire(wire: Self::Wire) -> Self::Answer {
        wire.map_err(StoreError::Owner)
    }

    fn is_not_owner(_: &Self::Answer) -> bool {
        // Stored is stored: should the channel have moved meanwhile, its new owner's
        // takeover sweep answers the event.
        false
    }

    fn unreachable(error: PeerError) -> Self::Answer {
        Err(StoreError::Owner(error.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_event_crosses_to_the_owner_as_it_was_received() {
        let event = NewEvent {
            workspace_id: 3,
            channel_id: Uuid::from_u128(7),
            platform_message_id: "wamid.X".to_owned(),
            payload: serde_json::json!({"from": "14155550100", "text": "hi"}),
            now: parley_persistence::clock::now(),
        };
        let wire = serde_json::to_string(&StoreCall::from(&event)).expect("json");
        let back: NewEvent = serde_json::from_str::<StoreCall>(&wire)
            .expect("call")
            .into();
        assert_eq!(
            (
                back.workspace_id,
                back.channel_id,
                back.platform_message_id.as_str()
            ),
            (3, Uuid::from_u128(7), "wamid.X")
        );
        assert_eq!((back.payload, back.now), (event.payload, event.now));
    }

    #[test]
    fn an_owner_that_failed_is_told_apart_from_this_nodes_database() {
        let failed = StoreCall::into_wire(Err(StoreError::Owner("down".to_owned())));
        assert!(matches!(
            StoreCall::from_wire(failed),
            Err(StoreError::Owner(_))
        ));
        let unreachable = StoreCall::unreachable(PeerError::NoOwner);
        assert!(matches!(unreachable, Err(StoreError::Owner(_))));
        let stored = StoreCall::from_wire(StoreCall::into_wire(Ok(Some(Uuid::from_u128(1)))));
        assert_eq!(stored.ok().flatten(), Some(Uuid::from_u128(1)));
    }
}
