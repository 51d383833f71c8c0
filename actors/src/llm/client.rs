//! The HTTP client proper: request building, retries, timeouts, and reading either kind of
//! answer.

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_util::StreamExt;
use http_body::{Frame, SizeHint};
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};
use tracing::Instrument;

use super::sse::{Assembler, SseLines};
use super::types::{
    ChatRequest, Completion, LlmError, StreamOptions, ToolCall, Usage, WireRequest, WireTools,
};
use crate::measure;

/// Where the model is and how patiently to talk to it.
#[derive(Clone, Debug)]
pub struct LlmConfig {
    /// Base URL; requests go to `{base_url}/chat/completions`. `None`: every call fails with
    /// [`LlmError::NotConfigured`].
    pub base_url: Option<String>,
    /// Bearer key, if the endpoint needs one.
    pub api_key: Option<String>,
    /// Model used when the request names none.
    pub default_model: Option<String>,
    /// Longest wait for an answer (non-streaming) or for the next chunk (streaming).
    pub timeout: Duration,
    /// The model that transcribes audio (`POST {base_url}/audio/transcriptions`).
    pub transcription_model: String,
    /// Further attempts after a retryable failure.
    pub max_retries: u32,
    /// First retry delay; doubles per attempt.
    pub retry_backoff: Duration,
}

/// Chat Completions client; cheap to clone.
#[derive(Clone, Debug)]
pub struct LlmClient {
    pub(super) http: reqwest::Client,
    pub(super) config: Arc<LlmConfig>,
}

/// Where a streaming call's content fragments go as they arrive. The turn's listeners are one;
/// a channel is another.
pub trait TokenSink: Sync {
    /// Takes one fragment. A listener that went away does not stop the call.
    fn token(&self, fragment: String) -> impl Future<Output = ()> + Send;
}

impl TokenSink for mpsc::Sender<String> {
    async fn token(&self, fragment: String) {
        let _ = self.send(fragment).await;
    }
}

/// Told once a call's request has been handed to its connection, or once the call failed
/// before that: work that can wait for the model (storing what it answers) starts then, so
/// that it does not compete with the request for the machine.
#[derive(Debug, Default)]
pub struct RequestSent(Option<oneshot::Sender<()>>);

impl RequestSent {
    /// A handle for one call and what it tells: the receiver resolves when the request has
    /// gone (`Ok`) or the call gave up before it did (`Err`); either way, the wait is over.
    #[must_use]
    pub fn channel() -> (Self, oneshot::Receiver<()>) {
        let (sent, told) = oneshot::channel();
        (Self(Some(sent)), told)
    }
}

/// A request body that tells [`RequestSent`] when the connection takes it. Its length is
/// exact, so it goes with a `Content-Length` like any JSON body.
struct Announced {
    body: Option<Bytes>,
    sent: Option<oneshot::Sender<()>>,
}

impl http_body::Body for Announced {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let this = self.get_mut();
        if let Some(sent) = this.sent.take() {
            let _ = sent.send(());
        }
        Poll::Ready(this.body.take().map(|body| Ok(Frame::data(body))))
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.body.as_ref().map_or(0, |body| body.len() as u64))
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_none()
    }
}

/// Longest delay between two attempts.
const MAX_BACKOFF: Duration = Duration::from_secs(5);

impl LlmClient {
    /// A client for `config`.
    pub fn new(config: LlmConfig) -> Self {
        super::install_crypto_provider();
        Self {
            http: reqwest::Client::new(),
            config: Arc::new(config),
        }
    }

    /// One non-streaming call, retried on 429, 5xx, connection errors and timeouts.
    ///
    /// # Errors
    /// The last failure once retries are exhausted, or at once when it is not retryable.
    pub async fn complete(&self, request: &ChatRequest<'_>) -> Result<Completion, LlmError> {
        self.complete_telling(request, RequestSent::default()).await
    }

    /// As [`LlmClient::complete`], telling `sent` when the request has gone.
    ///
    /// # Errors
    /// As [`LlmClient::complete`].
    pub async fn complete_telling(
        &self,
        request: &ChatRequest<'_>,
        mut sent: RequestSent,
    ) -> Result<Completion, LlmError> {
        let started = Instant::now();
        let mut attempt = 0;
        loop {
            match self.complete_once(request, &mut sent).await {
                Err(error) if error.is_retryable() && attempt < self.config.max_retries => {
                    self.back_off(attempt, &error).await;
                    attempt += 1;
                }
                outcome => {
                    measure::model_call("complete", outcome.is_ok(), started.elapsed());
                    return outcome;
                }
            }
        }
    }

    /// One streaming call: content fragments go to `tokens` as they arrive. Retried like
    /// [`LlmClient::complete`], but only while nothing has been streamed yet, so a listener
    /// never sees a reply restart.
    ///
    /// # Errors
    /// As [`LlmClient::complete`].
    pub async fn stream(
        &self,
        request: &ChatRequest<'_>,
        tokens: &impl TokenSink,
    ) -> Result<Completion, LlmError> {
        self.stream_telling(request, tokens, RequestSent::default())
            .await
    }

    /// As [`LlmClient::stream`], telling `sent` when the request has gone.
    ///
    /// # Errors
    /// As [`LlmClient::complete`].
    pub async fn stream_telling(
        &self,
        request: &ChatRequest<'_>,
        tokens: &impl TokenSink,
        mut sent: RequestSent,
    ) -> Result<Completion, LlmError> {
        let started = Instant::now();
        let mut attempt = 0;
        loop {
            let mut streamed = false;
            match self
                .stream_once(request, tokens, &mut streamed, &mut sent)
                .await
            {
                Err(error)
                    if !streamed && error.is_retryable() && attempt < self.config.max_retries =>
                {
                    self.back_off(attempt, &error).await;
                    attempt += 1;
                }
                outcome => {
                    measure::model_call("stream", outcome.is_ok(), started.elapsed());
                    return outcome;
                }
            }
        }
    }

    async fn back_off(&self, attempt: u32, error: &LlmError) {
        let delay = self
            .config
            .retry_backoff
            .saturating_mul(2u32.saturating_pow(attempt))
            .min(MAX_BACKOFF);
        tracing::warn!(%error, attempt = attempt + 1, ?delay, "language model call failed; retrying");
        tokio::time::sleep(delay).await;
    }

    pub(super) fn timeout_error(&self) -> LlmError {
        LlmError::Timeout(u64::try_from(self.config.timeout.as_millis()).unwrap_or(u64::MAX))
    }

    /// The request of one attempt; the first attempt tells `sent` when it has gone.
    fn build(
        &self,
        request: &ChatRequest<'_>,
        stream: bool,
        sent: &mut RequestSent,
    ) -> Result<reqwest::RequestBuilder, LlmError> {
        let base = self
            .config
            .base_url
            .as_deref()
            .ok_or(LlmError::NotConfigured)?;
        let model = request
            .model
            .or(self.config.default_model.as_deref())
            .unwrap_or("default");
        let tools = !request.tools.is_empty();
        let body = WireRequest {
            model,
            messages: request.messages,
            stream,
            stream_options: stream.then_some(StreamOptions {
                include_usage: true,
            }),
            tools: WireTools(request.tools),
            tool_choice: tools.then_some("auto"),
            temperature: request.temperature,
            max_tokens: request.max_tokens,
        };
        let url = format!("{}/chat/completions", base.trim_end_matches('/'));
        let body = serde_json::to_vec(&body)
            .map_err(|e| LlmError::Malformed(format!("the request: {e}")))?;
        let body = Announced {
            body: Some(body.into()),
            sent: sent.0.take(),
        };
        let mut builder = self
            .http
            .post(url)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(reqwest::Body::wrap(body));
        if let Some(key) = &self.config.api_key {
            builder = builder.bearer_auth(key);
        }
        Ok(builder)
    }

    pub(super) async fn send(
        &self,
        builder: reqwest::RequestBuilder,
    ) -> Result<reqwest::Response, LlmError> {
        let response = tokio::time::timeout(self.config.timeout, builder.send())
            .await
            .map_err(|_| self.timeout_error())?
            .map_err(|e| LlmError::Connection(e.to_string()))?;
        if response.status().is_success() {
            return Ok(response);
        }
        let status = response.status().as_u16();
        let text = tokio::time::timeout(self.config.timeout, response.text())
            .await
            .map_err(|_| self.timeout_error())?
            .unwrap_or_default();
        let message = serde_json::from_str::<Value>(&text)
            .ok()
            .and_then(|v| v["error"]["message"].as_str().map(str::to_owned))
            .unwrap_or_else(|| text.chars().take(200).collect());
        Err(LlmError::Status { status, message })
    }

    async fn complete_once(
        &self,
        request: &ChatRequest<'_>,
        sent: &mut RequestSent,
    ) -> Result<Completion, LlmError> {
        let response = self.send(self.build(request, false, sent)?).await?;
        let body: Value = tokio::time::timeout(self.config.timeout, response.json())
            .await
            .map_err(|_| self.timeout_error())?
            .map_err(|e| LlmError::Malformed(e.to_string()))?;
        let choice = &body["choices"][0];
        let message = &choice["message"];
        if message.is_null() {
            return Err(LlmError::Malformed(
                "the answer has no choices[0].message".to_owned(),
            ));
        }
        let tool_calls: Vec<ToolCall> = match message.get("tool_calls") {
            Some(Value::Array(calls)) => serde_json::from_value(Value::Array(calls.clone()))
                .map_err(|e| LlmError::Malformed(format!("tool_calls: {e}")))?,
            _ => Vec::new(),
        };
        let usage: Usage = body
            .get("usage")
            .and_then(|u| serde_json::from_value(u.clone()).ok())
            .unwrap_or_default();
        Ok(Completion {
            content: message["content"].as_str().unwrap_or_default().to_owned(),
            tool_calls,
            finish_reason: choice["finish_reason"].as_str().map(str::to_owned),
            usage,
        })
    }

    async fn stream_once(
        &self,
        request: &ChatRequest<'_>,
        tokens: &impl TokenSink,
        streamed: &mut bool,
        sent: &mut RequestSent,
    ) -> Result<Completion, LlmError> {
        let started = Instant::now();
        let response = self.send(self.build(request, true, sent)?).await?;
        let mut body = response.bytes_stream();
        let mut lines = SseLines::default();
        let mut assembler = Assembler::default();
        while !assembler.is_done() {
            let next = tokio::time::timeout(self.config.timeout, body.next())
                .await
                .map_err(|_| self.timeout_error())?;
            let Some(chunk) = next else {
                break;
            };
            let chunk = chunk.map_err(|e| LlmError::Connection(e.to_string()))?;
            for payload in lines.feed(&chunk) {
                if let Some(fragment) = assembler.apply(&payload)? {
                    if *streamed {
                        tokens.token(fragment).await;
                        continue;
                    }
                    measure::first_token(started.elapsed());
                    *streamed = true;
                    // When the first token reached the turn and went on to its listeners.
                    tokens
                        .token(fragment)
                        .instrument(tracing::debug_span!("first_token"))
                        .await;
                }
            }
        }
        Ok(assembler.finish())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::LazyLock;

    use parley_testkit::{FakeModel, FakeToolCall, Reply};
    use serde_json::json;

    use super::*;
    use crate::llm::{ChatMessage, ToolSpec};

    fn client(model: &FakeModel, timeout_ms: u64) -> LlmClient {
        LlmClient::new(LlmConfig {
            transcription_model: "whisper-1".to_owned(),
            base_url: Some(model.base_url()),
            api_key: Some("sk-test".to_owned()),
            default_model: Some("fake-1".to_owned()),
            timeout: Duration::from_millis(timeout_ms),
            max_retries: 2,
            retry_backoff: Duration::from_millis(10),
        })
    }

    fn request() -> ChatRequest<'static> {
        static CONVERSATION: LazyLock<(Vec<ChatMessage>, Vec<ToolSpec>)> = LazyLock::new(|| {
            let messages = vec![
                ChatMessage::text("system", "Be brief."),
                ChatMessage::text("user", "hi there"),
            ];
            let tools = vec![ToolSpec {
                name: "remember".to_owned(),
                description: "Remember a fact".to_owned(),
                parameters: json!({"type": "object"}),
            }];
            (messages, tools)
        });
        ChatRequest {
            model: None,
            messages: &CONVERSATION.0,
            tools: &CONVERSATION.1,
            temperature: Some(0.2),
            max_tokens: None,
        }
    }

    #[tokio::test]
    async fn a_non_streaming_answer_is_read_with_its_usage_and_the_request_is_well_formed() {
        let model = FakeModel::start().await;
        let completion = client(&model, 2_000)
            .complete(&request())
            .await
            .expect("answer");
        assert_eq!(completion.content, "You said: hi there");
        assert_eq!(completion.usage.completion_tokens, 4);
        let sent = model.last_request().expect("request");
        assert_eq!(sent["model"], "fake-1");
        assert_eq!(sent["stream"], false);
        assert_eq!(sent["temperature"], 0.2);
        assert_eq!(sent["tools"][0]["type"], "function");
        assert_eq!(
            sent["tools"][0]["function"],
            json!({"name": "remember", "description": "Remember a fact",
                   "parameters": {"type": "object"}})
        );
        assert_eq!(sent["tool_choice"], "auto");
        assert_eq!(
            sent["messages"][0],
            json!({"role": "system", "content": "Be brief."})
        );
    }

    #[tokio::test]
    async fn a_request_without_tools_sends_only_what_it_has() {
        let model = FakeModel::start().await;
        let messages = [
            ChatMessage::user("hi there"),
            ChatMessage::tool_request(None, vec![ToolCall::new("c1", "look", "{}")]),
            ChatMessage::tool_result("c1", "found"),
        ];
        let request = ChatRequest {
            model: Some("named"),
            messages: &messages,
            tools: &[],
            temperature: None,
            max_tokens: Some(64),
        };
        client(&model, 2_000)
            .complete(&request)
            .await
            .expect("answer");
        assert_eq!(
            model.last_request().expect("request"),
            json!({
                "model": "named",
                "stream": false,
                "max_tokens": 64,
                "messages": [
                    {"role": "user", "content": "hi there"},
                    {"role": "assistant", "tool_calls": [
                        {"id": "c1", "type": "function",
                         "function": {"name": "look", "arguments": "{}"}}]},
                    {"role": "tool", "content": "found", "tool_call_id": "c1"},
                ],
            })
        );
    }

    #[tokio::test]
    async fn a_streamed_answer_arrives_token_by_token_and_whole() {
        let model = FakeModel::start().await;
        model.push([Reply::Text("one two three".to_owned())]);
        let (tx, mut rx) = mpsc::channel(16);
        let completion = client(&model, 2_000)
            .stream(&request(), &tx)
            .await
            .expect("answer");
        drop(tx);
        let mut tokens = Vec::new();
        while let Some(token) = rx.recv().await {
            tokens.push(token);
        }
        assert_eq!(tokens, ["one ", "two ", "three"]);
        assert_eq!(completion.content, "one two three");
        assert_eq!(completion.usage.completion_tokens, 3);
        assert_eq!(
            model.last_request().expect("request")["stream_options"]["include_usage"],
            true
        );
    }

    #[tokio::test]
    async fn streamed_tool_calls_are_assembled() {
        let model = FakeModel::start().await;
        model.push([Reply::ToolCalls(vec![FakeToolCall::new(
            "remember",
            json!({"key": "profile.name", "value": "Ana"}),
        )])]);
        let (tx, _rx) = mpsc::channel(16);
        let completion = client(&model, 2_000)
            .stream(&request(), &tx)
            .await
            .expect("answer");
        assert_eq!(completion.tool_calls.len(), 1);
        let arguments: Value =
            serde_json::from_str(&completion.tool_calls[0].function.arguments).expect("json");
        assert_eq!(arguments, json!({"key": "profile.name", "value": "Ana"}));
    }

    #[tokio::test]
    async fn a_transient_500_or_429_is_retried() {
        let model = FakeModel::start().await;
        model.push([Reply::Status(500), Reply::Status(429)]);
        let completion = client(&model, 2_000)
            .complete(&request())
            .await
            .expect("third attempt");
        assert_eq!(completion.content, "You said: hi there");
        assert_eq!(model.requests().len(), 3);
    }

    #[tokio::test]
    async fn a_persistent_failure_gives_up_after_the_retries() {
        let model = FakeModel::start().await;
        model.push([Reply::Status(503), Reply::Status(503), Reply::Status(503)]);
        let error = client(&model, 2_000)
            .complete(&request())
            .await
            .expect_err("fails");
        assert!(
            matches!(error, LlmError::Status { status: 503, .. }),
            "{error:?}"
        );
        assert_eq!(model.requests().len(), 3);
    }

    #[tokio::test]
    async fn a_400_is_not_retried() {
        let model = FakeModel::start().await;
        model.push([Reply::Status(400)]);
        let error = client(&model, 2_000)
            .complete(&request())
            .await
            .expect_err("fails");
        assert!(matches!(error, LlmError::Status { status: 400, .. }));
        assert_eq!(model.requests().len(), 1);
    }

    #[tokio::test]
    async fn a_hanging_model_times_out() {
        let model = FakeModel::start().await;
        model.push([Reply::Hang, Reply::Hang, Reply::Hang]);
        let error = client(&model, 100)
            .complete(&request())
            .await
            .expect_err("times out");
        assert_eq!(error, LlmError::Timeout(100));
    }

    #[tokio::test]
    async fn a_call_tells_when_its_request_has_gone_before_the_model_answers() {
        let model = FakeModel::start().await;
        model.push([Reply::Hang]);
        let client = client(&model, 5_000);
        let (sent, told) = RequestSent::channel();
        let (tx, _rx) = mpsc::channel(16);
        let call = async { client.stream_telling(&request(), &tx, sent).await };
        tokio::select! {
            told = told => assert_eq!(told, Ok(()), "told while the model still thinks"),
            outcome = call => panic!("the call ended first: {outcome:?}"),
        }
    }

    /// A client of a model at `address` that tries each call once.
    fn client_without_retries(address: std::net::SocketAddr) -> LlmClient {
        LlmClient::new(LlmConfig {
            transcription_model: "whisper-1".to_owned(),
            base_url: Some(format!("http://{address}")),
            api_key: None,
            default_model: None,
            timeout: Duration::from_secs(5),
            max_retries: 0,
            retry_backoff: Duration::from_millis(10),
        })
    }

    #[tokio::test]
    async fn a_call_that_cannot_send_its_request_ends_the_wait_too() {
        let unused = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
        let address = unused.local_addr().expect("its address");
        drop(unused);
        let client = client_without_retries(address);
        let (sent, told) = RequestSent::channel();
        let outcome = client.complete_telling(&request(), sent).await;
        assert!(
            matches!(outcome, Err(LlmError::Connection(_))),
            "{outcome:?}"
        );
        assert!(told.await.is_err(), "the request never went");
    }

    /// The body goes with its length, as any JSON body: some gateways refuse a chunked one.
    #[tokio::test]
    async fn the_request_body_goes_with_its_length() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};

        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a port");
        let address = listener.local_addr().expect("its address");
        let server = tokio::spawn(async move {
            let (mut socket, _) = listener.accept().await.expect("a connection");
            let mut read = Vec::new();
            let mut buffer = [0_u8; 4096];
            while !read.windows(4).any(|w| w == b"\r\n\r\n") {
                let n = socket.read(&mut buffer).await.expect("read");
                assert!(n > 0, "the connection closed early");
                read.extend_from_slice(&buffer[..n]);
            }
            let answer = r#"{"choices":[{"message":{"content":"hi"},"finish_reason":"stop"}]}"#;
            let response = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{answer}",
                answer.len()
            );
            socket.write_all(response.as_bytes()).await.expect("write");
            String::from_utf8_lossy(&read).to_lowercase()
        });
        let client = client_without_retries(address);
        let completion = client.complete(&request()).await.expect("an answer");
        assert_eq!(completion.content, "hi");
        let head = server.await.expect("the server");
        assert!(head.contains("\r\ncontent-length: "), "{head}");
        assert!(
            head.contains("\r\ncontent-type: application/json"),
            "{head}"
        );
        assert!(!head.contains("transfer-encoding"), "{head}");
    }

    #[tokio::test]
    async fn a_malformed_stream_chunk_is_an_error() {
        let model = FakeModel::start().await;
        model.push([Reply::Malformed]);
        let (tx, _rx) = mpsc::channel(16);
        let error = client(&model, 2_000)
            .stream(&request(), &tx)
            .await
            .expect_err("malformed");
        assert!(matches!(error, LlmError::Malformed(_)), "{error:?}");
    }

    #[tokio::test]
    async fn without_a_base_url_every_call_says_so() {
        let client = LlmClient::new(LlmConfig {
            transcription_model: "whisper-1".to_owned(),
            base_url: None,
            api_key: None,
            default_model: None,
            timeout: Duration::from_secs(1),
            max_retries: 0,
            retry_backoff: Duration::ZERO,
        });
        assert_eq!(
            client.complete(&request()).await,
            Err(LlmError::NotConfigured)
        );
    }
}
