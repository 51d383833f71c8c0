//! The one way Parley sends a message to a person. Whoever sends (the assistant's replies,
//! the template send endpoint, flows, scheduled tasks) goes through [`Outbox`]:
//!
//! 1. the person: found or created by phone ([`crate::people`]);
//! 2. the conversation: the current one on the channel, or a new one after the idle time
//!    ([`crate::conversation::thread`]);
//! 3. the message: stored `pending` with what goes on the wire ([`Outgoing`]);
//! 4. the send: the channel's actor claims it right before each attempt, sends, and records
//!    Meta's answer.
//!
//! Each send runs in a task of its own, so a caller that stops waiting (a client that hangs
//! up) never leaves a message half done.

mod content;
mod template;

use std::sync::Arc;

use futures_util::StreamExt;
use parley_persistence::conversations::{self, NewMessage};
use parley_persistence::entities::{channel, message};
use parley_persistence::{Integration, MessageStatus, PersistenceError, clock, deliveries};
use uuid::Uuid;

pub use self::content::{OutboundContent, Outgoing, TemplateMessage};
pub use self::template::{
    RenderedTemplate, TemplateParameters, TemplateRef, render_body, wire_components,
};
use crate::channel::{Accepted, SendError, SendRequest};
use crate::conversation::thread::{self, Thread};
use crate::domain::Phone;
use crate::people;
use crate::runtime::{Handles, RuntimeError};
use crate::whatsapp::GraphError;

/// Pending messages resumed at once after a restart.
const RESUME_CONCURRENCY: usize = 8;
/// Pending messages read per page after a restart.
const RESUME_PAGE: u64 = 500;

/// A template to send to a phone number.
#[derive(Clone, Debug)]
pub struct TemplateSend {
    /// The workspace sending.
    pub workspace_id: i64,
    /// The channel to send from (already found in the workspace).
    pub channel: channel::Model,
    /// The recipient.
    pub phone: Phone,
    /// The recipient's name, for a new identity (or one without a name).
    pub name: Option<String>,
    /// Which template.
    pub template: TemplateRef,
    /// Its parameters.
    pub parameters: TemplateParameters,
}

/// A message that went out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sent {
    /// The stored outbound message.
    pub message_id: Uuid,
    /// Its conversation.
    pub conversation_id: Uuid,
    /// The recipient's identity.
    pub identity_id: Uuid,
    /// Meta's id of the message (a `sandbox.` id for sandbox channels).
    pub platform_message_id: String,
    /// Sent (accepted by Meta) or delivered (sandbox).
    pub status: MessageStatus,
    /// The text the person sees (a template's rendered body).
    pub content: String,
}

/// Why a message did not go out.
#[derive(Clone, Debug, thiserror::Error)]
pub enum OutboundError {
    /// The channel has no template of that name in that language.
    #[error("the channel has no template of that name and language")]
    TemplateNotFound,
    /// The template is a carousel and the send said otherwise, or the other way round.
    #[error("the template's shape does not match the send's template type")]
    TemplateShape,
    /// Meta could not list the channel's templates.
    #[error(transparent)]
    Templates(#[from] GraphError),
    /// The message was stored and its send failed; the failure is recorded on it.
    #[error("{error}")]
    NotSent {
        /// The stored message.
        message_id: Uuid,
        /// Why it was not sent.
        error: SendError,
    },
    /// The identity has no phone number to send to.
    #[error("the identity has no phone number")]
    NoPhone,
    /// The database failed.
    #[error("storage failed: {0}")]
    Storage(String),
    /// The actors could not be reached.
    #[error(transparent)]
    Unavailable(#[from] RuntimeError),
}

impl From<PersistenceError> for OutboundError {
    fn from(error: PersistenceError) -> Self {
        Self::Storage(error.to_string())
    }
}

/// The one way to send; cheap to clone.
#[derive(Clone, Debug)]
pub struct Outbox {
    handles: Arc<Handles>,
}

impl Outbox {
    pub(crate) fn new(handles: Arc<Handles>) -> Self {
        Self { handles }
    }

    /// Sends a template to a phone number: the identity is found or created, the rendered
    /// text is recorded in its conversation, and the template goes out through the channel.
    ///
    /// # Errors
    /// [`OutboundError`]; a send that failed after the message was stored is
    /// [`OutboundError::NotSent`] and stays recorded as failed.
    pub async fn send_template(&self, send: TemplateSend) -> Result<Sent, OutboundError> {
        let outbox = self.clone();
        detached(async move { outbox.template_now(send).await }).await
    }

    async fn template_now(&self, send: TemplateSend) -> Result<Sent, OutboundError> {
        let rendered = self.render(&send).await?;
        let db = &self.handles.db;
        let person = people::find_or_create_by_phone(
            db,
            &self.handles.writer,
            send.workspace_id,
            &send.phone,
            send.name.as_deref(),
        )
        .await?;
        let thread = Thread {
            workspace_id: send.workspace_id,
            identity_id: person.id,
            channel_id: send.channel.id,
        };
        let content = OutboundContent::Template(rendered.message);
        self.send_to(thread, &send.phone, content, rendered.text)
            .await
    }

    /// Sends free text to an identity on a channel (the channel's actor refuses it outside the
    /// 24-hour window), recorded in the identity's conversation like every message.
    ///
    /// # Errors
    /// [`OutboundError::NoPhone`], or as [`Outbox::send_template`].
    pub async fn send_text(
        &self,
        workspace_id: i64,
        channel_id: Uuid,
        identity_id: Uuid,
        text: String,
    ) -> Result<Sent, OutboundError> {
        let outbox = self.clone();
        detached(async move {
            let phone = people::phone_of(&outbox.handles.db, identity_id)
                .await?
                .ok_or(OutboundError::NoPhone)?;
            let thread = Thread {
                workspace_id,
                identity_id,
                channel_id,
            };
            let content = OutboundContent::Text {
                body: text.clone(),
                context: None,
            };
            outbox.send_to(thread, &phone, content, text).await
        })
        .await
    }

    /// Sends a template already found and rendered (a flow renders its campaign's template
    /// once per recipient from one listing) to an identity the caller already holds, at
    /// `phone`, as [`Outbox::send_template`] does otherwise.
    ///
    /// # Errors
    /// As [`Outbox::send_template`].
    pub async fn send_rendered(
        &self,
        thread: Thread,
        phone: Phone,
        rendered: RenderedTemplate,
    ) -> Result<Sent, OutboundError> {
        let outbox = self.clone();
        detached(async move {
            let content = OutboundContent::Template(rendered.message);
            outbox.send_to(thread, &phone, content, rendered.text).await
        })
        .await
    }

    /// Sends `content` to the thread's identity at `phone`, recorded showing `text`.
    async fn send_to(
        &self,
        thread: Thread,
        phone: &Phone,
        content: OutboundContent,
        text: String,
    ) -> Result<Sent, OutboundError> {
        let outgoing = Outgoing {
            to: phone.digits().to_owned(),
            identity_id: Some(thread.identity_id),
            content,
        };
        self.record_and_send(thread, outgoing, text).await
    }

    /// The template a send names, found among the channel's templates and rendered. A sandbox
    /// channel renders a name it does not know as just that name and its body parameters.
    async fn render(&self, send: &TemplateSend) -> Result<RenderedTemplate, OutboundError> {
        let templates = self
            .handles
            .channels()?
            .list_templates(send.channel.id)
            .await?;
        let Some(found) = send.template.find(&templates) else {
            if send.channel.integration == Integration::Sandbox {
                return Ok(send.template.render_sandbox(&send.parameters));
            }
            return Err(OutboundError::TemplateNotFound);
        };
        if !send.template.shape_matches(found) {
            return Err(OutboundError::TemplateShape);
        }
        Ok(send.template.render(found, &send.parameters))
    }

    /// Stores `outgoing` as a pending message of the thread's current conversation (showing
    /// `content`), then sends it.
    async fn record_and_send(
        &self,
        thread: Thread,
        outgoing: Outgoing,
        content: String,
    ) -> Result<Sent, OutboundError> {
        let db = &self.handles.db;
        let now = clock::now();
        let conversation = thread::current(db, thread, self.handles.idle_after, None, now).await?;
        let mut message = NewMessage::to_person(content.clone(), MessageStatus::Pending);
        message.outbound = Some(outgoing.to_stored());
        let stored =
            conversations::store_message(&self.handles.writer, &conversation, message, now).await?;
        self.handles
            .stored_messages(thread.workspace_id, thread.identity_id, now);
        let request = SendRequest {
            message_id: Some(stored.id),
            outgoing,
            keep_when_unavailable: false,
        };
        let accepted = self
            .handles
            .channels()?
            .send(thread.channel_id, request)
            .await
            .map_err(|error| OutboundError::NotSent {
                message_id: stored.id,
                error,
            })?;
        Ok(Sent {
            message_id: stored.id,
            conversation_id: conversation.id,
            identity_id: thread.identity_id,
            platform_message_id: accepted.platform_message_id,
            status: accepted.status,
            content,
        })
    }

    /// Sends a stored pending message (an assistant's reply, or one left at a stop) as what it
    /// was stored as. A message Meta cannot take right now stays pending for a later try.
    ///
    /// # Errors
    /// Why it was not sent; [`SendError::AlreadyTaken`] when it is not pending any more.
    pub async fn deliver(&self, message_id: Uuid) -> Result<Accepted, SendError> {
        let outbox = self.clone();
        detached(async move { outbox.deliver_now(message_id).await }).await
    }

    /// Sends a reply just stored pending, whose wire form the caller has at hand.
    ///
    /// # Errors
    /// Why it was not sent; [`SendError::AlreadyTaken`] when it is not pending any more.
    pub async fn deliver_reply(
        &self,
        message_id: Uuid,
        channel_id: Uuid,
        outgoing: Outgoing,
    ) -> Result<Accepted, SendError> {
        let outbox = self.clone();
        detached(async move {
            let request = SendRequest {
                message_id: Some(message_id),
                outgoing,
                keep_when_unavailable: true,
            };
            outbox.handles.channels()?.send(channel_id, request).await
        })
        .await
    }

    async fn deliver_now(&self, message_id: Uuid) -> Result<Accepted, SendError> {
        let db = &self.handles.db;
        let message = conversations::find_message(db, message_id)
            .await?
            .ok_or(SendError::AlreadyTaken)?;
        if message.status != MessageStatus::Pending {
            return Err(SendError::AlreadyTaken);
        }
        let Some(outgoing) = self.outgoing_of(&message).await? else {
            let error = SendError::Refused {
                code: 0,
                message: "the identity has no phone number".to_owned(),
            };
            deliveries::record_send(
                db,
                message.id,
                MessageStatus::Failed,
                None,
                Some(error.to_json()),
            )
            .await?;
            return Err(error);
        };
        let request = SendRequest {
            message_id: Some(message.id),
            outgoing,
            keep_when_unavailable: true,
        };
        self.handles
            .channels()
            .map_err(|e| SendError::Unavailable(e.to_string()))?
            .send(message.channel_id, request)
            .await
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
        let db = &self.handles.db;
        let Some(conversation) = conversations::find_any(db, message.conversation_id).await? else {
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
            content: OutboundContent::Text {
                body: message.content.clone(),
                context,
            },
        }))
    }

    /// After a restart: sends every message left pending, however many, a few at a time, in
    /// the background. Only messages stored before now: one stored since belongs to the send
    /// that stored it, which may be waiting to retry (pending meanwhile, so that a stop during
    /// the wait sends it at the next start) and must not be sent ahead of its wait.
    pub(crate) fn resume_pending(&self) {
        let outbox = self.clone();
        let stored_before = clock::now();
        tokio::spawn(async move {
            let mut after = None;
            let mut resumed = 0usize;
            loop {
                let page = match deliveries::pending_outbound(
                    &outbox.handles.db,
                    stored_before,
                    after,
                    RESUME_PAGE,
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
                            match outbox.deliver_now(message.id).await {
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

/// Runs `work` in a task of its own and waits for it: if the caller is dropped (a client that
/// hung up), the work still finishes and records what happened.
async fn detached<T, E>(work: impl Future<Output = Result<T, E>> + Send + 'static) -> Result<T, E>
where
    T: Send + 'static,
    E: From<RuntimeError> + Send + 'static,
{
    match tokio::spawn(work).await {
        Ok(outcome) => outcome,
        Err(error) => {
            Err(RuntimeError::Unavailable(format!("the send task failed: {error}")).into())
        }
    }
}
