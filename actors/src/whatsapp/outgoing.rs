//! What an outbound message is on the wire: free text or a template, to one recipient. Stored
//! with the message (`messages.outbound`) so that a message left pending at a stop is sent
//! again as exactly what it was.

use parley_persistence::usage::Category;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use uuid::Uuid;

/// The content of an outbound message.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum OutboundContent {
    /// Free-form text; only inside the 24-hour window.
    Text {
        /// The text (at most [`crate::domain::TEXT_LIMIT`] characters).
        body: String,
        /// The inbound message this answers (`wamid`), shown as a reply in WhatsApp.
        context: Option<String>,
    },
    /// An approved template; allowed any time.
    Template(TemplateMessage),
    /// A file (a picture, an audio, a video, a document or a sticker); only inside the 24-hour
    /// window, like free text.
    Media(OutgoingMedia),
}

/// A file to send: uploaded to Meta (its media id) or at a public link Meta fetches.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutgoingMedia {
    /// `image`, `audio`, `video`, `document` or `sticker`.
    pub kind: String,
    /// Meta's id of an uploaded file.
    pub media_id: Option<String>,
    /// A public `https` link to the file (Meta calls it less reliable than an upload).
    pub link: Option<String>,
    /// The caption (images, videos and documents only).
    pub caption: Option<String>,
    /// A document's file name, as the person will see it.
    pub file_name: Option<String>,
}

impl OutgoingMedia {
    /// What the conversation shows of it: the kind, a document's name, the caption.
    pub fn shown(&self) -> String {
        let what = match (&*self.kind, &self.file_name) {
            ("document", Some(name)) => format!("[document: {name}]"),
            (kind, _) => format!("[{kind}]"),
        };
        match &self.caption {
            Some(caption) => format!("{what} {caption}"),
            None => what,
        }
    }

    /// The object of the Cloud API body named by the kind.
    fn wire(&self) -> Value {
        let mut file = serde_json::Map::new();
        if let Some(id) = &self.media_id {
            file.insert("id".to_owned(), json!(id));
        } else if let Some(link) = &self.link {
            file.insert("link".to_owned(), json!(link));
        }
        if let Some(caption) = self
            .caption
            .as_ref()
            .filter(|_| self.kind != "audio" && self.kind != "sticker")
        {
            file.insert("caption".to_owned(), json!(caption));
        }
        if let Some(name) = self.file_name.as_ref().filter(|_| self.kind == "document") {
            file.insert("filename".to_owned(), json!(name));
        }
        Value::Object(file)
    }
}

/// A template with its parameters, ready to send.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TemplateMessage {
    /// Template name.
    pub name: String,
    /// Language code (`en_US`).
    pub language: String,
    /// Meta's components with their parameters (lower-case types).
    pub components: Value,
    /// Meta's category of the template (`MARKETING`, `UTILITY`, `AUTHENTICATION`), as its
    /// listing said when it was rendered: the usage its send counts. Never on the wire.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub category: Option<String>,
}

/// A message for one recipient.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Outgoing {
    /// Recipient's phone digits (no `+`), as the Cloud API wants them.
    pub to: String,
    /// Recipient's identity, for the 24-hour window check of free-form text.
    pub identity_id: Option<Uuid>,
    /// The operator who wrote it, for its `message.sent` event (never on the wire).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operator: Option<Author>,
    /// What to send.
    pub content: OutboundContent,
}

/// An operator who wrote a message: whom its events name.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Author {
    /// The operator.
    pub id: Uuid,
    /// Their name when they wrote it.
    pub name: String,
}

impl Outgoing {
    /// Meta's pricing category of the message: a template's own (one whose category is not
    /// known counts as `marketing`, Meta's dearest, so that a business never sees less than
    /// it will pay), `service` for anything else (free form answers in the service window).
    pub fn category(&self) -> Category {
        match &self.content {
            OutboundContent::Template(template) => template
                .category
                .as_deref()
                .and_then(Category::of_template)
                .unwrap_or(Category::Marketing),
            _ => Category::Service,
        }
    }

    /// Whether this is a template (marketing integrations send those elsewhere).
    pub fn is_template(&self) -> bool {
        matches!(self.content, OutboundContent::Template(_))
    }

    /// The Cloud API body of the message.
    pub fn wire_body(&self) -> Value {
        match &self.content {
            OutboundContent::Text { body, context } => {
                let mut wire = json!({"messaging_product": "whatsapp", "recipient_type": "individual",
                                      "to": self.to, "type": "text",
                                      "text": {"body": body, "preview_url": false}});
                if let Some(wamid) = context {
                    wire["context"] = json!({"message_id": wamid});
                }
                wire
            }
            OutboundContent::Media(media) => {
                let mut wire = json!({"messaging_product": "whatsapp", "recipient_type": "individual",
                                      "to": self.to, "type": media.kind});
                wire[media.kind.as_str()] = media.wire();
                wire
            }
            OutboundContent::Template(template) => json!({
                "messaging_product": "whatsapp", "recipient_type": "individual", "to": self.to,
                "type": "template",
                "template": {"name": template.name, "language": {"code": template.language},
                             "components": template.components}
            }),
        }
    }

    /// The form stored with the message.
    pub fn to_stored(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }

    /// Reads the stored form back; `None` for a message stored without one.
    pub fn from_stored(stored: Option<&Value>) -> Option<Self> {
        stored.and_then(|v| serde_json::from_value(v.clone()).ok())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_text_reply_quotes_the_message_it_answers() {
        let wire = Outgoing {
            to: "16505551234".to_owned(),
            identity_id: None,
            operator: None,
            content: OutboundContent::Text {
                body: "Yes".to_owned(),
                context: Some("wamid.1".to_owned()),
            },
        }
        .wire_body();
        assert_eq!(wire["context"]["message_id"], "wamid.1");
        assert_eq!(wire["text"]["preview_url"], false);
        assert_eq!(wire["recipient_type"], "individual");
    }

    #[test]
    fn a_file_goes_by_its_id_or_link_with_a_caption_and_a_documents_name() {
        let outgoing = |media: OutgoingMedia| Outgoing {
            to: "16505551234".to_owned(),
            identity_id: None,
            operator: None,
            content: OutboundContent::Media(media),
        };
        let document = OutgoingMedia {
            kind: "document".to_owned(),
            media_id: Some("4490709327384033".to_owned()),
            link: None,
            caption: Some("Your invoice".to_owned()),
            file_name: Some("invoice.pdf".to_owned()),
        };
        let wire = outgoing(document.clone()).wire_body();
        assert_eq!(wire["type"], "document");
        assert_eq!(
            wire["document"],
            json!({"id": "4490709327384033", "caption": "Your invoice", "filename": "invoice.pdf"})
        );
        assert_eq!(document.shown(), "[document: invoice.pdf] Your invoice");
        let voice = OutgoingMedia {
            kind: "audio".to_owned(),
            media_id: None,
            link: Some("https://example.com/a.ogg".to_owned()),
            caption: Some("ignored".to_owned()),
            file_name: None,
        };
        // Meta takes no caption on an audio.
        assert_eq!(
            outgoing(voice).wire_body()["audio"],
            json!({"link": "https://example.com/a.ogg"})
        );
    }

    #[test]
    fn a_stored_template_reads_back_as_the_same_template() {
        let outgoing = Outgoing {
            to: "351912345678".to_owned(),
            identity_id: Some(Uuid::nil()),
            operator: None,
            content: OutboundContent::Template(TemplateMessage {
                name: "order_update".to_owned(),
                language: "en_US".to_owned(),
                components: json!([{"type": "body", "parameters": [{"type": "text", "text": "7"}]}]),
                category: Some("UTILITY".to_owned()),
            }),
        };
        let stored = outgoing.to_stored();
        assert_eq!(stored["content"]["kind"], "template");
        assert_eq!(Outgoing::from_stored(Some(&stored)), Some(outgoing));
    }
}
