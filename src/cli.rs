//! The command line: `serve`, `migrate`, `admin bootstrap`, `admin create-key`.

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Context;
use chrono::{DateTime, Utc};
use clap::{Args, Parser, Subcommand};

use crate::config::{LogFormat, Overrides, Settings};
use crate::domain::{Name, Permissions};
use crate::startup::{Application, open_database, shutdown_signal};
use crate::tenancy::{BootstrapRequest, bootstrap, issue_api_key};

mod operator;

/// Parley: AI assistants on WhatsApp Business channels.
#[derive(Debug, Parser)]
#[command(name = "parley", version, about)]
pub struct Cli {
    /// Configuration file (default: `parley.toml` in the working directory, if present).
    #[arg(long, global = true, env = "PARLEY_CONFIG")]
    config: Option<PathBuf>,
    #[command(flatten)]
    database: DatabaseArgs,
    /// Log format.
    #[arg(long, global = true, value_enum)]
    log_format: Option<LogFormat>,
    #[command(subcommand)]
    command: Command,
}

/// Where the database is; the same flags for every command so that `admin` reaches the
/// database `serve` uses.
#[derive(Debug, Args)]
struct DatabaseArgs {
    /// Database URL (`sqlite://…` or `postgres://…`); default: SQLite in the data directory.
    #[arg(long, global = true)]
    database_url: Option<String>,
    /// Data directory for the embedded database.
    #[arg(long, global = true)]
    data_dir: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the HTTP server and the actor runtime (applies migrations first).
    Serve {
        /// Address to listen on.
        #[arg(long)]
        bind: Option<SocketAddr>,
        /// Fully offline demo: a sandbox channel, a demo assistant and a built-in model.
        #[arg(long)]
        demo: bool,
    },
    /// Apply pending database migrations and exit.
    Migrate,
    /// Operator commands.
    #[command(subcommand)]
    Admin(AdminCommand),
}

#[derive(Debug, Subcommand)]
enum AdminCommand {
    /// Create the business, the first workspace, its owner and a key with every permission.
    Bootstrap {
        /// Workspace name.
        #[arg(long)]
        workspace: String,
        /// Business name (an existing business of that name is reused).
        #[arg(long, default_value = "Default")]
        business: String,
        /// Owner's e-mail.
        #[arg(long)]
        email: Option<String>,
        /// Print one JSON object `{"business_id","workspace_id","user_id","api_key"}`.
        #[arg(long)]
        json: bool,
    },
    /// Show the whole installation's live actor tree, from the running server (needs
    /// `server.operator_token`, e.g. `PARLEY_OPERATOR_TOKEN`).
    Actors {
        /// The server's base URL (default: `http://` and the configured bind address).
        #[arg(long)]
        url: Option<String>,
    },
    /// Show what the installation (or one workspace) used, from the running server (needs
    /// the operator token).
    Usage(operator::UsageArgs),
    /// Set a workspace's quotas on the running server (needs the operator token); a quota not
    /// given is lifted.
    Quota(operator::QuotaArgs),
    /// Issue another API key for a workspace, acting as its owner.
    CreateKey {
        /// Workspace id.
        #[arg(long)]
        workspace: i64,
        /// Key name.
        #[arg(long)]
        name: String,
        /// Comma-separated permissions: read, write, admin.
        #[arg(long, default_value = "read,write")]
        permissions: String,
        /// End of validity (RFC 3339).
        #[arg(long)]
        expires_at: Option<DateTime<Utc>>,
        /// Print one JSON object `{"id","workspace_id","permissions","api_key"}`.
        #[arg(long)]
        json: bool,
    },
}

impl Cli {
    /// Loads configuration with this command line's overrides.
    ///
    /// # Errors
    /// Fails when a configuration layer is invalid.
    pub fn settings(&self) -> anyhow::Result<Settings> {
        let bind = match &self.command {
            Command::Serve { bind, .. } => *bind,
            _ => None,
        };
        let overrides = Overrides {
            bind,
            database_url: self.database.database_url.clone(),
            data_dir: self.database.data_dir.clone(),
            log_format: self.log_format,
        };
        Settings::load(self.config.as_deref(), &overrides).context("loading configuration")
    }

    /// Warnings about how Parley was started, to log once logging is set up.
    pub fn warnings(&self) -> Vec<&'static str> {
        let mut warnings = Vec::new();
        if self.database.database_url.is_some() {
            warnings.push(
                "--database-url shows in the process list (and any password in it); prefer \
                 PARLEY_DATABASE_URL",
            );
        }
        warnings
    }

    /// Runs the command.
    ///
    /// # Errors
    /// Fails when the command fails; the message says what was being done.
    pub async fn run(self, settings: Settings) -> anyhow::Result<()> {
        match self.command {
            Command::Serve { demo: true, .. } => {
                crate::demo::serve(settings, shutdown_signal()).await
            }
            Command::Serve { demo: false, .. } => {
                let shutdown = shutdown_signal();
                let app = Application::build(settings).await?;
                app.run_until(shutdown).await
            }
            Command::Migrate => {
                open_database(&settings).await?;
                tracing::info!("migrations applied");
                Ok(())
            }
            Command::Admin(AdminCommand::Bootstrap {
                workspace,
                business,
                email,
                json,
            }) => admin_bootstrap(&settings, workspace, business, email, json).await,
            Command::Admin(AdminCommand::Actors { url }) => operator::actors(&settings, url).await,
            Command::Admin(AdminCommand::Usage(args)) => operator::usage(&settings, args).await,
            Command::Admin(AdminCommand::Quota(args)) => operator::quota(&settings, args).await,
            Command::Admin(AdminCommand::CreateKey {
                workspace,
                name,
                permissions,
                expires_at,
                json,
            }) => {
                admin_create_key(&settings, workspace, &name, &permissions, expires_at, json).await
            }
        }
    }
}

/// `parley admin bootstrap`: the first workspace and key.
async fn admin_bootstrap(
    settings: &Settings,
    workspace: String,
    business: String,
    email: Option<String>,
    json: bool,
) -> anyhow::Result<()> {
    let db = open_database(settings).await?;
    let done = bootstrap(
        &db,
        &BootstrapRequest {
            workspace: workspace.clone(),
            business,
            email,
        },
    )
    .await?;
    if json {
        println!("{}", serde_json::to_string(&done)?);
    } else {
        println!(
            "Created workspace '{workspace}' (id {}).",
            done.workspace_id
        );
        println!("API key with read, write and admin permissions (shown once, store it now):");
        println!("  {}", done.api_key);
        println!("Try it against `parley serve`:");
        println!(
            "  curl -H 'Authorization: Bearer {}' http://{}/workspace",
            done.api_key, settings.server.bind
        );
    }
    Ok(())
}

/// `parley admin create-key`: another key for a workspace, acting as its owner.
async fn admin_create_key(
    settings: &Settings,
    workspace: i64,
    name: &str,
    permissions: &str,
    expires_at: Option<DateTime<Utc>>,
    json: bool,
) -> anyhow::Result<()> {
    let permissions: Permissions = permissions.parse()?;
    anyhow::ensure!(!permissions.is_empty(), "give at least one permission");
    let name = Name::try_from(name).map_err(|e| anyhow::anyhow!("name {e}"))?;
    let db = open_database(settings).await?;
    let owner = parley_persistence::tenancy::workspace_owner(&db, workspace)
        .await?
        .with_context(|| format!("workspace {workspace} does not exist or has no members"))?;
    let (stored, secret) =
        issue_api_key(&db, workspace, owner.id, &name, &permissions, expires_at).await?;
    if json {
        let out = serde_json::json!({
            "id": stored.id,
            "workspace_id": stored.workspace_id,
            "permissions": permissions.names(),
            "api_key": secret.expose(),
        });
        println!("{out}");
    } else {
        println!(
            "API key '{}' for workspace {workspace} with {} (shown once, store it now):",
            name.as_str(),
            permissions.names().join(", ")
        );
        println!("  {}", secret.expose());
    }
    Ok(())
}
