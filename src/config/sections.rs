//! The sections of [`super::Settings`], each with its defaults.

use std::net::SocketAddr;

use serde::{Deserialize, Serialize};

use super::LogFormat;

/// A secret value: shown as `<redacted>` in debug output and never logged.
#[derive(Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Secret(pub String);

impl Secret {
    /// The secret itself.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("<redacted>")
    }
}

impl From<&str> for Secret {
    fn from(value: &str) -> Self {
        Self(value.to_owned())
    }
}

/// `[server]`: the HTTP front door.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(default)]
pub struct ServerSettings {
    /// Address the HTTP server binds; port 0 picks a free port.
    pub bind: SocketAddr,
    /// Public base URL of this service, used to register webhooks with Meta.
    pub public_url: Option<String>,
    /// Largest accepted request body, in bytes.
    pub body_limit_bytes: usize,
    /// Longest time a plain request may take to produce its response head, in seconds.
    pub request_timeout_secs: u64,
    /// Longest a template send endpoint waits for Meta, in seconds (504 after; the send goes
    /// on and its outcome is recorded).
    pub send_timeout_secs: u64,
    /// Longest wait for in-flight requests and actors at shutdown, in seconds.
    pub shutdown_timeout_secs: u64,
    /// Longest wait for a request's headers to arrive in full, in seconds (the connection is
    /// closed after).
    pub header_read_timeout_secs: u64,
    /// Longest a keep-alive connection may stay without a request, in seconds.
    pub idle_timeout_secs: u64,
    /// Most connections open at once; further clients wait in the listen backlog.
    pub max_connections: usize,
    /// Most connections one client address may hold open (0: no limit). Behind a proxy every
    /// client shares its address: raise it, or set 0 and let the proxy bound its clients.
    pub max_connections_per_address: usize,
    /// Most connections of one address that have not sent a whole request yet (0: no limit).
    pub max_unfinished_per_address: usize,
    /// Largest free-form value (metadata, settings, a description object), in bytes as JSON;
    /// one per process.
    pub max_field_bytes: usize,
    /// The operator's token: `GET /admin/actors` with it shows the whole installation's
    /// actor tree (a workspace admin key shows its own workspace's).
    pub operator_token: Option<Secret>,
    /// Failed authentications a client address may make per minute before it gets 429s
    /// (0: no limit). Valid keys are never counted.
    pub auth_failures_per_minute: u32,
    /// `GET /metrics` without a key (for a private scrape network); otherwise it needs a
    /// workspace admin key or the operator token.
    pub metrics_public: bool,
    /// How long an operator console session lasts without a request, in seconds.
    pub console_session_idle_secs: u64,
    /// How long an operator console session lasts at most, in seconds, however busy.
    pub console_session_max_secs: u64,
}

impl Default for ServerSettings {
    fn default() -> Self {
        Self {
            bind: SocketAddr::from(([127, 0, 0, 1], 8080)),
            public_url: None,
            body_limit_bytes: 1024 * 1024,
            request_timeout_secs: 30,
            send_timeout_secs: 60,
            shutdown_timeout_secs: 10,
            header_read_timeout_secs: 10,
            idle_timeout_secs: 60,
            max_connections: 8192,
            max_connections_per_address: 512,
            max_unfinished_per_address: 64,
            max_field_bytes: parley_actors::domain::FREE_FORM_LIMIT,
            operator_token: None,
            auth_failures_per_minute: 60,
            metrics_public: false,
            console_session_idle_secs: 60 * 60,
            console_session_max_secs: 12 * 60 * 60,
        }
    }
}

/// `[database]`.
#[derive(Clone, Serialize, Deserialize)]
#[serde(default)]
pub struct DatabaseSettings {
    /// `sqlite://…` or `postgres://…`; defaults to `parley.db` in [`Settings::data_dir`].
    pub url: Option<String>,
    /// SQLite only: how often the write-ahead log is copied into the database file, in
    /// milliseconds (on a connection of its own; commits never checkpoint).
    pub sqlite_checkpoint_ms: u64,
}

impl Default for DatabaseSettings {
    fn default() -> Self {
        Self {
            url: None,
            sqlite_checkpoint_ms: 100,
        }
    }
}

// The URL's password stays out of logs and panic messages.
impl std::fmt::Debug for DatabaseSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DatabaseSettings")
            .field("url", &self.url.as_deref().map(redact_url))
            .field("sqlite_checkpoint_ms", &self.sqlite_checkpoint_ms)
            .finish()
    }
}

/// `[log]`.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(default)]
pub struct LogSettings {
    /// `tracing` filter, e.g. `info,parley=debug`.
    pub filter: String,
    /// Output format.
    pub format: LogFormat,
}

impl Default for LogSettings {
    fn default() -> Self {
        Self {
            filter: "info".to_owned(),
            format: LogFormat::Pretty,
        }
    }
}

/// `[llm]`: the OpenAI-compatible model endpoint.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(default)]
pub struct LlmSettings {
    /// Base URL (`{url}/chat/completions`).
    pub base_url: Option<String>,
    /// Key for the endpoint.
    pub api_key: Option<Secret>,
    /// Default model name.
    pub model: Option<String>,
    /// Longest wait for an answer, or for the next streamed chunk, in seconds.
    pub timeout_secs: u64,
    /// Further attempts after a 429, 5xx, connection error or timeout.
    pub max_retries: u32,
    /// First retry delay in milliseconds; doubles per attempt.
    pub retry_backoff_ms: u64,
    /// Most model calls with tool use in one turn.
    pub max_tool_rounds: u32,
    /// `PARLEY_LLM_TRANSCRIPTION_MODEL`: the model that transcribes voice notes and audio
    /// (`{url}/audio/transcriptions`), for assistants with `settings.transcribe`.
    pub transcription_model: String,
}

impl Default for LlmSettings {
    fn default() -> Self {
        Self {
            base_url: None,
            api_key: None,
            model: None,
            timeout_secs: 60,
            max_retries: 2,
            retry_backoff_ms: 500,
            max_tool_rounds: 8,
            transcription_model: "whisper-1".to_owned(),
        }
    }
}

/// `[whatsapp]`: Meta's Graph API and the pace of each number.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(default)]
pub struct WhatsAppSettings {
    /// Graph API base URL including its version.
    pub graph_url: String,
    /// App secret that signs Meta's webhooks.
    pub app_secret: Option<Secret>,
    /// Development only: accept webhooks without a signature.
    pub allow_unsigned: bool,
    /// Messages per second per number.
    pub rate_per_sec: u32,
    /// Messages a recipient may get in a burst before spacing applies.
    pub pair_burst: u32,
    /// Spacing between messages to one recipient after a burst, in milliseconds.
    pub pair_period_ms: u64,
    /// Retries of a send after 130429, 131056, 5xx or a connection error.
    pub max_retries: u32,
    /// First retry delay of a send, in milliseconds; doubles per attempt.
    pub retry_backoff_ms: u64,
    /// Longest wait for a Graph API answer, in seconds.
    pub timeout_secs: u64,
}

impl Default for WhatsAppSettings {
    fn default() -> Self {
        Self {
            graph_url: "https://graph.facebook.com/v23.0".to_owned(),
            app_secret: None,
            allow_unsigned: false,
            rate_per_sec: 80,
            pair_burst: 5,
            pair_period_ms: 6000,
            max_retries: 3,
            retry_backoff_ms: 1000,
            timeout_secs: 30,
        }
    }
}

/// `[mcp]`: calling MCP servers.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(default)]
pub struct McpConfig {
    /// Longest wait for an MCP server's answer, in seconds.
    pub timeout_secs: u64,
    /// Largest answer accepted from an MCP server, in bytes.
    pub max_response_bytes: usize,
    /// How long turns reuse a server's tool list, in seconds.
    pub tool_cache_secs: u64,
}

impl Default for McpConfig {
    fn default() -> Self {
        Self {
            timeout_secs: 15,
            max_response_bytes: 1024 * 1024,
            tool_cache_secs: 60,
        }
    }
}

/// `[egress]`: where URLs tenants give (MCP servers) may lead (DESIGN §11).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct EgressConfig {
    /// Exceptions to the policy that keeps tenant URLs out of the machine and its network:
    /// comma-separated addresses or networks (`10.0.0.0/8`) and `host:port` pairs.
    pub allow: String,
}

impl EgressConfig {
    /// The policy this allows.
    ///
    /// # Errors
    /// An entry that is neither an address, a network nor `host:port`.
    pub fn policy(
        &self,
    ) -> Result<parley_actors::egress::Egress, parley_actors::egress::BadAllowEntry> {
        parley_actors::egress::Egress::parse(&self.allow)
    }
}

impl WhatsAppSettings {
    /// The app secret that verifies webhook signatures; an empty one counts as none (an empty
    /// HMAC key would let anyone sign).
    pub fn webhook_secret(&self) -> Option<&str> {
        self.app_secret
            .as_ref()
            .map(Secret::expose)
            .filter(|s| !s.trim().is_empty())
    }
}

/// Drops the password from a database URL.
fn redact_url(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            let credentials = &url[scheme + 3..at];
            let user = credentials.split(':').next().unwrap_or_default();
            format!("{}{user}:<redacted>{}", &url[..scheme + 3], &url[at..])
        }
        _ => url.to_owned(),
    }
}
