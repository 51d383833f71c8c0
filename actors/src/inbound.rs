//! The WhatsApp pipeline after the webhook has stored an event: find or create the sender's
//! identity, run the assistant's turn in the identity's conversation actor, and send the
//! stored reply through the outbox. Every step is idempotent, so an event processed twice (a
//! restart, a re-delivery, a retry) is answered once.
//!
//! [`worker`] decides when events are processed: a bounded number at a time, one at a time
//! per sender, retried with backoff after a transient failure.

mod handle;
mod opt_out;
pub mod remote;
mod settings;
pub mod worker;

pub use handle::Inbound;

pub use opt_out::CONFIRMATION as OPT_OUT_CONFIRMATION;

use std::sync::Arc;

use parley_persistence::entities::webhook_event;
use parley_persistence::identities::ContactLookups;
use parley_persistence::{DatabaseConnection, GroupCommit};

use crate::channel::SendError;
use crate::conversation::Conversations;
use crate::conversation::{TurnError, TurnOrigin, TurnOutcome, TurnRequest};
use crate::outbound::Outbox;
use crate::people;
use crate::whatsapp::payload::{InboundMessage, Unreadable};

/// What answering an event needs; cheap to clone into each event's task.
#[derive(Clone, Debug)]
pub struct InboundDeps {
    /// Connection pool.
    pub db: DatabaseConnection,
    /// The database's writer: a new sender's identity is committed with other writes.
    pub writer: GroupCommit,
    /// Finds the senders' identities, many at once in a burst.
    pub lookups: ContactLookups,
    /// The identities' conversation actors, which run the turns.
    pub conversations: Conversations,
    /// Sends the replies.
    pub outbox: Outbox,
    /// Messages that opt the person out of campaign templates (compared ignoring case).
    pub stop_words: Arc<[String]>,
    /// Which channels' events this node answers (all, on a single node).
    pub placement: crate::cluster::Placement,
}

/// How processing an event ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Processed {
    /// Answered (or its reply's failure is recorded on the reply).
    Answered,
    /// Stored for the person the conversation was handed to; the assistant stays quiet.
    Held,
    /// It can never be answered (no assistant on the channel, an unreadable message); kept
    /// failed for operators.
    Refused(String),
    /// Something was down (the model, Meta, the database); try again later.
    Retry(String),
}

/// Answers one stored event, whose message the worker read (`read`); `fresh` when the webhook
/// has just stored it and this is its first processing.
#[tracing::instrument(name = "inbound", skip_all, fields(event_id = %event.id, channel_id = %event.channel_id, workspace_id = event.workspace_id))]
pub(crate) async fn process(
    deps: &InboundDeps,
    event: &webhook_event::Model,
    read: Result<InboundMessage, Unreadable>,
    fresh: bool,
) -> Processed {
    let inbound = match read {
        Ok(inbound) => inbound,
        Err(unreadable) => return Processed::Refused(unreadable.to_string()),
    };
    if fresh {
        deps.outbox.channels().received(event.channel_id);
    }
    let conversations = &deps.conversations;
    // Read before the identity may be created: see `Conversations::turn_of_created`.
    let announced_before = conversations.announced();
    // A new sender's identity is born in the channel's partition: on a cluster its
    // conversation actor then lives with the channel's, and its turns are not forwarded.
    let new_id = conversations.new_identity_id(event.channel_id);
    let (person, created) = match people::find_or_create(
        &deps.db,
        &deps.lookups,
        &deps.writer,
        event.workspace_id,
        &inbound.from,
        inbound.profile_name.as_deref(),
        new_id,
    )
    .await
    {
        Ok(found) => found,
        Err(error) => return Processed::Retry(error.to_string()),
    };
    if opt_out::is_stop_word(&deps.stop_words, &inbound.content.text()) {
        return opt_out::opt_out(deps, event, &inbound, &person).await;
    }
    let request = TurnRequest {
        channel_id: event.channel_id,
        text: inbound.content.text(),
        origin: TurnOrigin::WhatsApp {
            wamid: inbound.wamid.clone(),
            from: inbound.from.clone(),
            retried: !fresh,
        },
        metadata: None,
        attachments: inbound.content.media().cloned().into_iter().collect(),
    };
    let outcome = if created {
        conversations
            .turn_of_created(event.workspace_id, person, announced_before, request)
            .await
    } else {
        conversations
            .turn(event.workspace_id, person.id, request)
            .await
    };
    match outcome {
        Ok(outcome) => deliver(&deps.outbox, outcome).await,
        Err(TurnError::HumanMode) => Processed::Held,
        Err(error) if error.is_transient() => Processed::Retry(describe(&error)),
        Err(error) => Processed::Refused(error.to_string()),
    }
}

/// Sends the turn's stored reply.
#[tracing::instrument(name = "deliver", level = "debug", skip_all)]
async fn deliver(outbox: &Outbox, outcome: TurnOutcome) -> Processed {
    let reply_id = outcome.message_id;
    match outcome.deliver(outbox).await {
        Ok(_) | Err(SendError::AlreadyTaken) => Processed::Answered,
        Err(error) if error.is_transient() => Processed::Retry(error.to_string()),
        // Refused for good (window closed, Meta's refusal): recorded on the reply.
        Err(error) => {
            tracing::warn!(message_id = %reply_id, %error, "reply not sent");
            Processed::Answered
        }
    }
}

fn describe(error: &TurnError) -> String {
    match error {
        TurnError::Llm(e) => format!("the model failed: {e}"),
        other => other.to_string(),
    }
}
