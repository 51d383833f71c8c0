//! The one way Parley sends a message to a person. Whoever sends (the assistant's replies, the
//! opt-out confirmation, the template send endpoint, flows, scheduled tasks) goes through
//! [`Outbox`], and every message goes the same way:
//!
//! 1. the person: found or created by phone ([`crate::people`]);
//! 2. the conversation: the current one on the channel, or a new one after the idle time
//!    ([`crate::thread`]);
//! 3. the message: stored `pending` with what goes on the wire ([`pending`]);
//! 4. the send: its [`Parcel`] goes to the channel's actor, which claims the message right
//!    before each attempt, sends, and records Meta's answer;
//! 5. the reports: Meta's word on the message later is applied here too ([`Reports`]).
//!
//! Each send runs in a task of its own, so a caller that stops waiting (a client that hangs
//! up) never leaves a message half done.

mod error;
mod parcel;
pub mod reports;
mod resume;
mod template;
mod text;

use parley_persistence::conversations;
use parley_persistence::{DatabaseConnection, GroupCommit, MessageStatus, Role, clock};
use uuid::Uuid;

pub use self::error::OutboundError;
pub use self::parcel::{Parcel, pending};
pub use self::reports::{DeliveryWatcher, ReportChannel, Reports};
pub use self::template::TemplateSend;
pub use self::text::FreeForm;
use crate::changes::{Announcer, Change};
use crate::channel::{Accepted, Channels, Lane, SendError, SendRequest};
use crate::domain::Phone;
use crate::events::Events;
use crate::quotas::Quotas;
use crate::thread::{self, Found, Thread};
use crate::tree::RuntimeError;
use crate::whatsapp::{Author, OutboundContent, Outgoing};

/// Who wrote a message to a person: the assistant (or the business through the API), or an
/// operator (`None`: a key's console session or the API's reply endpoint).
#[derive(Clone, Debug)]
pub(crate) enum Writer {
    /// The assistant or the business.
    Assistant,
    /// A person at the desk.
    Operator(Option<Author>),
}

impl Writer {
    fn role(&self) -> Role {
        match self {
            Self::Assistant => Role::Assistant,
            Self::Operator(_) => Role::Operator,
        }
    }

    fn author(&self) -> Option<Author> {
        match self {
            Self::Assistant => None,
            Self::Operator(by) => by.clone(),
        }
    }
}

/// A message that went out.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, utoipa::ToSchema)]
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

/// The one way to send; cheap to clone.
#[derive(Clone, Debug)]
pub struct Outbox {
    db: DatabaseConnection,
    /// Messages are stored through the writer, with other writes.
    writer: GroupCommit,
    /// The channel actors, which send.
    channels: Channels,
    /// Tells the person's conversation actor that a message was stored outside it.
    changes: Announcer,
    /// After this long without messages the next one starts a new conversation.
    idle_after: chrono::Duration,
    /// The events of what senders write (a flow's end, a task's run, an opt-out).
    events: Events,
    /// The workspaces' daily message quotas, held before a business's send is stored.
    quotas: Quotas,
}

impl Outbox {
    /// An outbox sending through `channels`.
    pub fn new(
        db: DatabaseConnection,
        writer: GroupCommit,
        channels: Channels,
        changes: Announcer,
        idle_after: chrono::Duration,
        events: Events,
        quotas: Quotas,
    ) -> Self {
        Self {
            db,
            writer,
            channels,
            changes,
            idle_after,
            events,
            quotas,
        }
    }

    /// The workspaces' quotas.
    pub fn quotas(&self) -> &Quotas {
        &self.quotas
    }

    /// The events of what senders write, for those that write more than messages (flows,
    /// scheduled tasks, opt-outs).
    pub fn events(&self) -> &Events {
        &self.events
    }

    /// The channel actors this outbox sends through.
    pub fn channels(&self) -> &Channels {
        &self.channels
    }

    /// After this long without messages the next one starts a new conversation.
    pub fn idle_after(&self) -> chrono::Duration {
        self.idle_after
    }

    /// Stores `content` for the thread's identity at `phone` as a pending message of the
    /// thread's current conversation (showing `text`), then sends it; the caller hears how
    /// the send ended.
    async fn send_to(
        &self,
        thread: Thread,
        phone: &Phone,
        shown: (OutboundContent, String),
        how: How,
    ) -> Result<Sent, OutboundError> {
        self.send_as(Writer::Assistant, thread, phone, shown, how)
            .await
    }

    /// As [`Outbox::send_to`], the message stored as written by `writer`.
    async fn send_as(
        &self,
        writer: Writer,
        thread: Thread,
        phone: &Phone,
        (content, text): (OutboundContent, String),
        how: How,
    ) -> Result<Sent, OutboundError> {
        let outgoing = Outgoing {
            to: phone.digits().to_owned(),
            identity_id: Some(thread.identity_id),
            operator: writer.author(),
            content,
        };
        // A business's send past its daily quota is refused before anything is stored.
        self.quotas
            .messages(thread.workspace_id, outgoing.category())
            .await?;
        let now = clock::now();
        let found = match how.found {
            Some(found) => found,
            None => thread::find(&self.db, thread, self.idle_after, now).await?,
        };
        let conversation = thread::open_by(&self.writer, thread, found, now).await?;
        let mut message = pending(&outgoing, text.clone());
        message.id = how.message_id;
        message.role = writer.role();
        message.operator_id = writer.author().map(|a| a.id);
        let stored =
            conversations::store_message(&self.writer, &conversation, message, now, Vec::new())
                .await?;
        self.stored(thread, now);
        let parcel = Parcel {
            message_id: stored.id,
            channel_id: thread.channel_id,
            outgoing,
        };
        let accepted = self
            .send(parcel, false, how.origin)
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
            content: text,
        })
    }

    /// Tells the thread's identity's conversation actor that a message was stored for it
    /// outside the actor at `since`, so that its next turn reads it.
    pub(crate) fn stored(&self, thread: Thread, since: chrono::DateTime<chrono::Utc>) {
        self.changes.announce(&Change::Messages {
            workspace_id: thread.workspace_id,
            identity_id: thread.identity_id,
            since,
        });
        self.changes.announce(&Change::Inbox {
            workspace_id: thread.workspace_id,
        });
    }

    /// Sends a message stored pending by its sender (an assistant's reply, an opt-out's
    /// confirmation). One Meta cannot take right now stays pending for a later try.
    ///
    /// # Errors
    /// Why it was not sent; [`SendError::AlreadyTaken`] when it is not pending any more.
    pub async fn deliver(&self, parcel: Parcel) -> Result<Accepted, SendError> {
        let outbox = self.clone();
        detached(async move { outbox.send(parcel, true, Origin::Direct).await }).await
    }

    /// Hands `parcel` to its channel; `keep_when_unavailable`: whether a message Meta could
    /// not take stays pending for a later try rather than failed.
    async fn send(
        &self,
        parcel: Parcel,
        keep_when_unavailable: bool,
        origin: Origin,
    ) -> Result<Accepted, SendError> {
        let request = SendRequest {
            message_id: Some(parcel.message_id),
            outgoing: parcel.outgoing,
            keep_when_unavailable,
            channel_retries: origin == Origin::Direct,
            lane: match origin {
                Origin::Direct => Lane::Direct,
                Origin::Campaign => Lane::Campaign,
            },
        };
        self.channels.send(parcel.channel_id, request).await
    }
}

/// How one message goes out, besides what it says and to whom.
#[derive(Debug)]
struct How {
    /// The id its stored message gets; a fresh one when `None`.
    message_id: Option<Uuid>,
    /// Whose send it is.
    origin: Origin,
    /// The thread's conversation as the caller found it; read here when `None`.
    found: Option<Found>,
}

impl How {
    /// A direct message (not a campaign's), its conversation read here.
    fn direct(message_id: Option<Uuid>) -> Self {
        Self {
            message_id,
            origin: Origin::Direct,
            found: None,
        }
    }
}

/// Whose send it is: who tries it again when Meta asks for it (a throttle, its own trouble),
/// and where it waits for the number's room.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Origin {
    /// A reply, the send endpoint, a task: the channel tries it again, up to
    /// `whatsapp.max_retries`, and it goes ahead of campaign sends.
    Direct,
    /// A flow's: the flow tries it again under its own policy (`maxRetries`,
    /// `retryDelayMs`), and it yields the number's room to direct messages.
    Campaign,
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
