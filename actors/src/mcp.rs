//! MCP servers as a turn and the API see them: one client interface over two transports
//! ([`http`], the specification's contract; [`streamable`], the Model Context Protocol itself
//! through rmcp), the names tools get when they are offered to the model ([`naming`]), and a
//! cache of each server's tool list so that a turn does not list tools every time.
//!
//! Every request carries the server's configured headers (sealed at rest, opened here, never
//! logged) and the `X-Parley-*` context headers; every request times out and an answer over
//! the size limit is refused. A failing tool never fails a turn: the model gets
//! `{"error": …}` as the result.

mod http;
pub mod naming;
mod streamable;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use parley_persistence::McpTransport;
use parley_persistence::entities::mcp_server;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use serde::Serialize;
use serde_json::Value;
use uuid::Uuid;

use self::streamable::Session;
use crate::domain::SecretBox;
use crate::egress::{Egress, REFUSED};

/// How MCP servers are called; from configuration.
#[derive(Clone, Debug)]
pub struct McpSettings {
    /// Longest wait for one answer (a listing, a call, a session's start).
    pub timeout: Duration,
    /// Largest answer accepted, in bytes.
    pub max_response_bytes: usize,
    /// How long a server's tool list is reused by turns.
    pub tool_cache_ttl: Duration,
}

impl Default for McpSettings {
    fn default() -> Self {
        Self {
            timeout: Duration::from_secs(15),
            max_response_bytes: 1024 * 1024,
            tool_cache_ttl: Duration::from_secs(60),
        }
    }
}

/// A tool an MCP server offers.
#[derive(Clone, Debug, PartialEq, Serialize, utoipa::ToSchema)]
pub struct McpTool {
    /// The server's name for it.
    pub name: String,
    /// What it does.
    pub description: String,
    /// JSON schema of its arguments.
    pub input_schema: Value,
}

/// Why an MCP server did not answer as asked.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum McpError {
    /// It could not be reached, or answered with an error status.
    #[error("the MCP server could not be reached: {0}")]
    Unreachable(String),
    /// It did not answer in time.
    #[error("the MCP server did not answer within {0} ms")]
    Timeout(u64),
    /// Its answer was over the size limit.
    #[error("the MCP server's answer is over the {0}-byte limit")]
    TooLarge(usize),
    /// Its answer could not be understood.
    #[error("the MCP server's answer was malformed: {0}")]
    Malformed(String),
    /// The tool ran and reported a failure.
    #[error("the tool failed: {0}")]
    ToolFailed(String),
    /// The server's stored headers could not be opened.
    #[error("the MCP server's headers could not be opened")]
    Sealed,
}

/// On whose behalf a server is called: sent as `X-Parley-*` headers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct CallContext {
    /// The workspace.
    pub workspace_id: i64,
    /// The assistant using the tools, when there is one.
    pub assistant_id: Option<Uuid>,
    /// The person the turn is for.
    pub identity_id: Option<Uuid>,
    /// The conversation the turn is in.
    pub conversation_id: Option<Uuid>,
}

impl CallContext {
    fn headers(&self) -> Vec<(&'static str, String)> {
        let mut headers = vec![("x-parley-workspace-id", self.workspace_id.to_string())];
        for (name, id) in [
            ("x-parley-assistant-id", self.assistant_id),
            ("x-parley-identity-id", self.identity_id),
            ("x-parley-conversation-id", self.conversation_id),
        ] {
            if let Some(id) = id {
                headers.push((name, id.to_string()));
            }
        }
        headers
    }
}

/// A server ready to be called: where, how, and with which headers.
#[derive(Clone)]
pub(crate) struct Endpoint {
    id: Uuid,
    transport: McpTransport,
    url: String,
    headers: HeaderMap,
}

/// A server's tool list and when it was read.
type Listed = (Instant, Arc<Vec<McpTool>>);

/// A session is per server and calling context (the context travels in its headers).
type SessionKey = (Uuid, CallContext);

/// The MCP client of the whole installation; cheap to share.
pub struct McpHub {
    /// Connects only where the egress policy allows, follows no redirect.
    http: reqwest::Client,
    /// Where tenant URLs may lead.
    egress: Arc<Egress>,
    settings: McpSettings,
    secrets: Arc<SecretBox>,
    /// Each server's tool list and when it was read.
    tools: Mutex<HashMap<Uuid, Listed>>,
    /// Live Model Context Protocol sessions, per server and calling context.
    sessions: Mutex<HashMap<SessionKey, (Instant, Arc<Session>)>>,
}

impl std::fmt::Debug for McpHub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpHub")
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

/// Most sessions kept open; the least recently used is closed beyond it.
const MAX_SESSIONS: usize = 256;

impl McpHub {
    /// A hub calling servers where `egress` allows, under `settings`, opening header values
    /// with `secrets`.
    pub fn new(egress: Arc<Egress>, settings: McpSettings, secrets: Arc<SecretBox>) -> Self {
        Self {
            http: egress.client(settings.timeout),
            egress,
            settings,
            secrets,
            tools: Mutex::new(HashMap::new()),
            sessions: Mutex::new(HashMap::new()),
        }
    }

    /// Where tenant URLs may lead: registration checks a server's URL with it.
    pub fn egress(&self) -> &Egress {
        &self.egress
    }

    /// Seals a header value for storage.
    pub fn seal(&self, value: &str) -> String {
        self.secrets.seal(value)
    }

    /// The server's tools, asked of the server now (the cache is refreshed with them).
    ///
    /// # Errors
    /// Why the server did not list its tools.
    pub async fn list_tools(
        &self,
        server: &mcp_server::Model,
        context: &CallContext,
    ) -> Result<Vec<McpTool>, McpError> {
        let endpoint = self.endpoint(server)?;
        let tools = match endpoint.transport {
            McpTransport::Http => http::list_tools(self, &endpoint, context).await?,
            McpTransport::StreamableHttp => {
                self.with_session(&endpoint, context, true, |session| async move {
                    session.list_tools().await
                })
                .await?
            }
        };
        if let Ok(mut cache) = self.tools.lock() {
            cache.insert(server.id, (Instant::now(), Arc::new(tools.clone())));
        }
        Ok(tools)
    }

    /// The server's tools as a turn sees them: the cached list while it is fresh.
    ///
    /// # Errors
    /// Why the server did not list its tools.
    pub async fn cached_tools(
        &self,
        server: &mcp_server::Model,
        context: &CallContext,
    ) -> Result<Arc<Vec<McpTool>>, McpError> {
        let fresh = self.tools.lock().ok().and_then(|cache| {
            cache
                .get(&server.id)
                .filter(|(at, _)| at.elapsed() < self.settings.tool_cache_ttl)
                .map(|(_, tools)| tools.clone())
        });
        match fresh {
            Some(tools) => Ok(tools),
            None => self.list_tools(server, context).await.map(Arc::new),
        }
    }

    /// Forgets what is known of a server (its tools, its sessions): it changed or went away.
    pub fn forget(&self, server_id: Uuid) {
        if let Ok(mut cache) = self.tools.lock() {
            cache.remove(&server_id);
        }
        if let Ok(mut sessions) = self.sessions.lock() {
            sessions.retain(|(id, _), _| *id != server_id);
        }
    }

    /// Calls `tool` with `arguments`; answers what the model is given as the result.
    ///
    /// # Errors
    /// Why the tool gave no result.
    pub async fn call(
        &self,
        server: &mcp_server::Model,
        context: &CallContext,
        tool: &str,
        arguments: Value,
    ) -> Result<Value, McpError> {
        let endpoint = self.endpoint(server)?;
        match endpoint.transport {
            McpTransport::Http => http::call(self, &endpoint, context, tool, arguments).await,
            McpTransport::StreamableHttp => {
                self.with_session(&endpoint, context, false, |session| {
                    let (tool, arguments) = (tool.to_owned(), arguments.clone());
                    async move { session.call(&tool, arguments).await }
                })
                .await
            }
        }
    }

    fn endpoint(&self, server: &mcp_server::Model) -> Result<Endpoint, McpError> {
        // A literal address is not resolved, so the policy reads it here; a name's addresses
        // are checked when connecting. Refused, it reads like a server that cannot be reached.
        let url = reqwest::Url::parse(&server.url)
            .map_err(|_| McpError::Unreachable(REFUSED.to_owned()))?;
        self.egress
            .check_url(&url)
            .map_err(|_| McpError::Unreachable(REFUSED.to_owned()))?;
        let mut headers = HeaderMap::new();
        for header in server.headers.as_array().into_iter().flatten() {
            let (Some(key), Some(sealed)) = (header["key"].as_str(), header["value"].as_str())
            else {
                continue;
            };
            let value = self.secrets.open(sealed).map_err(|_| McpError::Sealed)?;
            let (Ok(name), Ok(value)) = (
                HeaderName::try_from(key),
                HeaderValue::try_from(value.as_str()),
            ) else {
                continue;
            };
            headers.insert(name, value);
        }
        Ok(Endpoint {
            id: server.id,
            transport: server.transport,
            url: server.url.trim_end_matches('/').to_owned(),
            headers,
        })
    }

    /// Runs `work` on the live session of the endpoint and context, starting one when there
    /// is none. A session the server forgot is started again by rmcp itself; when `idempotent`,
    /// work that failed on a reused session is tried once more on a new one (a tool call is
    /// not: it may have run).
    async fn with_session<T, F, Fut>(
        &self,
        endpoint: &Endpoint,
        context: &CallContext,
        idempotent: bool,
        work: F,
    ) -> Result<T, McpError>
    where
        F: Fn(Arc<Session>) -> Fut,
        Fut: Future<Output = Result<T, McpError>>,
    {
        let key = (endpoint.id, *context);
        let attempts = if idempotent { 2 } else { 1 };
        for attempt in 0..attempts {
            let session = match self.live_session(&key) {
                Some(session) => session,
                None => {
                    let started = Arc::new(Session::start(self, endpoint, context).await?);
                    self.keep_session(key, started.clone());
                    started
                }
            };
            match work(session).await {
                Err(McpError::Unreachable(reason)) if attempt + 1 < attempts => {
                    tracing::debug!(%reason, "MCP session lost; starting a new one");
                    if let Ok(mut sessions) = self.sessions.lock() {
                        sessions.remove(&key);
                    }
                }
                outcome => return outcome,
            }
        }
        Err(McpError::Unreachable(
            "the session could not be re-established".to_owned(),
        ))
    }

    fn live_session(&self, key: &SessionKey) -> Option<Arc<Session>> {
        let mut sessions = self.sessions.lock().ok()?;
        let (used, session) = sessions.get_mut(key)?;
        if session.is_closed() {
            sessions.remove(key);
            return None;
        }
        *used = Instant::now();
        Some(session.clone())
    }

    fn keep_session(&self, key: SessionKey, session: Arc<Session>) {
        let Ok(mut sessions) = self.sessions.lock() else {
            return;
        };
        if sessions.len() >= MAX_SESSIONS
            && let Some(oldest) = sessions
                .iter()
                .min_by_key(|(_, (used, _))| *used)
                .map(|(k, _)| *k)
        {
            sessions.remove(&oldest);
        }
        sessions.insert(key, (Instant::now(), session));
    }

    fn timeout_ms(&self) -> u64 {
        u64::try_from(self.settings.timeout.as_millis()).unwrap_or(u64::MAX)
    }
}

/// What a tool answered, as the model reads it: `content` or `result` unwrapped when present.
pub(crate) fn unwrap_result(answer: Value) -> Value {
    match answer {
        Value::Object(mut map) => {
            for key in ["content", "result"] {
                if let Some(inner) = map.remove(key) {
                    return inner;
                }
            }
            Value::Object(map)
        }
        other => other,
    }
}
