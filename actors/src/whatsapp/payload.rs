//! The webhook payload, read leniently: every array may hold several items, unknown fields are
//! ignored, most fields are optional.

use serde::Deserialize;
use serde_json::Value;

/// A webhook delivery.
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

/// Messages and statuses of one business number.
#[derive(Debug, Default, Deserialize)]
pub struct ChangeValue {
    /// Which number it concerns.
    #[serde(default)]
    pub metadata: NumberMetadata,
    /// Profiles of the senders.
    #[serde(default)]
    pub contacts: Vec<Contact>,
    /// Messages received; kept raw, to be stored as received.
    #[serde(default)]
    pub messages: Vec<Value>,
    /// Statuses of messages sent.
    #[serde(default)]
    pub statuses: Vec<Status>,
}

/// The business number.
#[derive(Debug, Default, Deserialize)]
pub struct NumberMetadata {
    /// Meta's id of the number, which routes the change to a channel.
    #[serde(default)]
    pub phone_number_id: String,
}

/// A sender's profile.
#[derive(Debug, Default, Deserialize)]
pub struct Contact {
    /// The sender's WhatsApp id (their phone digits).
    #[serde(default)]
    pub wa_id: String,
    /// Profile.
    #[serde(default)]
    pub profile: Profile,
}

/// Profile of a sender.
#[derive(Debug, Default, Deserialize)]
pub struct Profile {
    /// Display name.
    #[serde(default)]
    pub name: String,
}

/// A status report of a sent message.
#[derive(Debug, Default, Deserialize)]
pub struct Status {
    /// The sent message's id.
    #[serde(default)]
    pub id: String,
    /// `sent`, `delivered`, `read` or `failed`.
    #[serde(default)]
    pub status: String,
    /// Failure details.
    #[serde(default)]
    pub errors: Vec<Value>,
}

/// What the assistant should read for an inbound message: the text, the chosen reply of an
/// interactive message, a caption, or a description of what was sent.
pub fn message_text(message: &Value) -> String {
    let kind = message["type"].as_str().unwrap_or("unknown");
    let text = match kind {
        "text" => message["text"]["body"].as_str().map(str::to_owned),
        "interactive" => {
            let reply = &message["interactive"];
            reply["button_reply"]["title"]
                .as_str()
                .or_else(|| reply["list_reply"]["title"].as_str())
                .map(str::to_owned)
        }
        "button" => message["button"]["text"].as_str().map(str::to_owned),
        "image" | "video" | "document" => message[kind]["caption"]
            .as_str()
            .filter(|c| !c.trim().is_empty())
            .map(|caption| format!("[{kind}] {caption}")),
        "reaction" => message["reaction"]["emoji"]
            .as_str()
            .map(|emoji| format!("[reacted with {emoji}]")),
        "location" => {
            let location = &message["location"];
            Some(format!(
                "[shared a location: {}, {}{}]",
                location["latitude"],
                location["longitude"],
                location["name"]
                    .as_str()
                    .map(|n| format!(" ({n})"))
                    .unwrap_or_default()
            ))
        }
        _ => None,
    };
    text.unwrap_or_else(|| {
        format!("[The person sent a {kind} message that cannot be shown as text]")
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

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
                json!({"type": "audio", "audio": {"id": "a1"}}),
                "[The person sent a audio message that cannot be shown as text]",
            ),
        ];
        for (message, text) in cases {
            assert_eq!(message_text(&message), text, "{message}");
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
                "messages": [{"from": "16505551234", "id": "wamid.1", "type": "text", "text": {"body": "a"}},
                             {"from": "16505551234", "id": "wamid.2", "type": "text", "text": {"body": "b"}}],
                "statuses": [{"id": "wamid.9", "status": "read", "recipient_id": "1"}]}}]}]
        }))
        .expect("lenient");
        let value = &delivery.entry[0].changes[0].value;
        assert_eq!(value.metadata.phone_number_id, "106");
        assert_eq!(value.messages.len(), 2);
        assert_eq!(value.contacts[0].profile.name, "Sheena");
        assert_eq!(value.statuses[0].status, "read");
    }
}
