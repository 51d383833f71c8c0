//! A fake OpenAI-compatible model server: `POST {base}/chat/completions`, streaming (SSE
//! chunks, tool-call fragments, a usage chunk, `[DONE]`) or not.
//!
//! Replies come from a script, one per request, in order; with an empty script the model
//! answers `You said: <the last user message>`, which makes every turn checkable (images the
//! message carries are described after its text: `[image: image/png, 300000 bytes]`).
//!
//! And `POST {base}/audio/transcriptions` (multipart `file` and `model`): answers the
//! transcript set with [`FakeModel::set_transcript`], or one naming what it was given.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::serve::ListenerExt;
use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};
use tokio_stream::wrappers::ReceiverStream;

/// A tool call the fake model asks for.
#[derive(Clone, Debug)]
pub struct FakeToolCall {
    /// Function name.
    pub name: String,
    /// Arguments object (sent as a JSON string, in two fragments when streaming).
    pub arguments: Value,
}

impl FakeToolCall {
    /// A call of `name` with `arguments`.
    pub fn new(name: &str, arguments: Value) -> Self {
        Self {
            name: name.to_owned(),
            arguments,
        }
    }
}

/// What the fake model does with one request.
#[derive(Clone, Debug)]
pub enum Reply {
    /// Answer with this text.
    Text(String),
    /// Ask for these tool calls.
    ToolCalls(Vec<FakeToolCall>),
    /// Fail with this HTTP status and an OpenAI-style error body.
    Status(u16),
    /// Accept the request and never answer.
    Hang,
    /// Answer with a body (or a stream chunk) that is not JSON.
    Malformed,
}

#[derive(Debug, Default)]
struct Script {
    replies: VecDeque<Reply>,
    requests: Vec<Value>,
    /// Request bodies are not kept (benches send hundreds of thousands).
    forgetful: bool,
    time_to_first_token: Duration,
    between_tokens: Duration,
    /// When the last streamed text reply's first and last tokens were handed to the response.
    last_stream: Option<StreamTimes>,
    /// What every transcription answers (`None`: a description of the audio).
    transcript: Option<String>,
    /// Transcriptions asked for.
    transcriptions: Vec<Transcription>,
}

/// A transcription the fake was asked for.
#[derive(Clone, Debug)]
pub struct Transcription {
    /// The `model` field.
    pub model: String,
    /// The file's name.
    pub file_name: String,
    /// The file's type.
    pub mime_type: String,
    /// The file's size.
    pub bytes: usize,
}

/// When the fake received a streamed text request and handed its first and last content
/// tokens to the response body: the model's own time, to be taken out of a client's, free of
/// the fake's timer jitter (a tokio sleep ends on the timer's next millisecond tick).
#[derive(Clone, Copy, Debug)]
pub struct StreamTimes {
    /// The request's arrival in the handler.
    pub received: std::time::Instant,
    /// The first content token.
    pub first: std::time::Instant,
    /// The last content token.
    pub last: std::time::Instant,
}

#[derive(Debug, Default)]
struct Shared {
    script: Mutex<Script>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Script> {
        // A panicking test thread must not take the fake down with it.
        self.script
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// A running fake model server; stops when dropped.
#[derive(Debug)]
pub struct FakeModel {
    addr: SocketAddr,
    shared: Arc<Shared>,
    _shutdown: oneshot::Sender<()>,
}

impl FakeModel {
    /// Starts the server on a free loopback port.
    ///
    /// # Panics
    /// When no loopback port can be bound.
    pub async fn start() -> Self {
        let shared = Arc::new(Shared::default());
        let app = Router::new()
            .route("/v1/chat/completions", post(chat_completions))
            .route("/chat/completions", post(chat_completions))
            .route("/v1/audio/transcriptions", post(transcriptions))
            .with_state(shared.clone());
        #[allow(clippy::expect_used)]
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind a loopback port");
        #[allow(clippy::expect_used)]
        let addr = listener.local_addr().expect("bound address");
        let (tx, rx) = oneshot::channel::<()>();
        tokio::spawn(async move {
            // Each answer leaves at once (no Nagle wait behind a delayed ACK of its head).
            let listener = listener.tap_io(|tcp| {
                let _ = tcp.set_nodelay(true);
            });
            let _ = axum::serve(listener, app)
                .with_graceful_shutdown(async {
                    let _ = rx.await;
                })
                .await;
        });
        Self {
            addr,
            shared,
            _shutdown: tx,
        }
    }

    /// The base URL to configure (`…/v1`; requests go to `{base}/chat/completions`).
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// Queues replies, consumed one per request.
    pub fn push(&self, replies: impl IntoIterator<Item = Reply>) {
        self.shared.lock().replies.extend(replies);
    }

    /// Delay before the first token (or the whole answer when not streaming) and between
    /// streamed tokens.
    pub fn set_latency(&self, time_to_first_token: Duration, between_tokens: Duration) {
        let mut script = self.shared.lock();
        script.time_to_first_token = time_to_first_token;
        script.between_tokens = between_tokens;
    }

    /// Keeps no request bodies from now on, so that a long benchmark's memory is the server's
    /// and not this fake's; [`FakeModel::requests`] then answers what came before.
    pub fn stop_recording(&self) {
        self.shared.lock().forgetful = true;
    }

    /// Keeps the request bodies again from now on (after [`FakeModel::stop_recording`]).
    pub fn start_recording(&self) {
        self.shared.lock().forgetful = false;
    }

    /// Every request body received, in order.
    pub fn requests(&self) -> Vec<Value> {
        self.shared.lock().requests.clone()
    }

    /// When the last streamed text reply's first and last tokens left the fake; recorded
    /// before the stream's end is sent, so a client that has read the end finds its own.
    pub fn last_stream(&self) -> Option<StreamTimes> {
        self.shared.lock().last_stream
    }

    /// Answers every transcription with `text`.
    pub fn set_transcript(&self, text: &str) {
        self.shared.lock().transcript = Some(text.to_owned());
    }

    /// Every transcription asked for, in order.
    pub fn transcriptions(&self) -> Vec<Transcription> {
        self.shared.lock().transcriptions.clone()
    }

    /// The last request body received.
    pub fn last_request(&self) -> Option<Value> {
        self.shared.lock().requests.last().cloned()
    }
}

async fn chat_completions(State(shared): State<Arc<Shared>>, body: Bytes) -> Response {
    let received = std::time::Instant::now();
    let Ok(request) = serde_json::from_slice::<Value>(&body) else {
        return error(StatusCode::BAD_REQUEST, "request body is not JSON");
    };
    let (reply, ttft, between) = {
        let mut script = shared.lock();
        if !script.forgetful {
            script.requests.push(request.clone());
        }
        let reply = script
            .replies
            .pop_front()
            .unwrap_or_else(|| Reply::Text(echo(&request)));
        (reply, script.time_to_first_token, script.between_tokens)
    };
    let streaming = request["stream"].as_bool().unwrap_or(false);
    let model = request["model"].as_str().unwrap_or("fake").to_owned();
    let prompt_tokens = count_prompt_tokens(&request);
    match reply {
        Reply::Status(code) => {
            pause(ttft).await;
            error(
                StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
                "injected failure",
            )
        }
        Reply::Hang => {
            std::future::pending::<()>().await;
            StatusCode::GATEWAY_TIMEOUT.into_response()
        }
        Reply::Malformed if !streaming => {
            pause(ttft).await;
            (
                [(header::CONTENT_TYPE, "application/json")],
                "{\"choices\": [",
            )
                .into_response()
        }
        reply if !streaming => {
            pause(ttft).await;
            let (message, finish, completion_tokens) = whole_message(&reply);
            axum::Json(json!({
                "id": "chatcmpl-fake",
                "object": "chat.completion",
                "model": model,
                "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                "usage": usage(prompt_tokens, completion_tokens),
            }))
            .into_response()
        }
        reply => stream(
            reply,
            model,
            prompt_tokens,
            (ttft, between),
            (received, shared),
        ),
    }
}

fn stream(
    reply: Reply,
    model: String,
    prompt_tokens: u64,
    (ttft, between): (Duration, Duration),
    (received, shared): (std::time::Instant, Arc<Shared>),
) -> Response {
    let (tx, rx) = mpsc::channel::<Result<Bytes, Infallible>>(16);
    tokio::spawn(async move {
        pause(ttft).await;
        let chunk = |delta: Value, finish: Value| {
            json!({"id": "chatcmpl-fake", "object": "chat.completion.chunk", "model": model,
                   "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
        };
        let mut events: Vec<Value> = vec![chunk(
            json!({"role": "assistant", "content": ""}),
            Value::Null,
        )];
        let mut completion_tokens = 0;
        match &reply {
            Reply::Text(text) => {
                for token in text.split_inclusive(' ') {
                    completion_tokens += 1;
                    events.push(chunk(json!({"content": token}), Value::Null));
                }
                events.push(chunk(json!({}), json!("stop")));
            }
            Reply::ToolCalls(calls) => {
                for (index, call) in calls.iter().enumerate() {
                    let arguments = call.arguments.to_string();
                    let (first, second) = arguments.split_at(arguments.len() / 2);
                    completion_tokens += 2;
                    events.push(chunk(
                        json!({"tool_calls": [{"index": index, "id": format!("call_{index}_{}", call.name), "type": "function",
                                               "function": {"name": call.name, "arguments": first}}]}),
                        Value::Null,
                    ));
                    events.push(chunk(
                        json!({"tool_calls": [{"index": index, "function": {"arguments": second}}]}),
                        Value::Null,
                    ));
                }
                events.push(chunk(json!({}), json!("tool_calls")));
            }
            Reply::Malformed => {
                let _ = tx
                    .send(Ok(Bytes::from_static(b"data: {\"choices\": [\n\n")))
                    .await;
                return;
            }
            Reply::Status(_) | Reply::Hang => return,
        }
        // Text: the role chunk, the content tokens, the finish chunk.
        let last_token = events.len().saturating_sub(2);
        let text = matches!(reply, Reply::Text(_));
        let mut first_at = None;
        for (n, event) in events.into_iter().enumerate() {
            if n > 1 {
                pause(between).await;
            }
            // From the role chunk, which the direct client counts as the first (its content
            // is empty) and which goes out just before the first token.
            if text && n == 0 {
                first_at = Some(std::time::Instant::now());
            }
            if let (true, true, Some(first)) = (text, n == last_token, first_at) {
                let last = std::time::Instant::now();
                shared.lock().last_stream = Some(StreamTimes {
                    received,
                    first,
                    last,
                });
            }
            if tx
                .send(Ok(Bytes::from(format!("data: {event}\n\n"))))
                .await
                .is_err()
            {
                return;
            }
        }
        let usage_chunk = json!({"id": "chatcmpl-fake", "object": "chat.completion.chunk", "model": model,
                                 "choices": [], "usage": usage(prompt_tokens, completion_tokens)});
        let _ = tx
            .send(Ok(Bytes::from(format!("data: {usage_chunk}\n\n"))))
            .await;
        let _ = tx.send(Ok(Bytes::from_static(b"data: [DONE]\n\n"))).await;
    });
    Response::builder()
        .header(header::CONTENT_TYPE, "text/event-stream")
        .body(Body::from_stream(ReceiverStream::new(rx)))
        .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
}

fn whole_message(reply: &Reply) -> (Value, &'static str, u64) {
    match reply {
        Reply::ToolCalls(calls) => {
            let tool_calls: Vec<Value> = calls
                .iter()
                .enumerate()
                .map(|(index, call)| {
                    json!({"id": format!("call_{index}_{}", call.name), "type": "function",
                           "function": {"name": call.name, "arguments": call.arguments.to_string()}})
                })
                .collect();
            let n = tool_calls.len() as u64;
            (
                json!({"role": "assistant", "content": null, "tool_calls": tool_calls}),
                "tool_calls",
                n,
            )
        }
        Reply::Text(text) => (
            json!({"role": "assistant", "content": text}),
            "stop",
            text.split_whitespace().count() as u64,
        ),
        Reply::Status(_) | Reply::Hang | Reply::Malformed => {
            (json!({"role": "assistant", "content": ""}), "stop", 0)
        }
    }
}

fn echo(request: &Value) -> String {
    let last_user = request["messages"]
        .as_array()
        .and_then(|messages| messages.iter().rev().find(|m| m["role"] == "user"))
        .map(|m| said(&m["content"]))
        .unwrap_or_default();
    format!("You said: {last_user}")
}

/// What a message's content says: its text, or its parts' texts and a line for each image.
fn said(content: &Value) -> String {
    let Some(parts) = content.as_array() else {
        return content.as_str().unwrap_or_default().to_owned();
    };
    let said: Vec<String> = parts
        .iter()
        .map(|part| match part["type"].as_str() {
            Some("image_url") => describe_image(part["image_url"]["url"].as_str().unwrap_or("")),
            _ => part["text"].as_str().unwrap_or_default().to_owned(),
        })
        .collect();
    said.join(" ")
}

/// `[image: <type>, <n> bytes]` of a `data:` URL, `[image: <url>]` of any other.
fn describe_image(url: &str) -> String {
    use base64::Engine;
    let Some((head, data)) = url.strip_prefix("data:").and_then(|u| u.split_once(',')) else {
        return format!("[image: {url}]");
    };
    let mime = head.trim_end_matches(";base64");
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(data)
        .map_or(0, |b| b.len());
    format!("[image: {mime}, {bytes} bytes]")
}

async fn transcriptions(
    State(shared): State<Arc<Shared>>,
    mut form: axum::extract::Multipart,
) -> Response {
    let (mut model, mut file) = (String::new(), None);
    while let Ok(Some(field)) = form.next_field().await {
        match field.name() {
            Some("model") => model = field.text().await.unwrap_or_default(),
            Some("file") => {
                let name = field.file_name().unwrap_or_default().to_owned();
                let mime = field.content_type().unwrap_or_default().to_owned();
                let bytes = field.bytes().await.map_or(0, |b| b.len());
                file = Some((name, mime, bytes));
            }
            _ => {}
        }
    }
    let Some((file_name, mime_type, bytes)) = file else {
        return error(StatusCode::BAD_REQUEST, "no file");
    };
    if model.is_empty() {
        return error(StatusCode::BAD_REQUEST, "no model");
    }
    let mut script = shared.lock();
    let text = script
        .transcript
        .clone()
        .unwrap_or_else(|| format!("(a {mime_type} recording of {bytes} bytes)"));
    script.transcriptions.push(Transcription {
        model,
        file_name,
        mime_type,
        bytes,
    });
    axum::Json(json!({"text": text})).into_response()
}

fn count_prompt_tokens(request: &Value) -> u64 {
    request["messages"]
        .as_array()
        .map(|messages| {
            messages
                .iter()
                .filter_map(|m| m["content"].as_str())
                .map(|c| c.split_whitespace().count() as u64)
                .sum()
        })
        .unwrap_or(0)
}

fn usage(prompt: u64, completion: u64) -> Value {
    json!({"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion})
}

fn error(status: StatusCode, message: &str) -> Response {
    let body =
        json!({"error": {"message": message, "type": "server_error", "code": status.as_u16()}});
    (status, axum::Json(body)).into_response()
}

/// Waits `time`; no time at all is no wait (a zero `sleep` still waits for the timer's next
/// millisecond tick, which would make an "instant" fake take up to a millisecond).
async fn pause(time: Duration) {
    if !time.is_zero() {
        tokio::time::sleep(time).await;
    }
}
