//! A conversation's messages as the page shows them: who wrote, what they said, the files
//! they sent (pictures, voice notes and videos in place, documents to download), the tools
//! the assistant used laid out, and where what went to the person stands.

use parley_persistence::entities::{attachment, message};
use parley_persistence::values::{AttachmentStatus, MediaKind};
use parley_persistence::{Direction, Role};
use serde_json::Value;
use uuid::Uuid;

use crate::http::console::view::{author, when};

/// A message as the page shows it.
pub(in crate::http::console) struct Line {
    pub(in crate::http::console) kind: &'static str,
    pub(in crate::http::console) author: &'static str,
    /// The operator who wrote it, by name (empty for anyone else).
    pub(in crate::http::console) by: String,
    pub(in crate::http::console) text: String,
    /// Tool calls the assistant asked for (names), folded with their arguments.
    pub(in crate::http::console) tools: String,
    pub(in crate::http::console) detail: String,
    pub(in crate::http::console) status: &'static str,
    pub(in crate::http::console) error: String,
    pub(in crate::http::console) at: String,
    /// The files it carries.
    pub(in crate::http::console) files: Vec<File>,
}

/// A file a message carries, as the page shows it.
pub(in crate::http::console) struct File {
    pub(in crate::http::console) id: Uuid,
    /// `image`, `audio`, `video`, `document` or `sticker`.
    pub(in crate::http::console) kind: &'static str,
    /// What a link to it says: the document's name, else its kind.
    pub(in crate::http::console) name: String,
    /// `stored`: shown; `pending`: on its way; `failed`: why it is not kept.
    pub(in crate::http::console) status: &'static str,
    pub(in crate::http::console) failure: String,
    pub(in crate::http::console) transcript: String,
}

impl File {
    fn of(file: attachment::Model) -> Self {
        let kind = match file.kind {
            MediaKind::Image => "image",
            MediaKind::Audio => "audio",
            MediaKind::Video => "video",
            MediaKind::Document => "document",
            MediaKind::Sticker => "sticker",
        };
        Self {
            id: file.id,
            kind,
            name: file.file_name.unwrap_or_else(|| kind.to_owned()),
            status: file.status.as_str(),
            failure: if file.status == AttachmentStatus::Failed {
                file.failure.unwrap_or_default()
            } else {
                String::new()
            },
            transcript: file.transcript.unwrap_or_default(),
        }
    }
}

pub(in crate::http::console) fn line(m: message::Model, files: Vec<attachment::Model>) -> Line {
    let kind = match m.role {
        Role::User => "person",
        Role::Assistant => "assistant",
        Role::Tool => "tool",
        Role::Operator => "operator",
        Role::System => "system",
    };
    let tools = m.tool_calls.as_ref().map(tool_names).unwrap_or_default();
    let detail = match (&m.tool_calls, m.role) {
        (Some(calls), _) => readable_calls(calls),
        (None, Role::Tool) => readable(&m.content),
        _ => String::new(),
    };
    // What went to the person through the channel has a status worth showing; a tool call or
    // its result never left.
    let outbound = m.direction == Direction::Outbound
        && matches!(m.role, Role::Assistant | Role::Operator)
        && m.tool_calls.is_none();
    Line {
        by: String::new(),
        kind,
        author: author(m.role),
        text: if m.role == Role::Tool {
            String::new()
        } else {
            m.content
        },
        tools,
        detail,
        status: if outbound { m.status.as_str() } else { "" },
        error: m
            .error
            .as_ref()
            .and_then(|e| e.get("title").or_else(|| e.get("message")))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned(),
        at: when(m.created_at),
        files: files.into_iter().map(File::of).collect(),
    }
}

/// An assistant's tool calls as a person reads them: each tool's name, then its arguments
/// laid out (the model writes them as a JSON string; shown as the JSON they are).
fn readable_calls(calls: &Value) -> String {
    calls
        .as_array()
        .into_iter()
        .flatten()
        .map(|call| {
            let name = call
                .pointer("/function/name")
                .and_then(Value::as_str)
                .unwrap_or("a tool");
            let arguments = call
                .pointer("/function/arguments")
                .and_then(Value::as_str)
                .map(readable)
                .unwrap_or_default();
            format!("{name}\n{arguments}")
        })
        .collect::<Vec<_>>()
        .join("\n\n")
}

/// `text` laid out as JSON when it is JSON, as it is otherwise.
fn readable(text: &str) -> String {
    serde_json::from_str::<Value>(text)
        .ok()
        .and_then(|value| serde_json::to_string_pretty(&value).ok())
        .unwrap_or_else(|| text.to_owned())
}

/// The names of the tools of an assistant's `tool_calls`.
fn tool_names(calls: &Value) -> String {
    calls
        .as_array()
        .map(|calls| {
            calls
                .iter()
                .filter_map(|c| c.pointer("/function/name").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join(", ")
        })
        .unwrap_or_default()
}
