//! Fake MCP servers: the specification's `http` contract (`GET {url}/tools`,
//! `POST {url}/call`) and the Model Context Protocol itself over Streamable HTTP, served by
//! rmcp's own server in the stateless 2026-07-28 revision or the 2025-11-25 session one.
//!
//! Both serve the same scripted tools at `{url}` = `http://127.0.0.1:<port>/mcp`, record
//! every request's headers (and JSON-RPC method) and every tool call, and can fail, hang or
//! answer oversized results on demand.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};

use axum::Json;
use axum::Router;
use axum::body::{Body, to_bytes};
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::serve::ListenerExt;
use rmcp::ServerHandler;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, DiscoverResult,
    ErrorCode, ErrorData, ListToolsResult, PaginatedRequestParams, ProtocolVersion,
    ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::{MaybeSendFuture, RequestContext, RoleServer};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use serde_json::{Map, Value, json};
use tokio::sync::oneshot;

/// What a tool does when it is called.
#[derive(Clone, Debug, PartialEq)]
pub enum ToolBehaviour {
    /// Answers `<tool>: <arguments as JSON>`.
    Echo,
    /// Answers this text.
    Answer(String),
    /// Reports a failure with this text (`isError`, or a 500 on the `http` contract).
    Fail(String),
    /// Never answers.
    Hang,
    /// Answers a text of this many bytes.
    Oversized(usize),
}

/// Which protocol the fake speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum McpFlavour {
    /// The specification's `GET /tools` and `POST /call`.
    Http,
    /// Streamable HTTP, 2026-07-28 revision only (no sessions).
    Stateless,
    /// Streamable HTTP, up to the 2025-11-25 revision (an `initialize` handshake and
    /// `Mcp-Session-Id`), answering `server/discover` with those revisions as rmcp's server
    /// does.
    Session,
    /// Like [`McpFlavour::Session`], from before `server/discover` existed: it answers
    /// "method not found".
    Legacy,
}

/// One request the fake received.
#[derive(Clone, Debug)]
pub struct McpRequest {
    /// HTTP method and path, e.g. `POST /mcp`.
    pub line: String,
    /// The JSON-RPC method, for Streamable HTTP requests.
    pub rpc_method: Option<String>,
    /// Every header, names lower-cased.
    pub headers: BTreeMap<String, String>,
}

impl McpRequest {
    /// The value of header `name` (lower case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).map(String::as_str)
    }
}

#[derive(Debug, Default)]
struct Script {
    tools: BTreeMap<String, (String, ToolBehaviour)>,
    fail_listing: bool,
    requests: Vec<McpRequest>,
    calls: Vec<(String, Value)>,
}

#[derive(Debug, Default)]
struct Shared {
    script: Mutex<Script>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Script> {
        self.script
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn listed(&self) -> Option<Vec<(String, String)>> {
        let script = self.lock();
        (!script.fail_listing).then(|| {
            script
                .tools
                .iter()
                .map(|(name, (description, _))| (name.clone(), description.clone()))
                .collect()
        })
    }

    /// Records the call and answers what the tool does; `None` when there is no such tool.
    fn called(&self, name: &str, arguments: Value) -> Option<ToolBehaviour> {
        let mut script = self.lock();
        script.calls.push((name.to_owned(), arguments));
        script
            .tools
            .get(name)
            .map(|(_, behaviour)| behaviour.clone())
    }
}

/// The schema every fake tool takes: an optional free-text `input`.
fn input_schema() -> Map<String, Value> {
    let Value::Object(schema) = json!({
        "type": "object",
        "properties": {"input": {"type": "string", "description": "anything"}},
    }) else {
        unreachable!("a literal object")
    };
    schema
}

/// A running fake MCP server; stops when dropped.
#[derive(Debug)]
pub struct FakeMcp {
    addr: SocketAddr,
    flavour: McpFlavour,
    shared: Arc<Shared>,
    sessions: Option<Arc<LocalSessionManager>>,
    _shutdown: oneshot::Sender<()>,
}

impl FakeMcp {
    /// Starts a server of `flavour` on a free loopback port, with no tools.
    ///
    /// # Panics
    /// When no loopback port can be bound.
    pub async fn start(flavour: McpFlavour) -> Self {
        let shared = Arc::new(Shared::default());
        let (app, sessions) = match flavour {
            McpFlavour::Http => (
                Router::new()
                    .route("/mcp/tools", get(http_tools))
                    .route("/mcp/call", post(http_call))
                    .with_state(shared.clone()),
                None,
            ),
            McpFlavour::Stateless | McpFlavour::Session | McpFlavour::Legacy => {
                let stateless = flavour == McpFlavour::Stateless;
                let sessions = Arc::new(LocalSessionManager::default());
                let handler = FakeHandler {
                    shared: shared.clone(),
                    versions: if stateless {
                        &[ProtocolVersion::V_2026_07_28]
                    } else {
                        ProtocolVersion::known_up_to(&ProtocolVersion::V_2025_11_25)
                    },
                    knows_discovery: flavour != McpFlavour::Legacy,
                };
                let service = StreamableHttpService::new(
                    move || Ok(handler.clone()),
                    sessions.clone(),
                    StreamableHttpServerConfig::default()
                        .with_legacy_session_mode(!stateless)
                        .with_json_response(stateless),
                );
                (Router::new().nest_service("/mcp", service), Some(sessions))
            }
        };
        let app = app.layer(middleware::from_fn_with_state(shared.clone(), record));
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
            flavour,
            shared,
            sessions,
            _shutdown: tx,
        }
    }

    /// The URL to register (`http://127.0.0.1:<port>/mcp`).
    pub fn url(&self) -> String {
        format!("http://{}/mcp", self.addr)
    }

    /// The transport name Parley knows this flavour by.
    pub fn transport(&self) -> &'static str {
        match self.flavour {
            McpFlavour::Http => "http",
            McpFlavour::Stateless | McpFlavour::Session | McpFlavour::Legacy => "streamable-http",
        }
    }

    /// Adds (or replaces) a tool that echoes its arguments.
    pub fn tool(&self, name: &str, description: &str) -> &Self {
        self.shared.lock().tools.insert(
            name.to_owned(),
            (description.to_owned(), ToolBehaviour::Echo),
        );
        self
    }

    /// Changes what tool `name` does (adding it when it is missing).
    pub fn behave(&self, name: &str, behaviour: ToolBehaviour) -> &Self {
        self.shared
            .lock()
            .tools
            .entry(name.to_owned())
            .or_insert_with(|| (format!("the {name} tool"), ToolBehaviour::Echo))
            .1 = behaviour;
        self
    }

    /// Removes tool `name`.
    pub fn remove_tool(&self, name: &str) {
        self.shared.lock().tools.remove(name);
    }

    /// Makes listing tools fail (or work again).
    pub fn fail_listing(&self, fail: bool) {
        self.shared.lock().fail_listing = fail;
    }

    /// Every request received so far.
    pub fn requests(&self) -> Vec<McpRequest> {
        self.shared.lock().requests.clone()
    }

    /// Every tool call received so far: name and arguments.
    pub fn calls(&self) -> Vec<(String, Value)> {
        self.shared.lock().calls.clone()
    }

    /// Forgets every session, as a restarted server would; clients holding one get 404.
    pub async fn forget_sessions(&self) {
        if let Some(sessions) = &self.sessions {
            sessions.sessions.write().await.clear();
        }
    }
}

/// Records the request's headers and JSON-RPC method, then serves it.
async fn record(State(shared): State<Arc<Shared>>, request: Request, next: Next) -> Response {
    let (parts, body) = request.into_parts();
    let Ok(bytes) = to_bytes(body, 4 * 1024 * 1024).await else {
        return StatusCode::PAYLOAD_TOO_LARGE.into_response();
    };
    let rpc_method = serde_json::from_slice::<Value>(&bytes)
        .ok()
        .and_then(|body| body["method"].as_str().map(str::to_owned));
    let headers = parts
        .headers
        .iter()
        .map(|(name, value)| {
            (
                name.as_str().to_owned(),
                String::from_utf8_lossy(value.as_bytes()).into_owned(),
            )
        })
        .collect();
    shared.lock().requests.push(McpRequest {
        line: format!("{} {}", parts.method, parts.uri.path()),
        rpc_method,
        headers,
    });
    next.run(Request::from_parts(parts, Body::from(bytes)))
        .await
}

async fn http_tools(State(shared): State<Arc<Shared>>) -> Response {
    let Some(tools) = shared.listed() else {
        return (
            StatusCode::INTERNAL_SERVER_ERROR,
            Json(json!({"error": "listing is broken"})),
        )
            .into_response();
    };
    let tools: Vec<Value> = tools
        .into_iter()
        .map(|(name, description)| {
            json!({"name": name, "description": description, "input_schema": input_schema()})
        })
        .collect();
    Json(json!({ "tools": tools })).into_response()
}

async fn http_call(State(shared): State<Arc<Shared>>, Json(body): Json<Value>) -> Response {
    let name = body["name"].as_str().unwrap_or_default().to_owned();
    let arguments = body["arguments"].clone();
    match shared.called(&name, arguments.clone()) {
        None => (
            StatusCode::NOT_FOUND,
            Json(json!({"error": format!("no tool named {name}")})),
        )
            .into_response(),
        Some(ToolBehaviour::Echo) => {
            Json(json!({"result": echo(&name, &arguments)})).into_response()
        }
        Some(ToolBehaviour::Answer(text)) => Json(json!({ "result": text })).into_response(),
        Some(ToolBehaviour::Fail(text)) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            Json(json!({ "error": text })),
        )
            .into_response(),
        Some(ToolBehaviour::Hang) => std::future::pending().await,
        Some(ToolBehaviour::Oversized(bytes)) => {
            Json(json!({"result": "x".repeat(bytes)})).into_response()
        }
    }
}

fn echo(name: &str, arguments: &Value) -> String {
    format!("{name}: {arguments}")
}

/// The rmcp server handler over the shared script.
#[derive(Clone)]
struct FakeHandler {
    shared: Arc<Shared>,
    versions: &'static [ProtocolVersion],
    knows_discovery: bool,
}

impl ServerHandler for FakeHandler {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        Cow::Borrowed(self.versions)
    }

    fn discover(
        &self,
        context: RequestContext<RoleServer>,
    ) -> impl Future<Output = Result<DiscoverResult, ErrorData>> + MaybeSendFuture + '_ {
        let _ = context;
        std::future::ready(if self.knows_discovery {
            Ok(DiscoverResult::from_server_info(
                self.versions.to_vec(),
                self.get_info(),
            ))
        } else {
            Err(ErrorData::new(
                ErrorCode::METHOD_NOT_FOUND,
                "Method not found",
                None,
            ))
        })
    }

    fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> impl Future<Output = Result<ListToolsResult, ErrorData>> + MaybeSendFuture + '_ {
        let answer = match self.shared.listed() {
            None => Err(ErrorData::internal_error("listing is broken", None)),
            Some(tools) => Ok(ListToolsResult::with_all_items(
                tools
                    .into_iter()
                    .map(|(name, description)| Tool::new(name, description, input_schema()))
                    .collect(),
            )),
        };
        std::future::ready(answer)
    }

    fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> impl Future<Output = Result<CallToolResponse, ErrorData>> + MaybeSendFuture + '_ {
        let name = request.name.to_string();
        let arguments = Value::Object(request.arguments.unwrap_or_default());
        let behaviour = self.shared.called(&name, arguments.clone());
        async move {
            let text = |text: String| vec![ContentBlock::text(text)];
            let result = match behaviour {
                None => {
                    return Err(ErrorData::invalid_params(
                        format!("no tool named {name}"),
                        None,
                    ));
                }
                Some(ToolBehaviour::Echo) => CallToolResult::success(text(echo(&name, &arguments))),
                Some(ToolBehaviour::Answer(answer)) => CallToolResult::success(text(answer)),
                Some(ToolBehaviour::Fail(failure)) => CallToolResult::error(text(failure)),
                Some(ToolBehaviour::Hang) => std::future::pending().await,
                Some(ToolBehaviour::Oversized(bytes)) => {
                    CallToolResult::success(text("x".repeat(bytes)))
                }
            };
            Ok(result.into())
        }
    }
}
