//! How much time a chat turn with one MCP tool call adds over the model's and the tool's own
//! time.
//!
//! Starts Parley in-process on SQLite (or `PARLEY_BENCH_DATABASE_URL`) with the testkit fake
//! model and a fake MCP server (both answering at once), for each transport:
//! - baseline: the turn's own outside work done directly, back to back: the model request
//!   that asks for the tool, the tool call itself (`POST {url}/call`, or `tools/call` through an
//!   rmcp client on a kept session), and the model request that answers. The two model
//!   requests are the bytes Parley sent in its last warm-up turn, once the history is at its
//!   cap: the model reads the same conversation on both sides;
//! - turn: `POST /conversation/{id}/chat/{channel}` in which the model calls the tool once.
//!
//! Run: `cargo run --release -p parley-benches --bin mcp_turn -- [turns]`
//! With `PARLEY_BENCH_SPANS=1` it also prints, per transport, the mean wall time of each
//! stage's span per turn.

use std::time::Instant;

use anyhow::Context;
use axum::body::Bytes;
use parley_benches::{BenchServer, SpanTimes, print_comparison};
use parley_testkit::{FakeMcp, FakeToolCall, McpFlavour, Reply};
use rmcp::model::{CallToolRequestParams, ClientConfig, ProtocolVersion};
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientLifecycleMode, ClientServiceExt};
use serde_json::{Value, json};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let turns: usize = std::env::args()
        .nth(1)
        .map_or(Ok(300), |a| a.parse())
        .context("turns")?;
    let spans = SpanTimes::install();
    for flavour in [McpFlavour::Http, McpFlavour::Stateless, McpFlavour::Session] {
        run(flavour, turns, spans.as_ref()).await?;
    }
    Ok(())
}

async fn run(flavour: McpFlavour, turns: usize, spans: Option<&SpanTimes>) -> anyhow::Result<()> {
    let server = BenchServer::start(|_| {}).await?;
    let fake = FakeMcp::start(flavour).await;
    fake.tool("lookup", "Looks an order up");
    let (assistant, channel) = server
        .assistant_channel(
            "You help with orders.",
            &json!({"name": "Bench line", "integration": "sandbox"}),
        )
        .await?;
    let mcp = server
        .post(
            "/workspace/mcps",
            &json!({"name": "orders", "transport": fake.transport(), "url": fake.url(),
                    "headers": [{"key": "Authorization", "value": "Bearer bench"}]}),
        )
        .await?;
    let mcp = mcp["mcp_id"].as_str().context("mcp_id")?.to_owned();
    server
        .send(
            reqwest::Method::PUT,
            &format!("/assistant/{assistant}/mcp/{mcp}"),
            &json!({}),
        )
        .await?;
    server
        .send(
            reqwest::Method::PUT,
            "/identity/bench-1",
            &json!({"name": "Person"}),
        )
        .await?;
    let direct = Direct::connect(&server, &fake, flavour).await?;

    let turn = || async {
        server.model.push([
            Reply::ToolCalls(vec![FakeToolCall::new(
                "orders__lookup",
                json!({"input": "A-1"}),
            )]),
            Reply::Text("On its way.".to_owned()),
        ]);
        let answer = server
            .post(
                &format!("/conversation/bench-1/chat/{channel}"),
                &json!({"message": "Where is A-1?"}),
            )
            .await?;
        anyhow::ensure!(
            answer["tool_calls"][0]["result"]
                .as_str()
                .is_some_and(|r| r.contains("A-1")),
            "the tool did not answer: {answer}"
        );
        Ok(())
    };
    // Warm up both paths (connections, sessions, caches), long enough for the conversation's
    // history to reach its cap (20 turns): from then on Parley's requests to the model keep one
    // size, and the direct side sends the same two.
    for _ in 0..25 {
        direct.round().await?;
        turn().await?;
    }
    server.model.start_recording();
    turn().await?;
    server.model.stop_recording();
    direct.replay(&server.model.requests())?;
    if let Some(spans) = spans {
        spans.reset();
    }
    let mut baseline = Vec::with_capacity(turns);
    let mut measured = Vec::with_capacity(turns);
    for _ in 0..turns {
        let started = Instant::now();
        direct.round().await?;
        baseline.push(started.elapsed());
        let started = Instant::now();
        turn().await?;
        measured.push(started.elapsed());
    }
    println!(
        "mcp_turn: {turns} turns with one `{}` tool call ({flavour:?}), database {}",
        fake.transport(),
        server.database_kind()
    );
    print_comparison(
        "2 model requests + 1 tool call",
        &baseline,
        "chat turn with the tool call",
        &measured,
    )?;
    if let Some(spans) = spans {
        spans.print(turns);
    }
    println!();
    drop(direct);
    server.stop().await
}

/// The outside work of one turn, done directly.
struct Direct<'a> {
    server: &'a BenchServer,
    call_url: String,
    session: Option<RunningService<RoleClient, ClientConfig>>,
    /// The two requests Parley made to the model in its last turn, serialized once and sent
    /// as they were: the model reads the same history either way.
    bodies: std::cell::RefCell<Option<[Bytes; 2]>>,
}

impl<'a> Direct<'a> {
    async fn connect(
        server: &'a BenchServer,
        fake: &FakeMcp,
        flavour: McpFlavour,
    ) -> anyhow::Result<Self> {
        let session = match flavour {
            McpFlavour::Http => None,
            _ => {
                let transport = StreamableHttpClientTransport::with_client(
                    reqwest::Client::new(),
                    StreamableHttpClientTransportConfig::with_uri(fake.url()),
                );
                let lifecycle = if flavour == McpFlavour::Stateless {
                    ClientLifecycleMode::Discover {
                        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
                    }
                } else {
                    ClientLifecycleMode::Initialize
                };
                Some(
                    ClientConfig::default()
                        .with_protocol_version(ProtocolVersion::V_2025_11_25)
                        .serve_with_lifecycle(transport, lifecycle)
                        .await?,
                )
            }
        };
        Ok(Self {
            server,
            call_url: format!("{}/call", fake.url()),
            session,
            bodies: std::cell::RefCell::new(None),
        })
    }

    /// From now on, the model requests are Parley's last two of `requests`.
    fn replay(&self, requests: &[Value]) -> anyhow::Result<()> {
        let [.., asked, answered] = requests else {
            anyhow::bail!("Parley made fewer than two model requests");
        };
        *self.bodies.borrow_mut() = Some([
            serde_json::to_vec(asked)?.into(),
            serde_json::to_vec(answered)?.into(),
        ]);
        Ok(())
    }

    async fn model(&self, body: Bytes) -> anyhow::Result<()> {
        self.server
            .http
            .post(format!("{}/chat/completions", self.server.model.base_url()))
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body)
            .send()
            .await?
            .bytes()
            .await?;
        Ok(())
    }

    async fn tool(&self) -> anyhow::Result<()> {
        let arguments = json!({"input": "A-1"});
        match &self.session {
            None => {
                self.server
                    .http
                    .post(&self.call_url)
                    .json(&json!({"name": "lookup", "arguments": arguments}))
                    .send()
                    .await?
                    .bytes()
                    .await?;
            }
            Some(session) => {
                let Value::Object(arguments) = arguments else {
                    anyhow::bail!("arguments are an object");
                };
                session
                    .call_tool(CallToolRequestParams::new("lookup").with_arguments(arguments))
                    .await?;
            }
        }
        Ok(())
    }

    async fn round(&self) -> anyhow::Result<()> {
        let bodies = self.bodies.borrow().clone();
        let [asked, answered] = bodies.unwrap_or_else(|| {
            let system = json!({"role": "system", "content": "You help with orders."});
            let user = json!({"role": "user", "content": "Where is A-1?"});
            let tool = json!({"role": "tool", "content": "lookup: {\"input\":\"A-1\"}"});
            let asked = json!({"model": "fake", "stream": false, "messages": [system, user]});
            let answered = json!({"model": "fake", "stream": false,
                                  "messages": [system, user, tool]});
            [asked.to_string().into(), answered.to_string().into()]
        });
        self.model(asked).await?;
        self.tool().await?;
        self.model(answered).await
    }
}
