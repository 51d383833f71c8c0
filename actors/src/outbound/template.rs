//! Templates to a person: the send endpoint's and a scheduled task's (to a phone number, the
//! template found among the channel's and rendered here), and a flow's (rendered by the flow,
//! to an identity it holds, in the conversation it found). They go the one way every message
//! goes ([`Outbox::send_as`]).

use parley_persistence::entities::channel;
use uuid::Uuid;

use super::{How, Origin, OutboundError, Outbox, Sent, detached};
use crate::domain::Phone;
use crate::people;
use crate::thread::{Found, Thread};
use crate::whatsapp::{OutboundContent, RenderedTemplate, TemplateParameters, TemplateRef};

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
    /// The id its stored message gets (a task run's, so that a restart can tell whether the
    /// run handed its message over); a fresh one when `None`.
    pub message_id: Option<Uuid>,
}

impl Outbox {
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
        let person = people::find_or_create_by_phone(
            &self.db,
            &self.writer,
            send.workspace_id,
            &send.phone,
            send.name.as_deref(),
            self.channels.new_identity_id(send.channel.id),
        )
        .await?;
        let thread = Thread {
            workspace_id: send.workspace_id,
            identity_id: person.id,
            channel_id: send.channel.id,
        };
        let content = OutboundContent::Template(rendered.message);
        let how = How::direct(send.message_id);
        self.send_to(thread, &send.phone, (content, rendered.text), how)
            .await
    }

    /// Sends a template already found and rendered (a flow renders its campaign's template
    /// once per recipient from one listing) to an identity the caller already holds, at
    /// `phone`, in the thread's conversation as the caller `found` it (a flow reads its
    /// claim's together), as [`Outbox::send_template`] does otherwise, under `message_id`
    /// when the caller names it (a flow recipient's attempt).
    ///
    /// # Errors
    /// As [`Outbox::send_template`].
    pub(crate) async fn send_rendered(
        &self,
        (thread, found): (Thread, Found),
        phone: Phone,
        rendered: RenderedTemplate,
        message_id: Option<Uuid>,
    ) -> Result<Sent, OutboundError> {
        let outbox = self.clone();
        detached(async move {
            let content = OutboundContent::Template(rendered.message);
            // The flow retries its own sends, each attempt counted, and yields the number's
            // room to direct messages.
            let how = How {
                message_id,
                origin: Origin::Campaign,
                found: Some(found),
            };
            let shown = (content, rendered.text);
            outbox.send_to(thread, &phone, shown, how).await
        })
        .await
    }

    /// The template a send names, found among the channel's templates (a sandbox channel's
    /// are its own) and rendered.
    async fn render(&self, send: &TemplateSend) -> Result<RenderedTemplate, OutboundError> {
        let templates = self.channels.list_templates(send.channel.id).await?;
        let Some(found) = send.template.find(&templates) else {
            return Err(OutboundError::TemplateNotFound);
        };
        if !send.template.shape_matches(found) {
            return Err(OutboundError::TemplateShape);
        }
        crate::whatsapp::template::check_parameters(found, &send.parameters)?;
        Ok(send.template.render(found, &send.parameters))
    }
}
