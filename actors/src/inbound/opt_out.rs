//! Stop words: a person who writes `STOP` (or another configured word) is opted out of
//! campaign templates and answered with a confirmation instead of the assistant.

use parley_persistence::conversations::{self, NewMessage};
use parley_persistence::entities::{identity, webhook_event};
use parley_persistence::{EventType, PersistenceError, clock, deliveries};
use serde_json::json;

use super::{InboundDeps, Processed};
use crate::channel::SendError;
use crate::outbound::{self, Parcel};
use crate::thread::{self, Thread};
use crate::whatsapp::payload::InboundMessage;
use crate::whatsapp::{OutboundContent, Outgoing};

/// What the person is told.
pub const CONFIRMATION: &str =
    "You will not receive campaign messages from us any more. Write to us any time to talk.";

/// Whether `text` is one of the stop words (case and surrounding spaces aside).
pub(super) fn is_stop_word(stop_words: &[String], text: &str) -> bool {
    let text = text.trim();
    !text.is_empty() && stop_words.iter().any(|w| w.eq_ignore_ascii_case(text))
}

/// Opts the person out, records their message and the confirmation, and sends it. Processing
/// the same event again sends nothing more.
pub(super) async fn opt_out(
    deps: &InboundDeps,
    event: &webhook_event::Model,
    inbound: &InboundMessage,
    person: &identity::Model,
) -> Processed {
    match record(deps, event, inbound, person).await {
        Ok(Some(parcel)) => match deps.outbox.deliver(parcel).await {
            Err(error) if error.is_transient() && !matches!(error, SendError::AlreadyTaken) => {
                Processed::Retry(error.to_string())
            }
            _ => Processed::Answered,
        },
        Ok(None) => Processed::Answered,
        Err(error) => Processed::Retry(error.to_string()),
    }
}

async fn record(
    deps: &InboundDeps,
    event: &webhook_event::Model,
    inbound: &InboundMessage,
    person: &identity::Model,
) -> Result<Option<Parcel>, PersistenceError> {
    let db = &deps.db;
    let now = clock::now();
    let events = deps.outbox.events();
    let ws = event.workspace_id;
    crate::people::opt_out(db, events, ws, person.id, "stop_word").await?;
    if deliveries::find_by_platform_id(db, event.channel_id, &inbound.wamid)
        .await?
        .is_some()
    {
        // Answered before (a re-delivery or a retry).
        return Ok(None);
    }
    tracing::info!(identity_id = %person.id, "the person opted out with a stop word");
    let txn = parley_persistence::begin_write(db).await?;
    let thread = Thread {
        workspace_id: event.workspace_id,
        identity_id: person.id,
        channel_id: event.channel_id,
    };
    let conversation = thread::current(&txn, thread, deps.outbox.idle_after(), None, now).await?;
    let mut received = NewMessage::from_person(inbound.content.text());
    received.platform_message_id = Some(inbound.wamid.clone());
    let received = conversations::append_message(&txn, &conversation, received, now).await?;
    let told = events.event(ws, EventType::MessageReceived, || {
        json!({
            "message_id": received.id,
            "conversation_id": conversation.id,
            "identity_id": person.id,
            "channel_id": event.channel_id,
            "content": received.content,
            "platform_message_id": received.platform_message_id,
        })
    });
    if let Some(told) = &told {
        told.write(&txn, now).await?;
    }
    let outgoing = Outgoing {
        to: inbound.from.digits().to_owned(),
        identity_id: Some(person.id),
        operator: None,
        content: OutboundContent::Text {
            body: CONFIRMATION.to_owned(),
            context: Some(inbound.wamid.clone()),
        },
    };
    let mut reply = outbound::pending(&outgoing, CONFIRMATION.to_owned());
    reply.reply_to_message_id = Some(received.id);
    let reply = conversations::append_message(&txn, &conversation, reply, now).await?;
    txn.commit().await?;
    if told.is_some() {
        events.wake();
    }
    deps.outbox.stored(thread, now);
    Ok(Parcel::of(&reply))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stop_words_match_whole_messages_in_any_case() {
        let words = vec!["STOP".to_owned(), "PARAR".to_owned()];
        assert!(is_stop_word(&words, " stop "));
        assert!(is_stop_word(&words, "Parar"));
        assert!(!is_stop_word(&words, "please stop the music"));
        assert!(!is_stop_word(&words, ""));
    }
}
