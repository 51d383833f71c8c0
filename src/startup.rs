//! Building the application from configuration and serving it until a shutdown signal.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use parley_actors::ActorRuntime;
use parley_persistence::DatabaseConnection;
use tokio::net::TcpListener;

use crate::config::Settings;
use crate::http::{AppState, router};
use parley_actors::secrets::SecretBox;

/// A built, bound, not yet serving application.
pub struct Application {
    listener: TcpListener,
    state: AppState,
}

impl Application {
    /// Opens and migrates the database, starts the actor runtime and binds the listener
    /// (port 0 picks a free port; see [`Application::local_addr`]).
    ///
    /// # Errors
    /// Fails when the database cannot be opened or migrated, or the address cannot be bound.
    pub async fn build(settings: Settings) -> anyhow::Result<Self> {
        let db = open_database(&settings).await?;
        log_bootstrap_hint(&db).await?;
        let secrets = SecretBox::load(settings.secret_key.as_deref(), &settings.data_dir)
            .context("loading the key for secrets at rest")?;
        parley_actors::llm::install_crypto_provider();
        if settings.llm_base_url.is_none() {
            tracing::warn!(
                "no language model configured (PARLEY_LLM_BASE_URL): conversations will answer 503"
            );
        }
        let secrets = Arc::new(secrets);
        let actors = ActorRuntime::start(
            settings.conversation_deps(db.clone()),
            settings.channel_deps(db.clone(), secrets.clone()),
        )
        .await
        .context("starting the actor runtime")?;
        let actors = Arc::new(actors);
        actors
            .resume()
            .await
            .context("resuming unanswered WhatsApp messages")?;
        let listener = TcpListener::bind(settings.bind)
            .await
            .with_context(|| format!("binding {}", settings.bind))?;
        Ok(Self {
            listener,
            state: AppState {
                settings: Arc::new(settings),
                db,
                actors,
                secrets,
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
        let Self { listener, state } = self;
        let grace = Duration::from_secs(state.settings.shutdown_timeout_secs);
        let addr = listener.local_addr()?;
        tracing::info!(%addr, "listening");

        let (stopping_tx, mut stopping_rx) = tokio::sync::watch::channel(false);
        let serve =
            axum::serve(listener, router(state.clone())).with_graceful_shutdown(async move {
                shutdown.await;
                tracing::info!("shutting down: finishing in-flight requests");
                let _ = stopping_tx.send(true);
            });
        let deadline = async move {
            // Never resolves before the signal; a closed channel means the server is gone.
            if stopping_rx.wait_for(|stopping| *stopping).await.is_ok() {
                tokio::time::sleep(grace).await;
            } else {
                std::future::pending::<()>().await;
            }
        };
        tokio::select! {
            served = serve => served.context("serving HTTP")?,
            () = deadline => tracing::warn!(?grace, "in-flight requests cut off at the shutdown deadline"),
        }

        state.actors.shutdown(grace).await;
        if let Err(error) = state.db.close_by_ref().await {
            tracing::warn!(%error, "closing the database");
        }
        tracing::info!("stopped");
        Ok(())
    }
}

/// Connects to the configured database (creating the data directory for the embedded SQLite
/// default) and applies pending migrations.
///
/// # Errors
/// Fails when the database cannot be reached or a migration fails.
pub async fn open_database(settings: &Settings) -> anyhow::Result<DatabaseConnection> {
    if settings.database_url.is_none() {
        std::fs::create_dir_all(&settings.data_dir).with_context(|| {
            format!(
                "creating the data directory {}",
                settings.data_dir.display()
            )
        })?;
    }
    let url = settings.effective_database_url();
    let db = parley_persistence::connect(&url)
        .await
        .context("connecting to the database")?;
    parley_persistence::migrate(&db)
        .await
        .context("applying database migrations")?;
    Ok(db)
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
