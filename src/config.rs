//! Configuration: defaults, then `parley.toml` (optional), then `PARLEY_*` environment
//! variables, then command-line flags; each layer overrides the one before.
//!
//! Settings are grouped in sections (`[server]`, `[database]`, `[log]`, `[llm]`,
//! `[whatsapp]`, `[actors]`, `[mcp]`, `[egress]`, `[cluster]`, `[media]`); the environment keeps flat names (`PARLEY_LLM_BASE_URL` is
//! `llm.base_url`, `PARLEY_BIND` is `server.bind`), mapped in [`env_key`].

mod actors;
mod cluster;
mod deps;
mod media;
mod sections;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use figment::Figment;
use figment::providers::{Env, Format, Serialized, Toml};
use figment::value::Uncased;
use serde::{Deserialize, Serialize};

pub use self::actors::ActorSettings;
pub use self::cluster::{ClusterConfig, MIN_SECRET_LEN};
pub use self::media::{MediaConfig, MediaStoreKind};
pub use self::sections::{
    DatabaseSettings, EgressConfig, LlmSettings, LogSettings, McpConfig, Secret, ServerSettings,
    WhatsAppSettings,
};

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
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(default)]
pub struct Settings {
    /// Where the embedded database and generated key files live.
    pub data_dir: PathBuf,
    /// Key (base64 of 32 bytes) encrypting secrets at rest; default: `secret.key` in
    /// [`Settings::data_dir`], generated on first start.
    pub secret_key: Option<Secret>,
    /// The HTTP server.
    pub server: ServerSettings,
    /// The database.
    pub database: DatabaseSettings,
    /// Logging.
    pub log: LogSettings,
    /// The language model.
    pub llm: LlmSettings,
    /// WhatsApp's Cloud API.
    pub whatsapp: WhatsAppSettings,
    /// The actor runtime.
    pub actors: ActorSettings,
    /// MCP servers.
    pub mcp: McpConfig,
    /// Where tenant URLs may lead.
    pub egress: EgressConfig,
    /// Several nodes on one PostgreSQL database.
    pub cluster: ClusterConfig,
    /// Where the files people send are kept.
    pub media: MediaConfig,
    /// What workspaces use.
    pub usage: UsageConfig,
    /// Mail: operators' invitations.
    pub mail: MailConfig,
}

/// `[mail]`: how operators' invitations are mailed (without a relay the API's answer carries
/// the link, and nothing is mailed).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct MailConfig {
    /// The SMTP relay: `smtp://host:port` (plain, for a relay on this machine or network),
    /// `smtp://host:587?tls=required` (STARTTLS) or `smtps://host:465`, with
    /// `user:password@` when it asks.
    pub smtp_url: Option<Secret>,
    /// The sender of the mail (`Parley <parley@example.com>`).
    pub from: Option<String>,
}

/// `[usage]`.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(default)]
pub struct UsageConfig {
    /// Whether usage is counted (on; off only to weigh metering itself, as a benchmark does:
    /// quotas then see nothing used).
    pub metering: bool,
}

impl Default for UsageConfig {
    fn default() -> Self {
        Self { metering: true }
    }
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            data_dir: PathBuf::from("data"),
            secret_key: None,
            server: ServerSettings::default(),
            database: DatabaseSettings::default(),
            log: LogSettings::default(),
            llm: LlmSettings::default(),
            whatsapp: WhatsAppSettings::default(),
            actors: ActorSettings::default(),
            mcp: McpConfig::default(),
            egress: EgressConfig::default(),
            cluster: ClusterConfig::default(),
            media: MediaConfig::default(),
            usage: UsageConfig::default(),
            mail: MailConfig::default(),
        }
    }
}

/// Values given on the command line; `None` leaves the lower layers' value.
#[derive(Clone, Debug, Default)]
pub struct Overrides {
    /// `--bind`
    pub bind: Option<SocketAddr>,
    /// `--database-url`
    pub database_url: Option<String>,
    /// `--data-dir`
    pub data_dir: Option<PathBuf>,
    /// `--log-format`
    pub log_format: Option<LogFormat>,
}

/// Where a flat `PARLEY_*` name lives in the sections (`llm_base_url` → `llm.base_url`).
fn env_key(flat: &str) -> String {
    const SERVER: [&str; 17] = [
        "console_session_idle_secs",
        "console_session_max_secs",
        "metrics_public",
        "operator_token",
        "auth_failures_per_minute",
        "bind",
        "public_url",
        "body_limit_bytes",
        "request_timeout_secs",
        "send_timeout_secs",
        "shutdown_timeout_secs",
        "header_read_timeout_secs",
        "idle_timeout_secs",
        "max_connections",
        "max_connections_per_address",
        "max_unfinished_per_address",
        "max_field_bytes",
    ];
    const ACTORS: [&str; 8] = [
        "model_calls_per_workspace",
        "conversation_",
        "turn_timeout",
        "inbound_",
        "stop_words",
        "scheduler_",
        "handoff_",
        "event_",
    ];
    if SERVER.contains(&flat) {
        return format!("server.{flat}");
    }
    if ACTORS.iter().any(|prefix| flat.starts_with(prefix)) {
        return format!("actors.{flat}");
    }
    match flat {
        "database_url" => return "database.url".to_owned(),
        "log" => return "log.filter".to_owned(),
        "log_format" => return "log.format".to_owned(),
        "cluster" => return "cluster.enabled".to_owned(),
        "node_url" => return "cluster.node_url".to_owned(),
        _ => {}
    }
    for section in [
        "llm", "whatsapp", "mcp", "egress", "cluster", "media", "usage", "mail", "database",
    ] {
        if let Some(key) = flat.strip_prefix(section).and_then(|k| k.strip_prefix('_')) {
            return format!("{section}.{key}");
        }
    }
    flat.to_owned()
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
        let mut figment = Figment::from(Serialized::defaults(Settings::default()))
            .merge(Toml::file(file))
            .merge(
                Env::prefixed("PARLEY_")
                    .ignore(&["test_database_url", "bench_database_url", "config"])
                    .map(|key| Uncased::from(env_key(&key.as_str().to_ascii_lowercase()))),
            );
        if let Some(bind) = overrides.bind {
            figment = figment.merge(Serialized::default("server.bind", bind));
        }
        if let Some(url) = &overrides.database_url {
            figment = figment.merge(Serialized::default("database.url", url));
        }
        if let Some(dir) = &overrides.data_dir {
            figment = figment.merge(Serialized::default("data_dir", dir));
        }
        if let Some(format) = overrides.log_format {
            figment = figment.merge(Serialized::default("log.format", format));
        }
        figment
    }

    /// The database URL in force: the configured one, else SQLite in the data directory.
    pub fn effective_database_url(&self) -> String {
        self.database
            .url
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
                "[server]\nbind = \"127.0.0.1:1000\"\n[log]\nfilter = \"debug\"\n",
            )?;
            jail.set_env("PARLEY_BIND", "127.0.0.1:2000");
            let from_env = Settings::load(None, &Overrides::default()).map_err(|e| *e)?;
            assert_eq!(from_env.server.bind.port(), 2000);
            assert_eq!(from_env.log.filter, "debug");

            let flags = Overrides {
                bind: Some(SocketAddr::from(([127, 0, 0, 1], 3000))),
                ..Overrides::default()
            };
            assert_eq!(
                Settings::load(None, &flags)
                    .map_err(|e| *e)?
                    .server
                    .bind
                    .port(),
                3000
            );
            Ok(())
        });
    }

    #[test]
    #[allow(clippy::result_large_err)] // figment's Jail fixes the closure's error type.
    fn flat_environment_names_reach_their_sections() {
        figment::Jail::expect_with(|jail| {
            jail.set_env("PARLEY_LLM_BASE_URL", "http://localhost:11434/v1");
            jail.set_env("PARLEY_WHATSAPP_APP_SECRET", "s3cret");
            jail.set_env("PARLEY_DATABASE_URL", "postgres://u@h/db");
            jail.set_env("PARLEY_TURN_TIMEOUT_SECS", "7");
            jail.set_env("PARLEY_LOG_FORMAT", "json");
            jail.set_env("PARLEY_DATA_DIR", "/var/lib/parley");
            jail.set_env("PARLEY_MODEL_CALLS_PER_WORKSPACE", "3");
            jail.set_env("PARLEY_USAGE_METERING", "false");
            jail.set_env("PARLEY_DATABASE_SQLITE_CHECKPOINT_MS", "250");
            jail.set_env("PARLEY_EVENT_DELIVERY_PER_ENDPOINT", "16");
            let settings = Settings::load(None, &Overrides::default()).map_err(|e| *e)?;
            assert_eq!(settings.database.sqlite_checkpoint_ms, 250);
            assert_eq!(settings.actors.event_delivery_per_endpoint, 16);
            assert_eq!(settings.actors.model_calls_per_workspace, 3);
            assert!(!settings.usage.metering);
            assert_eq!(
                settings.llm.base_url.as_deref(),
                Some("http://localhost:11434/v1")
            );
            assert_eq!(
                settings.whatsapp.app_secret.as_ref().map(Secret::expose),
                Some("s3cret")
            );
            assert_eq!(settings.database.url.as_deref(), Some("postgres://u@h/db"));
            assert_eq!(settings.actors.turn_timeout_secs, 7);
            assert_eq!(settings.log.format, LogFormat::Json);
            assert_eq!(settings.data_dir, PathBuf::from("/var/lib/parley"));
            Ok(())
        });
    }

    #[test]
    fn a_database_password_never_reaches_the_debug_output() {
        let settings = Settings {
            database: DatabaseSettings {
                url: Some("postgres://app:hunter2@db:5432/parley".to_owned()),
                ..DatabaseSettings::default()
            },
            llm: LlmSettings {
                api_key: Some("sk-secret".into()),
                ..LlmSettings::default()
            },
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
