//! Building the application from configuration and serving it until a shutdown signal.

mod cluster;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use parley_actors::ActorRuntime;
use parley_persistence::DatabaseConnection;
use tokio::net::TcpListener;
use tracing::Instrument;

use crate::config::Settings;
use crate::http::{AppState, router};
use crate::serve::{ConnectionLimits, serve};
use parley_actors::domain::SecretBox;

/// A built, bound, not yet serving application.
pub struct Application {
    listener: TcpListener,
    state: AppState,
    /// This node's place in a cluster (`None` on a single node).
    membership: Option<Arc<parley_actors::runtime::Membership>>,
}

impl Application {
    /// Opens and migrates the database, starts the actor runtime and binds the listener
    /// (port 0 picks a free port; see [`Application::local_addr`]).
    ///
    /// # Errors
    /// Fails when the database cannot be opened or migrated, or the address cannot be bound.
    pub async fn build(settings: Settings) -> anyhow::Result<Self> {
        set_up_process(&settings)?;
        // Off the runtime, beside opening the database: the first number parsed would load it
        // on a runtime worker (see `Phone::load_metadata`).
        let phone_metadata =
            tokio::task::spawn_blocking(parley_actors::domain::Phone::load_metadata);
        let db = open_database(&settings).await?;
        log_bootstrap_hint(&db).await?;
        let configured_key = settings.secret_key.as_ref().map(|k| k.expose());
        let secrets = SecretBox::load(configured_key, &settings.data_dir)
            .context("loading the key for secrets at rest")?;
        let secrets = Arc::new(secrets);
        let media = settings
            .media
            .open(&settings.data_dir)
            .context("opening the media store (media.store)")?;
        tracing::info!(store = media.kind(), "media store opened");
        warn_about_webhook_secret(&settings, &db).await?;
        let bind = settings.server.bind;
        let listener = TcpListener::bind(bind)
            .await
            .with_context(|| format!("binding {bind}"))?;
        let (placement, membership) = cluster::join(&settings, &db, listener.local_addr()?).await?;
        parley_persistence::usage::set_metering(settings.usage.metering);
        // Before the actors start: what they record at their start (the event backlog's first
        // sweep, resumed sends) would otherwise go to no recorder and be missing until it
        // happened again.
        let metrics = crate::metrics::install();
        let deps = settings.runtime_deps(db.clone(), secrets.clone(), placement, media);
        let actors = ActorRuntime::start(deps)
            .await
            .context("starting the actor runtime")?;
        let actors = Arc::new(actors);
        if let Some(membership) = &membership {
            membership.run(actors.clone());
        }
        let known_keys: crate::http::KnownKeys = listening(&actors);
        let identity_paths: crate::http::IdentityPaths = listening(&actors);
        let webhook_channels: crate::http::WebhookChannels = listening(&actors);
        let console_pulse: crate::http::ConsolePulse = listening(&actors);
        actors
            .resume()
            .await
            .context("resuming outbound messages left at the last stop")?;
        phone_metadata
            .await
            .context("loading the phone numbers' metadata")?;
        Ok(Self {
            membership,
            listener,
            state: AppState {
                auth_failures: crate::http::AuthFailures::new(
                    settings.server.auth_failures_per_minute,
                ),
                known_keys,
                key_limits: crate::http::KeyLimits::default(),
                console_pulse,
                console: crate::http::ConsoleSessions::new(
                    db.clone(),
                    Duration::from_secs(settings.server.console_session_idle_secs),
                    Duration::from_secs(settings.server.console_session_max_secs),
                ),
                identity_paths,
                webhook_channels,
                settings: Arc::new(settings),
                db,
                actors,
                secrets,
                metrics,
            },
        })
    }

    /// The address actually bound.
    ///
    /// # Errors
    /// Fails when the socket has no local address (not expected once bound).
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Serves until `shutdown` resolves, lets in-flight requests finish (at most
    /// `shutdown_timeout_secs`), then stops the actors and closes the database.
    ///
    /// # Errors
    /// Fails when the server fails to accept connections.
    pub async fn run_until(
        self,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> anyhow::Result<()> {
        let Self {
            listener,
            state,
            membership,
        } = self;
        let server = &state.settings.server;
        let grace = Duration::from_secs(server.shutdown_timeout_secs);
        let limits = ConnectionLimits {
            header_read_timeout: Duration::from_secs(server.header_read_timeout_secs.max(1)),
            idle_timeout: Duration::from_secs(server.idle_timeout_secs.max(1)),
            max_connections: server.max_connections,
            max_per_address: server.max_connections_per_address,
            max_unfinished_per_address: server.max_unfinished_per_address,
        };
        let addr = listener.local_addr()?;
        tracing::info!(%addr, "listening");
        // Only SQLite has a write-ahead log of Parley's to copy; PostgreSQL checkpoints itself.
        let every = Duration::from_millis(state.settings.database.sqlite_checkpoint_ms.max(1));
        let checkpoints = parley_persistence::checkpoint_connection(&state.db)
            .map(|own| (tokio::spawn(checkpoint_every(own.clone(), every)), own));
        let write_behind = parley_persistence::WriteBehind::start(&state.db);
        serve(listener, router(state.clone()), limits, shutdown, grace).await;
        if let Some(membership) = &membership
            && let Err(error) = membership.drain().await
        {
            tracing::warn!(%error, "could not mark this node as leaving");
        }
        state.actors.shutdown(grace).await;
        // The actors have stopped: the partitions are free for the others at once.
        if let Some(membership) = &membership {
            membership.leave().await;
        }
        // Closed before the pool: the pool's last connection then checkpoints what is left.
        if let Some((checkpoints, own)) = checkpoints {
            checkpoints.abort();
            let _ = checkpoints.await;
            if let Err(error) = own.close_by_ref().await {
                tracing::warn!(%error, "closing the checkpoint connection");
            }
        }
        if let Some(write_behind) = write_behind {
            let passes = write_behind.stop();
            tracing::debug!(passes, "stopped handing the write-ahead log to the disk");
        }
        if let Err(error) = state.db.close_by_ref().await {
            tracing::warn!(%error, "closing the database");
        }
        tracing::info!("stopped");
        Ok(())
    }
}

/// Checkpoints the embedded database's write-ahead log every `period` until aborted.
async fn checkpoint_every(db: DatabaseConnection, period: Duration) {
    let mut tick = tokio::time::interval(period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let mut checkpoints = parley_persistence::Checkpoints::default();
    loop {
        tick.tick().await;
        let checkpoint = checkpoints
            .run(&db)
            .instrument(tracing::debug_span!("wal_checkpoint"));
        if let Err(error) = checkpoint.await {
            tracing::warn!(%error, "the SQLite write-ahead log could not be checkpointed");
        }
    }
}

/// Connects to the configured database (creating the data directory for the embedded SQLite
/// default) and applies pending migrations.
///
/// # Errors
/// Fails when the database cannot be reached or a migration fails.
pub async fn open_database(settings: &Settings) -> anyhow::Result<DatabaseConnection> {
    if settings.database.url.is_none() {
        create_owner_only(&settings.data_dir)?;
    }
    let url = settings.effective_database_url();
    if settings.database.url.is_none() {
        // Which directory holds the data: a server started elsewhere would make a new one.
        let data_dir =
            std::fs::canonicalize(&settings.data_dir).unwrap_or_else(|_| settings.data_dir.clone());
        tracing::info!(data_dir = %data_dir.display(), "the embedded database's directory");
    } else {
        tracing::info!(data_dir = %settings.data_dir.display(), "data directory (the database is PARLEY_DATABASE_URL)");
    }
    let db = parley_persistence::connect(&url)
        .await
        .context("connecting to the database")?;
    parley_persistence::migrate(&db)
        .await
        .context("applying database migrations")?;
    Ok(db)
}

/// Without an app secret every webhook from Meta is refused: an error when live channels are
/// waiting for Meta's webhooks, a line of information otherwise (the offline demo, sandbox
/// channels), with what to set for a real number.
async fn warn_about_webhook_secret(
    settings: &Settings,
    db: &DatabaseConnection,
) -> anyhow::Result<()> {
    let whatsapp = &settings.whatsapp;
    if whatsapp.webhook_secret().is_some() {
        return Ok(());
    }
    if whatsapp.allow_unsigned {
        tracing::warn!(
            "PARLEY_WHATSAPP_ALLOW_UNSIGNED is on: unsigned webhooks are accepted (development only)"
        );
        return Ok(());
    }
    let live = parley_persistence::channels::all_active(db)
        .await?
        .into_iter()
        .filter(|c| c.integration.is_live())
        .count();
    if live > 0 {
        tracing::error!(
            live_channels = live,
            "no WhatsApp app secret is configured (PARLEY_WHATSAPP_APP_SECRET): Meta's webhooks \
             for the live channels are refused until one is set"
        );
    } else {
        // Nothing is lost yet (sandbox channels need no secret, as in the demo); a real number
        // will need one.
        tracing::info!(
            "no WhatsApp app secret is configured: webhooks from Meta are refused; set \
             PARLEY_WHATSAPP_APP_SECRET before connecting a real number (sandbox channels need none)"
        );
    }
    Ok(())
}

/// The data directory (0700) and the embedded database file (0600), created readable by the
/// owner only, like the key file beside them. Existing ones are left as they are.
fn create_owner_only(data_dir: &std::path::Path) -> anyhow::Result<()> {
    if !data_dir.exists() {
        let mut builder = std::fs::DirBuilder::new();
        builder.recursive(true);
        #[cfg(unix)]
        std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
        builder
            .create(data_dir)
            .with_context(|| format!("creating the data directory {}", data_dir.display()))?;
    }
    let database = data_dir.join("parley.db");
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    match options.open(&database) {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(e).with_context(|| format!("creating {}", database.display())),
    }
}

async fn log_bootstrap_hint(db: &DatabaseConnection) -> anyhow::Result<()> {
    if parley_persistence::workspaces::count_all(db).await? == 0 {
        tracing::warn!(
            "no workspace exists yet: create the first workspace and API key with \
             `parley admin bootstrap --workspace <NAME>` (same database settings as `serve`)"
        );
    }
    Ok(())
}

/// Resolves on ctrl-c (SIGINT) or SIGTERM. The handlers are installed when this is called, not
/// when the future is first polled, so a signal sent right after start-up is never missed.
pub fn shutdown_signal() -> impl Future<Output = ()> + Send + 'static {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let interrupt = signal(SignalKind::interrupt());
        let terminate = signal(SignalKind::terminate());
        async move {
            match (interrupt, terminate) {
                (Ok(mut interrupt), Ok(mut terminate)) => {
                    tokio::select! {
                        _ = interrupt.recv() => {},
                        _ = terminate.recv() => {},
                    }
                }
                (Err(error), _) | (_, Err(error)) => {
                    tracing::error!(%error, "cannot listen for shutdown signals");
                    std::future::pending::<()>().await;
                }
            }
        }
    }
    #[cfg(not(unix))]
    async {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

/// A front-door cache (or the console's pulse) that hears every change the actors announce.
/// What the process sets once from its settings, before anything is opened: the egress
/// policy read, the size of free-form fields, a cluster this node cannot serve refused (before
/// the database is migrated), the TLS provider, and a word when no language model is set.
fn set_up_process(settings: &Settings) -> anyhow::Result<()> {
    settings
        .egress
        .policy()
        .context("reading PARLEY_EGRESS_ALLOW (egress.allow)")?;
    parley_actors::domain::set_free_form_limit(settings.server.max_field_bytes);
    cluster::refuse_unservable(settings)?;
    parley_actors::llm::install_crypto_provider();
    if settings.llm.base_url.is_none() {
        tracing::warn!(
            "no language model configured (PARLEY_LLM_BASE_URL): conversations will answer 503"
        );
    }
    Ok(())
}

fn listening<T>(actors: &ActorRuntime) -> T
where
    T: parley_actors::changes::Listener + Clone + Default + 'static,
{
    let listener = T::default();
    actors.changes().listen(Arc::new(listener.clone()));
    listener
}
