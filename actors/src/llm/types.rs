//! Wire types of Chat Completions and the client's results.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One message of the conversation sent to the model. With `images`, its content goes as
/// parts: the text, then each image (`{"type":"image_url","image_url":{"url":…}}`).
#[derive(Clone, Debug, PartialEq, Deserialize)]
pub struct ChatMessage {
    /// `system`, `user`, `assistant` or `tool`.
    pub role: String,
    /// Text; absent on an assistant message that only calls tools.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    /// Calls the assistant asked for.
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub tool_calls: Vec<ToolCall>,
    /// For a tool result, the call it answers.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// Images the person sent with it, as URLs (`data:` URLs of the kept files).
    #[serde(skip)]
    pub images: Vec<String>,
}

impl Serialize for ChatMessage {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry("role", &self.role)?;
        if self.images.is_empty() {
            if let Some(content) = &self.content {
                map.serialize_entry("content", content)?;
            }
        } else {
            let text = self
                .content
                .iter()
                .map(|text| serde_json::json!({"type": "text", "text": text}));
            let images = self
                .images
                .iter()
                .map(|url| serde_json::json!({"type": "image_url", "image_url": {"url": url}}));
            let parts: Vec<Value> = text.chain(images).collect();
            map.serialize_entry("content", &parts)?;
        }
        if !self.tool_calls.is_empty() {
            map.serialize_entry("tool_calls", &self.tool_calls)?;
        }
        if let Some(id) = &self.tool_call_id {
            map.serialize_entry("tool_call_id", id)?;
        }
        map.end()
    }
}

impl ChatMessage {
    /// A message of `role` with `content`.
    pub fn text(role: &str, content: impl Into<String>) -> Self {
        Self {
            role: role.to_owned(),
            content: Some(content.into()),
            tool_calls: Vec::new(),
            tool_call_id: None,
            images: Vec::new(),
        }
    }

    /// The system message (the assistant's instructions).
    pub fn system(content: impl Into<String>) -> Self {
        Self::text("system", content)
    }

    /// A message of the person.
    pub fn user(content: impl Into<String>) -> Self {
        Self::text("user", content)
    }

    /// A message of the assistant.
    pub fn assistant(content: impl Into<String>) -> Self {
        Self::text("assistant", content)
    }

    /// The assistant's request for `calls` (with any text it gave alongside).
    pub fn tool_request(content: Option<String>, calls: Vec<ToolCall>) -> Self {
        Self {
            role: "assistant".to_owned(),
            content,
            tool_calls: calls,
            tool_call_id: None,
            images: Vec::new(),
        }
    }

    /// The result of the call `call_id`.
    pub fn tool_result(call_id: &str, content: impl Into<String>) -> Self {
        Self {
            role: "tool".to_owned(),
            content: Some(content.into()),
            tool_calls: Vec::new(),
            tool_call_id: Some(call_id.to_owned()),
            images: Vec::new(),
        }
    }
}

/// A tool call as the API carries it: `{"id","type":"function","function":{"name","arguments"}}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    /// Call id, echoed in the tool result.
    pub id: String,
    /// Always `function`.
    #[serde(rename = "type", default = "function")]
    pub kind: String,
    /// What to call.
    pub function: FunctionCall,
}

fn function() -> String {
    "function".to_owned()
}

/// The function part of a [`ToolCall`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FunctionCall {
    /// Function name.
    pub name: String,
    /// Arguments as a JSON string (possibly invalid JSON: the model wrote it).
    pub arguments: String,
}

impl ToolCall {
    /// A call `id` of `name` with `arguments` (a JSON string).
    pub fn new(id: &str, name: &str, arguments: &str) -> Self {
        Self {
            id: id.to_owned(),
            kind: function(),
            function: FunctionCall {
                name: name.to_owned(),
                arguments: arguments.to_owned(),
            },
        }
    }
}

/// A tool offered to the model.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ToolSpec {
    /// `[a-zA-Z0-9_-]`, at most 64 characters.
    pub name: String,
    /// What it does, for the model.
    pub description: String,
    /// JSON schema of its arguments.
    pub parameters: Value,
}

/// One call to the model. It borrows the conversation and the tools: a turn's rounds each
/// make a request of the history they share, with no copy of it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ChatRequest<'a> {
    /// Model name; the configured default when `None`.
    pub model: Option<&'a str>,
    /// The conversation, system message first.
    pub messages: &'a [ChatMessage],
    /// Tools offered.
    pub tools: &'a [ToolSpec],
    /// Sampling temperature.
    pub temperature: Option<f64>,
    /// Reply token limit.
    pub max_tokens: Option<u32>,
}

/// A request's body as Chat Completions reads it, serialized straight from the request (no
/// JSON tree is built of the history first).
#[derive(Serialize)]
pub(super) struct WireRequest<'a> {
    pub(super) model: &'a str,
    pub(super) messages: &'a [ChatMessage],
    pub(super) stream: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) stream_options: Option<StreamOptions>,
    #[serde(skip_serializing_if = "WireTools::is_empty")]
    pub(super) tools: WireTools<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) tool_choice: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) temperature: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) max_tokens: Option<u32>,
}

/// `stream_options` of a streamed request: the usage comes in the last chunk.
#[derive(Serialize)]
pub(super) struct StreamOptions {
    pub(super) include_usage: bool,
}

/// The tools offered, each as `{"type":"function","function":{…}}`.
pub(super) struct WireTools<'a>(pub(super) &'a [ToolSpec]);

impl WireTools<'_> {
    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl Serialize for WireTools<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Tool<'a> {
            #[serde(rename = "type")]
            kind: &'static str,
            function: &'a ToolSpec,
        }
        serializer.collect_seq(self.0.iter().map(|function| Tool {
            kind: "function",
            function,
        }))
    }
}

/// Token usage of one call.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Usage {
    /// Tokens of the prompt.
    pub prompt_tokens: u64,
    /// Tokens of the reply.
    pub completion_tokens: u64,
    /// Their sum.
    pub total_tokens: u64,
}

impl std::ops::AddAssign for Usage {
    fn add_assign(&mut self, other: Self) {
        self.prompt_tokens += other.prompt_tokens;
        self.completion_tokens += other.completion_tokens;
        self.total_tokens += other.total_tokens;
    }
}

/// What the model answered.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Completion {
    /// Its text (empty when it only called tools).
    pub content: String,
    /// Tool calls it asked for.
    pub tool_calls: Vec<ToolCall>,
    /// `stop`, `length`, `tool_calls` or `content_filter`.
    pub finish_reason: Option<String>,
    /// Tokens used.
    pub usage: Usage,
}

/// Why a call to the model failed, after retries.
#[derive(Clone, Debug, thiserror::Error, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind", content = "detail")]
pub enum LlmError {
    /// No answer within the per-call timeout.
    #[error("the language model did not answer within {0} ms")]
    Timeout(u64),
    /// The model answered with an error status.
    #[error("the language model answered {status}: {message}")]
    Status {
        /// HTTP status.
        status: u16,
        /// The body's error message.
        message: String,
    },
    /// The answer could not be understood.
    #[error("the language model's answer was malformed: {0}")]
    Malformed(String),
    /// The model could not be reached.
    #[error("the language model could not be reached: {0}")]
    Connection(String),
    /// No endpoint is configured.
    #[error("no language model is configured (set PARLEY_LLM_BASE_URL)")]
    NotConfigured,
}

impl LlmError {
    /// Whether another attempt may succeed.
    pub fn is_retryable(&self) -> bool {
        match self {
            Self::Status { status, .. } => *status == 429 || *status >= 500,
            Self::Connection(_) | Self::Timeout(_) => true,
            Self::Malformed(_) | Self::NotConfigured => false,
        }
    }
}
