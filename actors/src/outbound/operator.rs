//! An operator's message: a person of the business writing to the person through the channel,
//! usually in a conversation handed to them. It goes the one way every message goes (stored
//! pending, then sent by the channel, its statuses tracked), stored with role `operator`, and
//! it puts off the conversation's automatic return to the assistant.

use parley_persistence::{Role, clock, handoff};

use super::{OutboundError, Outbox, Sent, detached};
use crate::channel::service_window_open;
use crate::thread::Thread;

impl Outbox {
    /// Sends an operator's `text` to the thread's identity, inside WhatsApp's 24-hour window
    /// only (refused before anything is stored otherwise).
    ///
    /// # Errors
    /// [`OutboundError::OutsideWindow`], [`OutboundError::NoPhone`], or as
    /// [`Outbox::send_text`].
    pub async fn send_operator_text(
        &self,
        thread: Thread,
        text: String,
    ) -> Result<Sent, OutboundError> {
        let outbox = self.clone();
        let sent = detached(async move {
            if !service_window_open(&outbox.db, thread.identity_id, thread.channel_id).await? {
                return Err(OutboundError::OutsideWindow);
            }
            let sent = outbox.text_as(Role::Operator, thread, text, None).await?;
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
