//! Configuration: defaults, then `parley.toml` (optional), then `PARLEY_*` environment
//! variables, then command-line flags; each layer overrides the one before.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use figment::Figment;
use figment::providers::{Env, Format, Serialized, Toml};
use serde::{Deserialize, Serialize};

/// Log output format.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// Human-readable, for a terminal.
    #[default]
    Pretty,
    /// One JSON object per line, for log collectors.
    Json,
}

/// Everything Parley reads at start-up.
#[derive(Clone, Serialize, Deserialize)]
pub struct Settings {
    /// Address the HTTP server binds; port 0 picks a free port.
    pub bind: SocketAddr,
    /// `sqlite://…` or `postgres://…`; defaults to `parley.db` in [`Settings::data_dir`].
    pub database_url: Option<String>,
    /// Where the embedded database and generated key files live.
    pub data_dir: PathBuf,
    /// Public base URL of this service, used to register webhooks with Meta.
    pub public_url: Option<String>,
    /// `tracing` filter, e.g. `info,parley=debug`.
    pub log: String,
    /// Log output format.
    pub log_format: LogFormat,
    /// Largest accepted request body, in bytes.
    pub body_limit_bytes: usize,
    /// Longest time a request may take to produce its response head, in seconds.
    pub request_timeout_secs: u64,
    /// Longest wait for in-flight requests and actors at shutdown, in seconds.
    pub shutdown_timeout_secs: u64,
    /// Base URL of the OpenAI-compatible model endpoint (`{url}/chat/completions`).
    pub llm_base_url: Option<String>,
    /// Key for the model endpoint.
    pub llm_api_key: Option<String>,
    /// Default model name.
    pub llm_model: Option<String>,
    /// Longest wait for the model's answer, or for its next streamed chunk, in seconds.
    pub llm_timeout_secs: u64,
    /// Further attempts after a 429, 5xx, connection error or timeout.
    pub llm_max_retries: u32,
    /// First retry delay in milliseconds; doubles per attempt.
    pub llm_retry_backoff_ms: u64,
    /// Most model calls with tool use in one turn.
    pub llm_max_tool_rounds: u32,
    /// Hours without messages after which the next message starts a new conversation.
    pub conversation_idle_hours: u64,
    /// Seconds without turns after which an identity's conversation actor stops.
    pub conversation_actor_idle_secs: u64,
    /// Longest an API chat call waits for its turn, in seconds.
    pub turn_timeout_secs: u64,
    /// Meta Graph API base URL including its version.
    pub whatsapp_graph_url: String,
    /// App secret that signs Meta's webhooks.
    pub whatsapp_app_secret: Option<String>,
    /// Development only: accept webhooks without a signature.
    pub whatsapp_allow_unsigned: bool,
    /// Messages per second per number.
    pub whatsapp_rate_per_sec: u32,
    /// Messages a recipient may get in a burst before spacing applies.
    pub whatsapp_pair_burst: u32,
    /// Spacing between messages to one recipient after a burst, in milliseconds.
    pub whatsapp_pair_period_ms: u64,
    /// Retries of a send after 130429, 131056, 5xx or a connection error.
    pub whatsapp_max_retries: u32,
    /// First retry delay of a send, in milliseconds; doubles per attempt.
    pub whatsapp_retry_backoff_ms: u64,
    /// Longest wait for a Graph API answer, in seconds.
    pub whatsapp_timeout_secs: u64,
    /// Key (base64 of 32 bytes) encrypting secrets at rest; default: `secret.key` in
    /// [`Settings::data_dir`], generated on first start.
    pub secret_key: Option<String>,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            bind: SocketAddr::from(([127, 0, 0, 1], 8080)),
            database_url: None,
            data_dir: PathBuf::from("data"),
            public_url: None,
            log: "info".to_owned(),
            log_format: LogFormat::Pretty,
            body_limit_bytes: 1024 * 1024,
            request_timeout_secs: 30,
            shutdown_timeout_secs: 10,
            llm_base_url: None,
            llm_api_key: None,
            llm_model: None,
            llm_timeout_secs: 60,
            llm_max_retries: 2,
            llm_retry_backoff_ms: 500,
            llm_max_tool_rounds: 8,
            conversation_idle_hours: 24,
            conversation_actor_idle_secs: 600,
            turn_timeout_secs: 300,
            whatsapp_graph_url: "https://graph.facebook.com/v23.0".to_owned(),
            whatsapp_app_secret: None,
            whatsapp_allow_unsigned: false,
            whatsapp_rate_per_sec: 80,
            whatsapp_pair_burst: 5,
            whatsapp_pair_period_ms: 6000,
            whatsapp_max_retries: 3,
            whatsapp_retry_backoff_ms: 1000,
            whatsapp_timeout_secs: 30,
            secret_key: None,
        }
    }
}

// Secrets stay out of logs and panic messages.
impl std::fmt::Debug for Settings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let redact = |v: &Option<String>| v.as_ref().map(|_| "<redacted>");
        f.debug_struct("Settings")
            .field("bind", &self.bind)
            .field(
                "database_url",
                &self.database_url.as_ref().map(|u| redact_url(u)),
            )
            .field("data_dir", &self.data_dir)
            .field("public_url", &self.public_url)
            .field("log", &self.log)
            .field("log_format", &self.log_format)
            .field("body_limit_bytes", &self.body_limit_bytes)
            .field("request_timeout_secs", &self.request_timeout_secs)
            .field("shutdown_timeout_secs", &self.shutdown_timeout_secs)
            .field("llm_base_url", &self.llm_base_url)
            .field("llm_api_key", &redact(&self.llm_api_key))
            .field("llm_model", &self.llm_model)
            .field("llm_timeout_secs", &self.llm_timeout_secs)
            .field("llm_max_retries", &self.llm_max_retries)
            .field("llm_retry_backoff_ms", &self.llm_retry_backoff_ms)
            .field("llm_max_tool_rounds", &self.llm_max_tool_rounds)
            .field("conversation_idle_hours", &self.conversation_idle_hours)
            .field(
                "conversation_actor_idle_secs",
                &self.conversation_actor_idle_secs,
            )
            .field("turn_timeout_secs", &self.turn_timeout_secs)
            .field("whatsapp_graph_url", &self.whatsapp_graph_url)
            .field("whatsapp_app_secret", &redact(&self.whatsapp_app_secret))
            .field("whatsapp_allow_unsigned", &self.whatsapp_allow_unsigned)
            .field("whatsapp_rate_per_sec", &self.whatsapp_rate_per_sec)
            .field("whatsapp_pair_burst", &self.whatsapp_pair_burst)
            .field("whatsapp_pair_period_ms", &self.whatsapp_pair_period_ms)
            .field("whatsapp_max_retries", &self.whatsapp_max_retries)
            .field("whatsapp_retry_backoff_ms", &self.whatsapp_retry_backoff_ms)
            .field("whatsapp_timeout_secs", &self.whatsapp_timeout_secs)
            .field("secret_key", &redact(&self.secret_key))
            .finish()
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

/// Values given on the command line; `None` leaves the lower layers' value.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Overrides {
    /// `--bind`
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bind: Option<SocketAddr>,
    /// `--database-url`
    #[serde(skip_serializing_if = "Option::is_none")]
    pub database_url: Option<String>,
    /// `--data-dir`
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data_dir: Option<PathBuf>,
    /// `--log-format`
    #[serde(skip_serializing_if = "Option::is_none")]
    pub log_format: Option<LogFormat>,
}

impl Settings {
    /// Loads the layers. `config_file` defaults to `parley.toml` in the working directory and
    /// may be absent.
    ///
    /// # Errors
    /// Fails when a layer holds a value of the wrong type (the message names the key).
    pub fn load(
        config_file: Option<&Path>,
        overrides: &Overrides,
    ) -> Result<Self, Box<figment::Error>> {
        let file = config_file.unwrap_or(Path::new("parley.toml"));
        Self::figment(file, overrides).extract().map_err(Box::new)
    }

    fn figment(file: &Path, overrides: &Overrides) -> Figment {
        Figment::from(Serialized::defaults(Settings::default()))
            .merge(Toml::file(file))
            .merge(Env::prefixed("PARLEY_").ignore(&["test_database_url", "config"]))
            .merge(Serialized::defaults(overrides))
    }

    /// What the conversation actors need from configuration.
    pub fn conversation_deps(
        &self,
        db: parley_persistence::DatabaseConnection,
    ) -> parley_actors::Deps {
        use std::time::Duration;
        let llm = parley_actors::llm::LlmClient::new(parley_actors::llm::LlmConfig {
            base_url: self.llm_base_url.clone(),
            api_key: self.llm_api_key.clone(),
            default_model: self.llm_model.clone(),
            timeout: Duration::from_secs(self.llm_timeout_secs),
            max_retries: self.llm_max_retries,
            retry_backoff: Duration::from_millis(self.llm_retry_backoff_ms),
        });
        parley_actors::Deps {
            db,
            llm,
            settings: parley_actors::ConversationSettings {
                idle_after: chrono::Duration::hours(
                    i64::try_from(self.conversation_idle_hours).unwrap_or(i64::MAX / 3600),
                ),
                actor_idle: Duration::from_secs(self.conversation_actor_idle_secs),
                max_tool_rounds: self.llm_max_tool_rounds,
                turn_timeout: Duration::from_secs(self.turn_timeout_secs),
            },
        }
    }

    /// What the channel actors need from configuration.
    pub fn channel_deps(
        &self,
        db: parley_persistence::DatabaseConnection,
        secrets: std::sync::Arc<parley_actors::secrets::SecretBox>,
    ) -> parley_actors::channel::ChannelDeps {
        use std::time::Duration;
        parley_actors::channel::ChannelDeps {
            db,
            graph: parley_actors::whatsapp::GraphClient::new(
                &self.whatsapp_graph_url,
                Duration::from_secs(self.whatsapp_timeout_secs),
            ),
            secrets,
            settings: parley_actors::channel::ChannelSettings {
                per_second: self.whatsapp_rate_per_sec,
                pair_burst: self.whatsapp_pair_burst,
                pair_period: Duration::from_millis(self.whatsapp_pair_period_ms),
                max_retries: self.whatsapp_max_retries,
                retry_backoff: Duration::from_millis(self.whatsapp_retry_backoff_ms),
                public_url: self.public_url.clone(),
            },
        }
    }

    /// The database URL in force: the configured one, else SQLite in the data directory.
    pub fn effective_database_url(&self) -> String {
        self.database_url
            .clone()
            .unwrap_or_else(|| parley_persistence::sqlite_url_in(&self.data_dir))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[allow(clippy::result_large_err)] // figment's Jail fixes the closure's error type.
    fn environment_overrides_the_file_and_flags_override_both() {
        figment::Jail::expect_with(|jail| {
            jail.create_file(
                "parley.toml",
                "bind = \"127.0.0.1:1000\"\nlog = \"debug\"\n",
            )?;
            jail.set_env("PARLEY_BIND", "127.0.0.1:2000");
            let from_env = Settings::load(None, &Overrides::default()).map_err(|e| *e)?;
            assert_eq!(from_env.bind.port(), 2000);
            assert_eq!(from_env.log, "debug");

            let flags = Overrides {
                bind: Some(SocketAddr::from(([127, 0, 0, 1], 3000))),
                ..Overrides::default()
            };
            assert_eq!(
                Settings::load(None, &flags).map_err(|e| *e)?.bind.port(),
                3000
            );
            Ok(())
        });
    }

    #[test]
    fn a_database_password_never_reaches_the_debug_output() {
        let settings = Settings {
            database_url: Some("postgres://app:hunter2@db:5432/parley".to_owned()),
            llm_api_key: Some("sk-secret".to_owned()),
            ..Settings::default()
        };
        let shown = format!("{settings:?}");
        assert!(!shown.contains("hunter2"), "{shown}");
        assert!(!shown.contains("sk-secret"), "{shown}");
        assert!(shown.contains("postgres://app:<redacted>@db:5432/parley"));
    }

    #[test]
    fn without_a_database_url_sqlite_in_the_data_directory_is_used() {
        let settings = Settings {
            data_dir: PathBuf::from("/var/lib/parley"),
            ..Settings::default()
        };
        assert_eq!(
            settings.effective_database_url(),
            "sqlite:///var/lib/parley/parley.db?mode=rwc"
        );
    }
}
