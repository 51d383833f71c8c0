//! Dependencies for actor tests: a fresh SQLite database and a fake model.

use std::time::Duration;

use parley_testkit::FakeModel;

use crate::conversation::{ConversationSettings, Deps};
use crate::llm::{LlmClient, LlmConfig};

/// Fresh dependencies; keep the directory and the model alive as long as the test runs.
pub(crate) async fn deps() -> (Deps, tempfile::TempDir, FakeModel) {
    let dir = tempfile::tempdir().expect("temporary directory");
    let db = parley_persistence::connect(&parley_persistence::sqlite_url_in(dir.path()))
        .await
        .expect("database");
    parley_persistence::migrate(&db).await.expect("migrations");
    let model = FakeModel::start().await;
    let llm = LlmClient::new(LlmConfig {
        base_url: Some(model.base_url()),
        api_key: None,
        default_model: Some("fake".to_owned()),
        timeout: Duration::from_secs(5),
        max_retries: 0,
        retry_backoff: Duration::ZERO,
    });
    let deps = Deps {
        db,
        llm,
        settings: ConversationSettings {
            idle_after: chrono::Duration::hours(24),
            actor_idle: Duration::from_secs(600),
            max_tool_rounds: 8,
            turn_timeout: Duration::from_secs(30),
        },
    };
    (deps, dir, model)
}

/// Channel dependencies on the same database, with Meta unreachable (tests here use sandbox
/// channels).
pub(crate) fn channel_deps(deps: &Deps) -> crate::channel::ChannelDeps {
    let dir = std::env::temp_dir();
    crate::channel::ChannelDeps {
        db: deps.db.clone(),
        graph: crate::whatsapp::GraphClient::new("http://127.0.0.1:9", Duration::from_secs(1)),
        secrets: std::sync::Arc::new(
            crate::secrets::SecretBox::load(
                Some("AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="),
                &dir,
            )
            .expect("key"),
        ),
        settings: crate::channel::ChannelSettings {
            per_second: 80,
            pair_burst: 5,
            pair_period: Duration::from_secs(6),
            max_retries: 0,
            retry_backoff: Duration::ZERO,
            public_url: None,
        },
    }
}
