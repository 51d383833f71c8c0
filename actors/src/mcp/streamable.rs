//! The Model Context Protocol over Streamable HTTP, through rmcp's client. A session starts
//! with the stateless 2026-07-28 revision's `server/discover` and falls back to the 2025-11-25
//! `initialize` handshake (`ClientLifecycleMode::Auto`); it is reused across calls, and rmcp
//! starts it again when the server forgets it. Requests go through Parley's own reqwest client
//! (so our TLS set-up holds) with the configured and `X-Parley-*` headers.

use std::collections::HashMap;

use reqwest::header::{HeaderName, HeaderValue};
use rmcp::model::{
    CallToolRequestParams, ClientCapabilities, ClientConfig, Implementation, ProtocolVersion,
};
use rmcp::service::ClientInitializeError;
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientLifecycleMode, ClientServiceExt};
use serde_json::{Map, Value};

use super::{CallContext, Endpoint, McpError, McpHub, McpTool};

/// A live session with one server, for one calling context.
pub(crate) struct Session {
    client: RunningService<RoleClient, ClientConfig>,
    timeout: std::time::Duration,
    timeout_ms: u64,
    max_bytes: usize,
}

impl Session {
    /// Connects to the endpoint: the stateless revision first (falling back to the
    /// handshake when the server does not know `server/discover`), and the handshake alone
    /// when the server knows discovery but none of the stateless revisions.
    pub(super) async fn start(
        hub: &McpHub,
        endpoint: &Endpoint,
        context: &CallContext,
    ) -> Result<Self, McpError> {
        let auto = ClientLifecycleMode::Auto {
            preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            legacy_version: Some(ProtocolVersion::V_2025_11_25),
        };
        let client = match connect(hub, endpoint, context, auto).await {
            Err(ConnectError::Refused(error))
                if matches!(
                    *error,
                    ClientInitializeError::NoCompatibleProtocolVersion { .. }
                ) =>
            {
                connect(hub, endpoint, context, ClientLifecycleMode::Initialize).await
            }
            other => other,
        }
        .map_err(|error| match error {
            ConnectError::Timeout => McpError::Timeout(hub.timeout_ms()),
            ConnectError::Refused(error) => McpError::Unreachable(describe(&error)),
        })?;
        Ok(Self {
            client,
            timeout: hub.settings.timeout,
            timeout_ms: hub.timeout_ms(),
            max_bytes: hub.settings.max_response_bytes,
        })
    }

    /// Whether the session ended (its transport closed): it is not reused.
    pub(super) fn is_closed(&self) -> bool {
        self.client.is_closed()
    }

    /// Every tool of the server.
    pub(super) async fn list_tools(&self) -> Result<Vec<McpTool>, McpError> {
        let tools = tokio::time::timeout(self.timeout, self.client.list_all_tools())
            .await
            .map_err(|_| McpError::Timeout(self.timeout_ms))?
            .map_err(|e| service_error(&e.to_string(), self.max_bytes))?;
        Ok(tools
            .into_iter()
            .map(|tool| McpTool {
                name: tool.name.to_string(),
                description: tool.description.map(|d| d.to_string()).unwrap_or_default(),
                input_schema: Value::Object((*tool.input_schema).clone()),
            })
            .collect())
    }

    /// Calls one tool; its text content is the result, and a result marked as an error is
    /// a [`McpError::ToolFailed`].
    pub(super) async fn call(&self, tool: &str, arguments: Value) -> Result<Value, McpError> {
        let arguments: Map<String, Value> = match arguments {
            Value::Object(map) => map,
            Value::Null => Map::new(),
            other => {
                return Err(McpError::ToolFailed(format!(
                    "arguments must be an object, not {other}"
                )));
            }
        };
        let params = CallToolRequestParams::new(tool.to_owned()).with_arguments(arguments);
        let result = tokio::time::timeout(self.timeout, self.client.call_tool(params))
            .await
            .map_err(|_| McpError::Timeout(self.timeout_ms))?
            .map_err(|e| service_error(&e.to_string(), self.max_bytes))?;
        let answer =
            serde_json::to_value(&result).map_err(|e| McpError::Malformed(e.to_string()))?;
        if answer.to_string().len() > self.max_bytes {
            return Err(McpError::TooLarge(self.max_bytes));
        }
        let texts: Vec<&str> = answer["content"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|block| block["text"].as_str())
            .collect();
        let text = texts.join("\n");
        if answer["isError"].as_bool() == Some(true) {
            return Err(McpError::ToolFailed(text));
        }
        match answer.get("structuredContent") {
            Some(structured) if texts.is_empty() => Ok(structured.clone()),
            _ => Ok(Value::String(text)),
        }
    }
}

enum ConnectError {
    Timeout,
    Refused(Box<ClientInitializeError>),
}

/// One attempt at starting a session in `lifecycle`, on a transport of its own.
async fn connect(
    hub: &McpHub,
    endpoint: &Endpoint,
    context: &CallContext,
    lifecycle: ClientLifecycleMode,
) -> Result<RunningService<RoleClient, ClientConfig>, ConnectError> {
    let mut headers: HashMap<HeaderName, HeaderValue> = endpoint
        .headers
        .iter()
        .map(|(name, value)| (name.clone(), value.clone()))
        .collect();
    for (name, value) in context.headers() {
        if let Ok(value) = HeaderValue::try_from(value) {
            headers.insert(HeaderName::from_static(name), value);
        }
    }
    let mut config =
        StreamableHttpClientTransportConfig::with_uri(endpoint.url.clone()).custom_headers(headers);
    config.max_json_response_size = hub.settings.max_response_bytes;
    config.max_sse_event_size = hub.settings.max_response_bytes;
    config.reinit_on_expired_session = true;
    let transport = StreamableHttpClientTransport::with_client(hub.http.clone(), config);
    let info = ClientConfig::new(
        ClientCapabilities::default(),
        Implementation::new("parley", env!("CARGO_PKG_VERSION")),
    )
    .with_protocol_version(ProtocolVersion::V_2025_11_25);
    tokio::time::timeout(
        hub.settings.timeout,
        info.serve_with_lifecycle(transport, lifecycle),
    )
    .await
    .map_err(|_| ConnectError::Timeout)?
    .map_err(|error| ConnectError::Refused(Box::new(error)))
}

/// rmcp's start-up error with its cause (a failed fallback says why).
fn describe(error: &ClientInitializeError) -> String {
    match error {
        ClientInitializeError::LegacyFallbackFailed { discover, fallback } => {
            format!("{} (after: {})", describe(fallback), describe(discover))
        }
        other => other.to_string(),
    }
}

/// rmcp's error, sorted: an over-size answer, else an unreachable server.
fn service_error(message: &str, max_bytes: usize) -> McpError {
    let lower = message.to_lowercase();
    if lower.contains("too large") || lower.contains("exceed") || lower.contains("limit") {
        McpError::TooLarge(max_bytes)
    } else {
        McpError::Unreachable(message.to_owned())
    }
}
