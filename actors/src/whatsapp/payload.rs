//! Meta's webhook payload, parsed once at the door into typed inbound messages and status
//! reports. The raw delivery is read leniently (every array may hold several items, unknown
//! fields are ignored, most fields are optional); what Parley keeps is [`InboundMessage`], the
//! one stored shape of a webhook event, whether it came from Meta or the sandbox.

use serde::Deserialize;
use serde_json::Value;

pub use super::message::{Contact, InboundContent, InboundMessage, Profile, Unreadable};
pub use super::status::StatusReport;

/// A webhook delivery as Meta sends it.
#[derive(Debug, Default, Deserialize)]
pub struct Delivery {
    /// One entry per WhatsApp Business Account.
    #[serde(default)]
    pub entry: Vec<Entry>,
}

/// One account's changes.
#[derive(Debug, Default, Deserialize)]
pub struct Entry {
    /// The changes.
    #[serde(default)]
    pub changes: Vec<Change>,
}

/// One change; `field` is `messages` for messages and statuses.
#[derive(Debug, Default, Deserialize)]
pub struct Change {
    /// What changed.
    #[serde(default)]
    pub field: String,
    /// The content.
    #[serde(default)]
    pub value: ChangeValue,
}

/// Messages and statuses of one business number, as received.
#[derive(Debug, Default, Deserialize)]
pub struct ChangeValue {
    /// Which number it concerns.
    #[serde(default)]
    pub metadata: NumberMetadata,
    /// Profiles of the senders.
    #[serde(default)]
    pub contacts: Vec<Contact>,
    /// Messages received; each is parsed on its own so that one unreadable message never
    /// spoils the others.
    #[serde(default)]
    pub messages: Vec<Value>,
    /// Statuses of messages sent.
    #[serde(default)]
    pub statuses: Vec<Value>,
}

/// The business number.
#[derive(Debug, Default, Deserialize)]
pub struct NumberMetadata {
    /// Meta's id of the number, which routes the change to a channel.
    #[serde(default)]
    pub phone_number_id: String,
}

impl Delivery {
    /// The message changes of every entry (other fields, such as account updates, are not
    /// for Parley).
    pub fn into_changes(self) -> impl Iterator<Item = ChangeValue> {
        self.entry
            .into_iter()
            .flat_map(|e| e.changes)
            .filter(|c| c.field.is_empty() || c.field == "messages")
            .map(|c| c.value)
    }
}

impl ChangeValue {
    /// Every message of the change, typed; a message that cannot be read (no id, a sender
    /// that is not a phone number) is an `Err` saying why.
    pub fn inbound(&self) -> Vec<Result<InboundMessage, Unreadable>> {
        self.messages
            .iter()
            .map(|raw| InboundMessage::parse(raw, &self.contacts))
            .collect()
    }

    /// Every status report of the change that Parley understands.
    pub fn reports(&self) -> Vec<StatusReport> {
        self.statuses
            .iter()
            .filter_map(StatusReport::parse)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use parley_persistence::MessageStatus;
    use serde_json::json;

    use super::*;

    fn parse(message: Value) -> InboundMessage {
        let mut message = message;
        message["from"] = json!("16505551234");
        message["id"] = json!("wamid.1");
        InboundMessage::parse(&message, &[]).expect("readable")
    }

    #[test]
    fn every_understood_type_becomes_text() {
        let cases = [
            (json!({"type": "text", "text": {"body": "Hi"}}), "Hi"),
            (
                json!({"type": "interactive", "interactive": {"type": "button_reply", "button_reply": {"id": "b1", "title": "Yes"}}}),
                "Yes",
            ),
            (
                json!({"type": "interactive", "interactive": {"type": "list_reply", "list_reply": {"id": "l1", "title": "Blue", "description": "d"}}}),
                "Blue",
            ),
            (
                json!({"type": "button", "button": {"text": "Stop promotions", "payload": "p"}}),
                "Stop promotions",
            ),
            (
                json!({"type": "image", "image": {"id": "m1", "caption": "my receipt"}}),
                "[image] my receipt",
            ),
            (
                json!({"type": "audio", "audio": {"id": "a1", "voice": true}}),
                "[voice note]",
            ),
            (
                json!({"type": "document", "document": {"id": "d1", "filename": "invoice.pdf", "mime_type": "application/pdf"}}),
                "[document: invoice.pdf (application/pdf)]",
            ),
            (
                json!({"type": "contacts", "contacts": []}),
                "[The person sent a contacts message that cannot be shown as text]",
            ),
        ];
        for (message, text) in cases {
            assert_eq!(parse(message.clone()).content.text(), text, "{message}");
        }
    }

    #[test]
    fn a_delivery_with_unknown_fields_and_several_items_parses() {
        let delivery: Delivery = serde_json::from_value(json!({
            "object": "whatsapp_business_account",
            "entry": [{"id": "1", "changes": [{"field": "messages", "value": {
                "messaging_product": "whatsapp", "surprise": true,
                "metadata": {"display_phone_number": "1555", "phone_number_id": "106"},
                "contacts": [{"profile": {"name": "Sheena"}, "wa_id": "16505551234"}],
                "messages": [{"from": "16505551234", "id": "wamid.1", "timestamp": "1749416383", "type": "text", "text": {"body": "a"}},
                             {"from": "16505551234", "id": "wamid.2", "type": "text", "text": {"body": "b"}}],
                "statuses": [{"id": "wamid.9", "status": "read", "recipient_id": "1"}]}}]}]
        }))
        .expect("lenient");
        let value = delivery.into_changes().next().expect("one change");
        assert_eq!(value.metadata.phone_number_id, "106");
        let messages = value.inbound();
        assert_eq!(messages.len(), 2);
        let first = messages[0].as_ref().expect("readable");
        assert_eq!(first.profile_name.as_deref(), Some("Sheena"));
        assert_eq!(first.from.as_str(), "+16505551234");
        assert_eq!(
            first.sent_at.map(|t| t.timestamp()),
            Some(1_749_416_383),
            "Meta's timestamp is kept"
        );
        assert_eq!(value.reports()[0].status, MessageStatus::Read);
    }

    #[test]
    fn a_message_without_id_or_with_a_bad_sender_is_unreadable_alone() {
        let value: ChangeValue = serde_json::from_value(json!({"messages": [
            {"from": "16505551234", "type": "text", "text": {"body": "no id"}},
            {"from": "call me", "id": "wamid.2", "type": "text", "text": {"body": "x"}},
            {"from": "16505551234", "id": "wamid.3", "type": "text", "text": {"body": "fine"}},
        ]}))
        .expect("lenient");
        let parsed = value.inbound();
        assert_eq!(parsed[0], Err(Unreadable::NoId));
        assert!(matches!(parsed[1], Err(Unreadable::Sender(_))));
        assert!(parsed[2].is_ok());
    }

    #[test]
    fn nul_characters_in_text_are_replaced() {
        let message = parse(json!({"type": "text", "text": {"body": "a\u{0}b"}}));
        assert_eq!(message.content.text(), "a\u{FFFD}b");
    }

    #[test]
    fn the_stored_shape_round_trips_and_the_older_raw_shape_still_reads() {
        let message = parse(json!({"type": "text", "text": {"body": "Hi"}}));
        let stored = serde_json::to_value(&message).expect("serialises");
        assert_eq!(stored["content"]["type"], "text");
        assert_eq!(
            InboundMessage::from_stored(&stored).expect("reads"),
            message
        );
        let older = json!({"message": {"from": "16505551234", "id": "wamid.7", "type": "text",
                                       "text": {"body": "old"}}, "profile_name": "Ana"});
        let read = InboundMessage::from_stored(&older).expect("reads");
        assert_eq!(read.wamid, "wamid.7");
        assert_eq!(read.profile_name.as_deref(), Some("Ana"));
    }

    #[test]
    fn only_tracked_statuses_are_reported_with_metas_error() {
        let failed = StatusReport::parse(&json!({"id": "wamid.1", "status": "failed",
            "errors": [{"code": 131026, "title": "Message undeliverable"}]}))
        .expect("tracked");
        assert_eq!(failed.error_code(), Some(131026));
        assert!(StatusReport::parse(&json!({"id": "wamid.1", "status": "deleted"})).is_none());
    }
}
