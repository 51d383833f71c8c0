//! The demo's built-in model: a deterministic OpenAI-compatible Chat Completions server on a
//! loopback port, so that `parley serve --demo` runs with nothing outside the machine. It
//! remembers a name given as "my name is …" or "call me …" and a timezone given as "my timezone
//! is …" (through the `remember` tool), tells the name back when asked "what is my name" (from
//! "name is …" or "called …" in its instructions), asks the
//! demo's MCP clock when asked "what time is it" (in the remembered timezone), and otherwise
//! repeats what it was told; pictures and recordings it measures (`senses`).

use std::convert::Infallible;
use std::net::SocketAddr;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};
use tokio::sync::oneshot;

/// A running demo model; stops when dropped.
pub(crate) struct DemoModel {
    addr: SocketAddr,
    _shutdown: oneshot::Sender<()>,
}

impl DemoModel {
    /// Starts serving on `listener`.
    ///
    /// # Errors
    /// Fails when the listener's address cannot be read.
    pub(crate) fn start(listener: tokio::net::TcpListener) -> std::io::Result<Self> {
        let app = Router::new()
            .route("/v1/chat/completions", post(chat_completions))
            .route(
                "/v1/audio/transcriptions",
                post(super::senses::transcriptions),
            );
        let addr = listener.local_addr()?;
        let (tx, rx) = oneshot::channel::<()>();
        tokio::spawn(async move {
            let _ = axum::serve(listener, app)
                .with_graceful_shutdown(async {
                    let _ = rx.await;
                })
                .await;
        });
        Ok(Self {
            addr,
            _shutdown: tx,
        })
    }

    /// The loopback port it listens on.
    pub(crate) fn port(&self) -> u16 {
        self.addr.port()
    }

    /// The base URL to configure (`…/v1`).
    pub(crate) fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }
}

/// What the model answers to one request.
#[derive(Debug, PartialEq)]
enum Answer {
    Text(String),
    Call { name: String, arguments: Value },
}

impl Answer {
    fn remember(key: &str, value: &str) -> Self {
        Self::Call {
            name: "remember".to_owned(),
            arguments: json!({"key": key, "value": value, "confidence": 1.0}),
        }
    }
}

async fn chat_completions(body: Bytes) -> Response {
    let Ok(request) = serde_json::from_slice::<Value>(&body) else {
        let error = json!({"error": {"message": "request body is not JSON", "type": "invalid_request_error"}});
        return (StatusCode::BAD_REQUEST, axum::Json(error)).into_response();
    };
    let answer = answer(&request);
    let (message, finish) = match &answer {
        Answer::Text(text) => (json!({"role": "assistant", "content": text}), "stop"),
        Answer::Call { name, arguments } => {
            let call = json!({"id": format!("call_demo_{name}"), "type": "function",
                              "function": {"name": name, "arguments": arguments.to_string()}});
            (
                json!({"role": "assistant", "content": null, "tool_calls": [call]}),
                "tool_calls",
            )
        }
    };
    let usage = json!({"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0});
    if !request["stream"].as_bool().unwrap_or(false) {
        return axum::Json(json!({
            "id": "chatcmpl-demo", "object": "chat.completion", "model": "parley-demo",
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": usage,
        }))
        .into_response();
    }
    // One chunk carries the whole message (Chat Completions allows any split), then usage.
    let mut delta = message;
    if let Some(calls) = delta["tool_calls"].as_array_mut() {
        for (index, call) in calls.iter_mut().enumerate() {
            call["index"] = json!(index);
        }
    }
    let chunks = [
        json!({"id": "chatcmpl-demo", "object": "chat.completion.chunk", "model": "parley-demo",
               "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}),
        json!({"id": "chatcmpl-demo", "object": "chat.completion.chunk", "model": "parley-demo",
               "choices": [], "usage": usage}),
    ];
    let mut text: String = chunks.iter().map(|c| format!("data: {c}\n\n")).collect();
    text.push_str("data: [DONE]\n\n");
    let stream = futures_util::stream::once(async move { Ok::<_, Infallible>(Bytes::from(text)) });
    Response::builder()
        .header(header::CONTENT_TYPE, "text/event-stream")
        .body(Body::from_stream(stream))
        .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
}

/// The demo's answer: deterministic, and enough to show memory and a tool at work.
fn answer(request: &Value) -> Answer {
    let messages = request["messages"].as_array().cloned().unwrap_or_default();
    let last = messages.last().cloned().unwrap_or(Value::Null);
    if last["role"] == "tool" {
        return after_tool(&messages, &last);
    }
    let said = super::senses::said(&last["content"]).trim().to_owned();
    let lower = said.to_lowercase();
    let system = messages
        .first()
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default();
    let offered = |wanted: &dyn Fn(&str) -> bool| {
        request["tools"].as_array().and_then(|tools| {
            tools
                .iter()
                .filter_map(|t| t["function"]["name"].as_str())
                .find(|name| wanted(name))
                .map(str::to_owned)
        })
    };
    for (phrase, key) in [
        ("my timezone is ", "profile.timezone"),
        ("my name is ", "profile.name"),
        ("call me ", "profile.name"),
    ] {
        if let Some(at) = lower.find(phrase) {
            let value = said[at + phrase.len()..]
                .trim_matches(|c: char| c.is_whitespace() || matches!(c, '.' | ',' | '!' | '?'))
                .to_owned();
            if !value.is_empty() && offered(&|name| name == "remember").is_some() {
                return Answer::remember(key, &value);
            }
        }
    }
    if lower.contains("what time") {
        if let Some(name) =
            offered(&|name| name.ends_with(&format!("__{}", super::mcp_clock::TOOL)))
        {
            let arguments = match told(system, "timezone is ") {
                Some(zone) => json!({ "timezone": zone }),
                None => json!({}),
            };
            return Answer::Call { name, arguments };
        }
        return Answer::Text("I have no clock to look at.".to_owned());
    }
    if lower.contains("what is my name") || lower.contains("what's my name") {
        let known = told(system, "name is ").or_else(|| told(system, "called "));
        return Answer::Text(match known {
            Some(name) => format!("Your name is {name}."),
            None => "I don't know your name yet. Tell me: \"my name is …\"".to_owned(),
        });
    }
    Answer::Text(format!("You said: {said}"))
}

/// What the instructions say after `marker` (up to the end of the sentence).
fn told<'a>(system: &'a str, marker: &str) -> Option<&'a str> {
    system
        .split(marker)
        .nth(1)
        .and_then(|rest| rest.split('\n').next())
        .and_then(|line| line.split(". ").next())
        .map(|rest| rest.trim().trim_end_matches('.'))
        .filter(|told| !told.is_empty())
}

/// The words after a tool's result: which tool ran decides them.
fn after_tool(messages: &[Value], result: &Value) -> Answer {
    let called = messages
        .iter()
        .rev()
        .find_map(|m| m["tool_calls"][0]["function"]["name"].as_str())
        .unwrap_or_default();
    let content: Value = result["content"]
        .as_str()
        .and_then(|c| serde_json::from_str(c).ok())
        .unwrap_or(Value::Null);
    if called.ends_with(super::mcp_clock::TOOL) {
        return Answer::Text(
            match (content["text"].as_str(), content["error"].as_str()) {
                (Some(text), _) => format!("It is {text}."),
                (None, Some(error)) => format!("I could not read the clock: {error}"),
                _ => "I could not read the clock.".to_owned(),
            },
        );
    }
    let arguments: Value = messages
        .iter()
        .rev()
        .find_map(|m| m["tool_calls"][0]["function"]["arguments"].as_str())
        .and_then(|a| serde_json::from_str(a).ok())
        .unwrap_or(Value::Null);
    if arguments["key"] == "profile.timezone" {
        return Answer::Text(format!(
            "Noted: your timezone is {}.",
            arguments["value"].as_str().unwrap_or_default()
        ));
    }
    Answer::Text("Nice to meet you! I will remember your name on every channel.".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn asked(text: &str, system: &str) -> Value {
        json!({"messages": [{"role": "system", "content": system}, {"role": "user", "content": text}],
               "tools": [{"type": "function", "function": {"name": "remember"}},
                         {"type": "function", "function": {"name": "demo_clock__current_time"}}]})
    }

    #[test]
    fn the_time_is_asked_of_the_clock_in_the_known_timezone() {
        assert_eq!(
            answer(&asked(
                "What time is it?",
                "The person's name is Maria. Their timezone is Asia/Tokyo."
            )),
            Answer::Call {
                name: "demo_clock__current_time".to_owned(),
                arguments: json!({"timezone": "Asia/Tokyo"}),
            }
        );
        let after = json!({"messages": [
            {"role": "user", "content": "What time is it?"},
            {"role": "assistant", "tool_calls": [{"function": {"name": "demo_clock__current_time", "arguments": "{}"}}]},
            {"role": "tool", "content": "{\"text\": \"09:00 in UTC\"}"},
        ]});
        assert_eq!(
            answer(&after),
            Answer::Text("It is 09:00 in UTC.".to_owned())
        );
    }

    #[test]
    fn a_given_name_is_remembered_through_the_tool() {
        assert_eq!(
            answer(&asked("Hi! My name is Maria.", "")),
            Answer::remember("profile.name", "Maria")
        );
        assert_eq!(
            answer(&asked("My timezone is Europe/Lisbon", "")),
            Answer::remember("profile.timezone", "Europe/Lisbon")
        );
    }

    #[test]
    fn call_me_is_a_name_and_called_in_the_instructions_is_read_back() {
        assert_eq!(
            answer(&asked("Hi, call me Mia", "")),
            Answer::remember("profile.name", "Mia")
        );
        assert_eq!(
            answer(&asked(
                "What is my name?",
                "You help Maria. They like to be called Mia."
            )),
            Answer::Text("Your name is Mia.".to_owned())
        );
    }

    #[test]
    fn a_known_name_is_told_back_from_the_instructions() {
        assert_eq!(
            answer(&asked("What is my name?", "The person's name is Maria.")),
            Answer::Text("Your name is Maria.".to_owned())
        );
        assert_eq!(
            answer(&asked("hello", "")),
            Answer::Text("You said: hello".to_owned())
        );
    }
}
