//! Free text to a person: a scheduled task's message, and an operator's (a person of the
//! business writing through the channel, usually in a conversation handed to them). Both go
//! the one way every message goes (stored pending, then sent by the channel, statuses
//! tracked); an operator's is stored with role `operator`, refused outside the 24-hour window
//! before anything is stored, and puts off the conversation's automatic return to the
//! assistant.

use std::time::Duration;

use parley_persistence::entities::channel;
use parley_persistence::{clock, handoff};
use uuid::Uuid;

use super::{How, OutboundError, Outbox, Sent, Writer, detached};
use crate::channel::service_window_open;
use crate::people;
use crate::thread::Thread;
use crate::whatsapp::{Author, OutboundContent, OutgoingMedia};

/// What a free-form message carries (an operator's, a task's): words, or a file (with its
/// caption).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FreeForm {
    /// Free text.
    Text(String),
    /// A file.
    Media(OutgoingMedia),
}

impl Outbox {
    /// Sends free text or a file to an identity on a channel (the channel's actor refuses it
    /// outside the 24-hour window), recorded in the identity's conversation like every message,
    /// under `message_id` when the caller names it (a task run's).
    ///
    /// # Errors
    /// [`OutboundError::NoPhone`], or as [`Outbox::send_template`].
    pub async fn send_free_form(
        &self,
        thread: Thread,
        content: FreeForm,
        message_id: Option<Uuid>,
    ) -> Result<Sent, OutboundError> {
        let outbox = self.clone();
        detached(async move {
            outbox
                .free_form_as(Writer::Assistant, thread, content, message_id)
                .await
        })
        .await
    }

    /// Free text or a file to the thread's identity at its phone, stored as written by
    /// `role` (a file as its description).
    async fn free_form_as(
        &self,
        writer: Writer,
        thread: Thread,
        reply: FreeForm,
        message_id: Option<Uuid>,
    ) -> Result<Sent, OutboundError> {
        let phone = people::phone_of(&self.db, thread.identity_id)
            .await?
            .ok_or(OutboundError::NoPhone)?;
        let shown = match reply {
            FreeForm::Text(text) => (
                OutboundContent::Text {
                    body: text.clone(),
                    context: None,
                },
                text,
            ),
            FreeForm::Media(media) => {
                let text = media.shown();
                (OutboundContent::Media(media), text)
            }
        };
        self.send_as(writer, thread, &phone, shown, How::direct(message_id))
            .await
    }

    /// An operator's reply, from the API or the console: `text` to the thread's person through
    /// `channel` (the thread's, found in its workspace), which must be active; the caller waits
    /// at most `patience`, and the send still finishes and is recorded past it.
    ///
    /// # Errors
    /// [`OutboundError::ChannelInactive`], [`OutboundError::TimedOut`], or as
    /// [`Outbox::send_operator`].
    pub async fn reply_as_operator(
        &self,
        channel: &channel::Model,
        thread: Thread,
        reply: FreeForm,
        by: Option<Author>,
        patience: Duration,
    ) -> Result<Sent, OutboundError> {
        if !channel.active {
            return Err(OutboundError::ChannelInactive);
        }
        tokio::time::timeout(patience, self.send_operator(thread, reply, by))
            .await
            .map_err(|_| OutboundError::TimedOut)?
    }

    /// Sends an operator's text or file to the thread's identity, inside WhatsApp's 24-hour
    /// window only (refused before anything is stored otherwise).
    ///
    /// # Errors
    /// [`OutboundError::OutsideWindow`], [`OutboundError::NoPhone`], or as
    /// [`Outbox::send_free_form`].
    pub async fn send_operator(
        &self,
        thread: Thread,
        reply: FreeForm,
        by: Option<Author>,
    ) -> Result<Sent, OutboundError> {
        let outbox = self.clone();
        let sent = detached(async move {
            if !service_window_open(&outbox.db, thread.identity_id, thread.channel_id).await? {
                return Err(OutboundError::OutsideWindow);
            }
            let sent = outbox
                .free_form_as(Writer::Operator(by), thread, reply, None)
                .await?;
            let (conversation_id, now) = (sent.conversation_id, clock::now());
            outbox
                .writer
                .write(move |db| Box::pin(handoff::person_acted(db, conversation_id, now)))
                .await?;
            Ok(sent)
        })
        .await;
        crate::measure::operator_message(sent.is_ok());
        sent
    }
}
