//! Messages stored pending and not handed to their channel: sent again by what the table
//! holds, after a restart or when their sender no longer has their parcel (a re-dispatched
//! event whose reply was stored by an earlier attempt).

use futures_util::StreamExt;
use parley_persistence::entities::message;
use parley_persistence::{MessageStatus, PersistenceError, clock, conversations, deliveries};
use uuid::Uuid;

use super::{Outbox, Parcel};
use crate::channel::{Accepted, SendError};
use crate::people;
use crate::whatsapp::{MetaError, OutboundContent, Outgoing};

/// Pending messages resumed at once after a restart.
const RESUME_CONCURRENCY: usize = 8;
/// Pending messages read per page after a restart.
const RESUME_PAGE: u64 = 500;

impl Outbox {
    /// Sends a stored message if it is still pending, as what it was stored as. A message Meta
    /// cannot take right now stays pending for a later try.
    ///
    /// # Errors
    /// Why it was not sent; [`SendError::AlreadyTaken`] when it is not pending any more.
    pub async fn deliver_stored(&self, message_id: Uuid) -> Result<Accepted, SendError> {
        let outbox = self.clone();
        super::detached(async move { outbox.stored_now(message_id).await }).await
    }

    async fn stored_now(&self, message_id: Uuid) -> Result<Accepted, SendError> {
        let message = conversations::find_message(&self.db, message_id)
            .await?
            .ok_or(SendError::AlreadyTaken)?;
        if message.status != MessageStatus::Pending {
            return Err(SendError::AlreadyTaken);
        }
        let Some(outgoing) = self.outgoing_of(&message).await? else {
            let error = SendError::Refused(MetaError {
                code: None,
                message: "the identity has no phone number".to_owned(),
                title: None,
                details: None,
                http_status: None,
            });
            deliveries::record_send(
                &self.db,
                message.id,
                MessageStatus::Failed,
                None,
                Some(error.to_json()),
            )
            .await?;
            return Err(error);
        };
        let parcel = Parcel {
            message_id: message.id,
            channel_id: message.channel_id,
            outgoing,
        };
        self.send(parcel, true, super::Origin::Direct).await
    }

    /// What a stored message is on the wire. Messages stored before the wire form was kept
    /// are text replies: to the identity's phone, quoting the message they answer.
    async fn outgoing_of(
        &self,
        message: &message::Model,
    ) -> Result<Option<Outgoing>, PersistenceError> {
        if let Some(outgoing) = Outgoing::from_stored(message.outbound.as_ref()) {
            return Ok(Some(outgoing));
        }
        let db = &self.db;
        let Some(conversation) =
            conversations::find_in_any_workspace(db, message.conversation_id).await?
        else {
            return Ok(None);
        };
        let Some(phone) = people::phone_of(db, conversation.identity_id).await? else {
            return Ok(None);
        };
        let context = match message.reply_to_message_id {
            Some(id) => conversations::find_message(db, id)
                .await?
                .and_then(|m| m.platform_message_id),
            None => None,
        };
        Ok(Some(Outgoing {
            to: phone.digits().to_owned(),
            identity_id: Some(conversation.identity_id),
            operator: None,
            content: OutboundContent::Text {
                body: message.content.clone(),
                context,
            },
        }))
    }

    /// After a restart (or a cluster node's takeover of `channels`): sends every message left
    /// pending, however many, a few at a time, in the background. Only messages stored before now: one stored since belongs to the send
    /// that stored it, which may be waiting to retry (pending meanwhile, so that a stop during
    /// the wait sends it at the next start) and must not be sent ahead of its wait.
    pub(crate) fn resume_pending(&self, channels: Option<Vec<Uuid>>) {
        let outbox = self.clone();
        let stored_before = clock::now();
        tokio::spawn(async move {
            let mut after = None;
            let mut resumed = 0usize;
            loop {
                let page = match deliveries::pending_outbound(
                    &outbox.db,
                    stored_before,
                    after,
                    RESUME_PAGE,
                    channels.as_deref(),
                )
                .await
                {
                    Ok(page) => page,
                    Err(error) => {
                        tracing::error!(%error, "pending outbound messages could not be read");
                        return;
                    }
                };
                let Some(last) = page.last() else { break };
                after = Some(last.id);
                resumed += page.len();
                futures_util::stream::iter(page)
                    .for_each_concurrent(RESUME_CONCURRENCY, |message| {
                        let outbox = outbox.clone();
                        async move {
                            match outbox.stored_now(message.id).await {
                                Ok(_) | Err(SendError::AlreadyTaken) => {}
                                Err(error) => {
                                    tracing::warn!(message_id = %message.id, %error, "a pending message was not sent");
                                }
                            }
                        }
                    })
                    .await;
            }
            if resumed > 0 {
                tracing::info!(
                    resumed,
                    "outbound messages left pending at the last stop were sent"
                );
            }
        });
    }
}
