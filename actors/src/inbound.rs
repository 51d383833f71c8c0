//! The WhatsApp pipeline after the webhook has stored an event: find or create the identity of
//! the sender, run the assistant's turn in the identity's conversation actor, and send the
//! stored reply through the channel's actor. Every step is idempotent, so an event dispatched
//! twice (a restart, a re-delivery) is answered once.

use std::sync::Arc;

use parley_persistence::entities::{identity, message, webhook_event};
use parley_persistence::identities::{NewIdentity, PHONE};
use parley_persistence::{
    DatabaseConnection, PersistenceError, clock, conversations, deliveries, identities,
    webhook_events,
};
use serde_json::{Value, json};
use uuid::Uuid;

use crate::channel::{Outbound, OutboundMessage};
use crate::conversation::{TurnError, TurnRequest};
use crate::phone::Phone;
use crate::runtime::ActorRuntime;
use crate::whatsapp::payload::message_text;

/// Events and replies resumed per start-up pass.
const RESUME_BATCH: u64 = 1_000;

impl ActorRuntime {
    /// Answers a stored webhook event in the background.
    pub fn dispatch(self: &Arc<Self>, event: webhook_event::Model) {
        let runtime = self.clone();
        tokio::spawn(async move {
            let id = event.id;
            if let Err(error) = runtime.process(event).await {
                tracing::error!(event_id = %id, %error, "webhook event could not be processed");
            }
        });
    }

    /// After a restart: replies that were being sent are marked failed (`interrupted`, never
    /// sent twice), unanswered events are dispatched again, and stored replies not yet sent
    /// are sent.
    ///
    /// # Errors
    /// Fails on a database error.
    pub async fn resume(self: &Arc<Self>) -> Result<(), PersistenceError> {
        let db = self.db().clone();
        let interrupted = deliveries::fail_interrupted(&db).await?;
        let events = webhook_events::pending(&db, RESUME_BATCH).await?;
        let replies = deliveries::pending_replies(&db, RESUME_BATCH).await?;
        if interrupted + events.len() as u64 + replies.len() as u64 > 0 {
            tracing::info!(
                interrupted,
                events = events.len(),
                replies = replies.len(),
                "resuming WhatsApp work left at the last stop"
            );
        }
        for event in events {
            self.dispatch(event);
        }
        for reply in replies {
            let runtime = self.clone();
            tokio::spawn(async move {
                if let Err(error) = runtime.deliver_stored(reply).await {
                    tracing::error!(%error, "a pending reply could not be sent");
                }
            });
        }
        Ok(())
    }

    async fn process(&self, event: webhook_event::Model) -> Result<(), PersistenceError> {
        let db = self.db();
        let message = &event.payload["message"];
        let wamid = event.platform_message_id.clone();
        let Ok(phone) = Phone::try_from(message["from"].as_str().unwrap_or_default()) else {
            let why = format!("the sender {} is not a valid phone number", message["from"]);
            return webhook_events::finish(db, event.id, Some(why), clock::now()).await;
        };
        let profile_name = event.payload["profile_name"]
            .as_str()
            .filter(|n| !n.is_empty());
        let person = find_or_create_identity(db, event.workspace_id, &phone, profile_name).await?;
        let request = TurnRequest {
            channel_id: event.channel_id,
            text: message_text(message),
            stream: None,
            platform_message_id: Some(wamid.clone()),
        };
        let conversations = match self.conversations() {
            Ok(conversations) => conversations,
            Err(error) => {
                // Left pending: the next start-up answers it.
                tracing::warn!(%error, "conversations unavailable; event stays pending");
                return Ok(());
            }
        };
        let outcome = conversations
            .turn(event.workspace_id, person.id, request)
            .await;
        let error = match outcome {
            Ok(outcome) => {
                if let Some(reply) = deliveries::claim(db, outcome.message_id).await? {
                    self.send_reply(reply, event.channel_id, &phone, person.id, Some(wamid))
                        .await?;
                }
                None
            }
            Err(TurnError::Llm(error)) => Some(format!("the model failed: {error}")),
            Err(error @ (TurnError::NoAssistant | TurnError::ChannelNotFound)) => {
                Some(error.to_string())
            }
            Err(error) => {
                tracing::warn!(event_id = %event.id, %error, "turn failed; event stays pending");
                return Ok(());
            }
        };
        if let Some(why) = &error {
            tracing::warn!(event_id = %event.id, channel_id = %event.channel_id, %why, "inbound message not answered");
        }
        webhook_events::finish(db, event.id, error, clock::now()).await
    }

    /// Sends a stored pending reply found at start-up.
    async fn deliver_stored(&self, reply: message::Model) -> Result<(), PersistenceError> {
        let db = self.db();
        let Some(conversation) = conversations::find_any(db, reply.conversation_id).await? else {
            return Ok(());
        };
        let contacts = identities::contacts_of(db, &[conversation.identity_id]).await?;
        let Some(phone) = contacts
            .iter()
            .filter(|c| c.kind == PHONE)
            .max_by_key(|c| c.is_primary)
            .and_then(|c| Phone::try_from(c.value.as_str()).ok())
        else {
            let error = json!({"code": null, "message": "the identity has no phone number"});
            return deliveries::record_send(db, reply.id, "failed", None, Some(error)).await;
        };
        let context = match reply.reply_to_message_id {
            Some(id) => conversations::find_message(db, id)
                .await?
                .and_then(|m| m.platform_message_id),
            None => None,
        };
        if let Some(claimed) = deliveries::claim(db, reply.id).await? {
            self.send_reply(
                claimed,
                conversation.channel_id,
                &phone,
                conversation.identity_id,
                context,
            )
            .await?;
        }
        Ok(())
    }

    /// Sends a claimed reply and records what Meta (or the sandbox) answered.
    async fn send_reply(
        &self,
        reply: message::Model,
        channel_id: Uuid,
        phone: &Phone,
        identity_id: Uuid,
        context: Option<String>,
    ) -> Result<(), PersistenceError> {
        let db = self.db();
        let outcome = match self.channels() {
            Ok(channels) => {
                channels
                    .send(
                        channel_id,
                        OutboundMessage {
                            to: phone.digits().to_owned(),
                            identity_id: Some(identity_id),
                            content: Outbound::Text {
                                body: reply.content.clone(),
                                context,
                            },
                        },
                    )
                    .await
            }
            Err(error) => Err(crate::channel::SendError::Unavailable(error.to_string())),
        };
        match outcome {
            Ok(accepted) => {
                deliveries::record_send(
                    db,
                    reply.id,
                    accepted.status,
                    Some(&accepted.platform_message_id),
                    None,
                )
                .await
            }
            Err(error) => {
                tracing::warn!(message_id = %reply.id, %error, "reply not sent");
                deliveries::record_send(db, reply.id, "failed", None, Some(error.to_json())).await
            }
        }
    }
}

/// The identity owning `phone`, created (with the profile name) when there is none. Two first
/// messages of one new number at once end with one identity: the contact point is unique.
async fn find_or_create_identity(
    db: &DatabaseConnection,
    workspace_id: i64,
    phone: &Phone,
    profile_name: Option<&str>,
) -> Result<identity::Model, PersistenceError> {
    for _ in 0..3 {
        if let Some(found) =
            identities::find_by_contact(db, workspace_id, PHONE, phone.as_str()).await?
        {
            if found.name.is_none()
                && let Some(name) = profile_name
            {
                let changes = identities::IdentityChanges {
                    name: Some(Some(name.to_owned())),
                    ..Default::default()
                };
                return identities::update(db, found, changes, clock::now()).await;
            }
            return Ok(found);
        }
        let txn = parley_persistence::begin_write(db).await?;
        let now = clock::now();
        let new = NewIdentity {
            id: Uuid::now_v7(),
            name: profile_name.map(str::to_owned),
            external_id: None,
            metadata: Value::Object(serde_json::Map::new()),
        };
        let created = identities::create(&txn, workspace_id, new, now).await?;
        match identities::attach_contact(&txn, workspace_id, created.id, PHONE, phone.as_str(), now)
            .await
        {
            Ok(()) => {
                txn.commit().await?;
                return Ok(created);
            }
            Err(PersistenceError::Conflict(_)) => {
                txn.rollback().await?;
            }
            Err(other) => return Err(other),
        }
    }
    Err(PersistenceError::Conflict(format!(
        "could not settle the identity of {phone}"
    )))
}
