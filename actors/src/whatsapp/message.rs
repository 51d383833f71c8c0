//! An inbound WhatsApp message, typed: who wrote, when, and what. It is the one stored shape
//! of a webhook event, whether it came from Meta or the sandbox.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::text::{clean, text};
use crate::domain::Phone;

/// Why an inbound message was not taken.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Unreadable {
    /// It has no message id, so it could not be deduplicated.
    #[error("the message has no id")]
    NoId,
    /// Its sender is not a valid phone number.
    #[error("the sender {0:?} is not a valid phone number")]
    Sender(String),
}

/// An inbound WhatsApp message: who wrote, when, and what. Stored as the webhook event's
/// payload and read back by the inbound pipeline.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct InboundMessage {
    /// WhatsApp's message id (`wamid…`), unique per channel.
    pub wamid: String,
    /// The sender.
    pub from: Phone,
    /// The sender's profile name, when Meta gave one.
    pub profile_name: Option<String>,
    /// When the person sent it, by Meta's clock.
    pub sent_at: Option<DateTime<Utc>>,
    /// What it says.
    pub content: InboundContent,
}

/// What an inbound message carries.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum InboundContent {
    /// Plain text.
    Text {
        /// The text.
        body: String,
    },
    /// The title of a chosen button or list row (interactive replies, template quick replies).
    Reply {
        /// The title the person tapped.
        title: String,
    },
    /// A file: an image, a video, a document, an audio (or voice note) or a sticker.
    Media(InboundMedia),
    /// A reaction to an earlier message.
    Reaction {
        /// The emoji.
        emoji: String,
    },
    /// A shared location.
    Location {
        /// Latitude.
        latitude: f64,
        /// Longitude.
        longitude: f64,
        /// The place's name.
        name: Option<String>,
    },
    /// Anything else (contacts, …), described to the model.
    Other {
        /// Meta's message type.
        kind: String,
    },
}

/// A file a person sent, with its caption and what Meta said of it (payloads stored before
/// media was kept have only the kind and caption).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct InboundMedia {
    /// `image`, `video`, `document`, `audio` or `sticker`.
    pub kind: String,
    /// The caption, when there is one.
    pub caption: Option<String>,
    /// Meta's media id, to fetch the file by.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub media_id: Option<String>,
    /// Its MIME type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
    /// Its SHA-256, as Meta gave it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    /// A document's file name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file_name: Option<String>,
    /// Whether an audio is a voice note.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub voice: bool,
}

impl InboundMedia {
    /// One line saying what file the person sent, for the model and the history: the kind (a
    /// voice note is named so), a document's name and type, and the caption.
    pub fn describe(&self) -> String {
        let what = match (self.kind.as_str(), &self.file_name) {
            ("audio", _) if self.voice => "[voice note]".to_owned(),
            ("document", Some(name)) => match &self.mime_type {
                Some(mime) => format!("[document: {name} ({mime})]"),
                None => format!("[document: {name}]"),
            },
            (kind, _) => format!("[{kind}]"),
        };
        match &self.caption {
            Some(caption) => format!("{what} {caption}"),
            None => what,
        }
    }
}

impl InboundMessage {
    /// Reads one raw message of a delivery; `contacts` gives the sender's profile name.
    ///
    /// # Errors
    /// [`Unreadable`] when the message has no id or its sender is not a phone number.
    pub fn parse(raw: &Value, contacts: &[Contact]) -> Result<Self, Unreadable> {
        let wamid = text(&raw["id"]).ok_or(Unreadable::NoId)?;
        let sender = raw["from"].as_str().unwrap_or_default();
        let from = Phone::try_from(sender).map_err(|_| Unreadable::Sender(clean(sender)))?;
        let profile_name = contacts
            .iter()
            .find(|c| c.wa_id == sender)
            .or(contacts.first())
            .and_then(|c| text(&Value::String(c.profile.name.clone())));
        let sent_at = raw["timestamp"]
            .as_str()
            .and_then(|t| t.parse::<i64>().ok())
            .and_then(|seconds| DateTime::from_timestamp(seconds, 0));
        Ok(Self {
            wamid,
            from,
            profile_name,
            sent_at,
            content: InboundContent::parse(raw),
        })
    }

    /// Reads a stored event payload: this type, or the raw `{"message", "profile_name"}`
    /// shape that events stored before typed payloads have.
    ///
    /// # Errors
    /// [`Unreadable`] when the stored message cannot be read in either shape.
    pub fn from_stored(payload: &Value) -> Result<Self, Unreadable> {
        if let Ok(typed) = Self::deserialize(payload) {
            return Ok(typed);
        }
        let raw = &payload["message"];
        let name = payload["profile_name"].as_str().unwrap_or_default();
        let contacts = [Contact {
            wa_id: raw["from"].as_str().unwrap_or_default().to_owned(),
            profile: Profile {
                name: name.to_owned(),
            },
        }];
        Self::parse(raw, &contacts)
    }
}

impl InboundContent {
    fn parse(raw: &Value) -> Self {
        let kind = raw["type"].as_str().unwrap_or("unknown");
        let parsed = match kind {
            "text" => text(&raw["text"]["body"]).map(|body| Self::Text { body }),
            "interactive" => {
                let reply = &raw["interactive"];
                text(&reply["button_reply"]["title"])
                    .or_else(|| text(&reply["list_reply"]["title"]))
                    .map(|title| Self::Reply { title })
            }
            "button" => text(&raw["button"]["text"]).map(|title| Self::Reply { title }),
            "image" | "video" | "document" | "audio" | "sticker" => {
                let file = &raw[kind];
                Some(Self::Media(InboundMedia {
                    kind: kind.to_owned(),
                    caption: text(&file["caption"]).filter(|c| !c.trim().is_empty()),
                    media_id: text(&file["id"]),
                    mime_type: text(&file["mime_type"]),
                    sha256: text(&file["sha256"]),
                    file_name: text(&file["filename"]),
                    voice: file["voice"].as_bool().unwrap_or(false),
                }))
            }
            "reaction" => text(&raw["reaction"]["emoji"]).map(|emoji| Self::Reaction { emoji }),
            "location" => {
                let location = &raw["location"];
                match (
                    location["latitude"].as_f64(),
                    location["longitude"].as_f64(),
                ) {
                    (Some(latitude), Some(longitude)) => Some(Self::Location {
                        latitude,
                        longitude,
                        name: text(&location["name"]),
                    }),
                    _ => None,
                }
            }
            _ => None,
        };
        parsed.unwrap_or_else(|| Self::Other { kind: clean(kind) })
    }

    /// The file it carries, for a media message.
    pub fn media(&self) -> Option<&InboundMedia> {
        match self {
            Self::Media(media) => Some(media),
            _ => None,
        }
    }

    /// What the assistant reads: the text, the chosen reply, a caption, or a description of
    /// what was sent.
    pub fn text(&self) -> String {
        match self {
            Self::Text { body } => body.clone(),
            Self::Reply { title } => title.clone(),
            Self::Media(media) => media.describe(),
            Self::Reaction { emoji } => format!("[reacted with {emoji}]"),
            Self::Location {
                latitude,
                longitude,
                name,
            } => format!(
                "[shared a location: {latitude}, {longitude}{}]",
                name.as_deref()
                    .map(|n| format!(" ({n})"))
                    .unwrap_or_default()
            ),
            Self::Other { kind } => {
                format!("[The person sent a {kind} message that cannot be shown as text]")
            }
        }
    }
}

/// A sender's profile, as a delivery lists it beside the messages.
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
