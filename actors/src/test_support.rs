//! Dependencies for actor tests: a fresh SQLite database and a fake model.

use std::time::Duration;

use parley_persistence::assistants::AssistantFields;
use parley_persistence::channels::{ChannelChanges, NewChannel};
use parley_persistence::identities::NewIdentity;
use parley_persistence::workers::NewWorker;
use parley_persistence::{assistants, channels, clock, identities, tenancy, workers, workspaces};
use parley_testkit::FakeModel;
use serde_json::json;
use uuid::Uuid;

use crate::conversation::{ConversationDeps, ConversationSettings};
use crate::inbound::worker::InboundSettings;
use crate::llm::{LlmClient, LlmConfig};
use crate::runtime::RuntimeDeps;

/// Fresh dependencies; keep the directory and the model alive as long as the test runs.
pub(crate) async fn deps() -> (ConversationDeps, tempfile::TempDir, FakeModel) {
    let dir = tempfile::tempdir().expect("temporary directory");
    let db = parley_persistence::connect(&parley_persistence::sqlite_url_in(dir.path()))
        .await
        .expect("database");
    parley_persistence::migrate(&db).await.expect("migrations");
    let model = FakeModel::start().await;
    let llm = LlmClient::new(LlmConfig {
        transcription_model: "whisper-1".to_owned(),
        base_url: Some(model.base_url()),
        api_key: None,
        default_model: Some("fake".to_owned()),
        timeout: Duration::from_secs(5),
        max_retries: 0,
        retry_backoff: Duration::ZERO,
    });
    let secrets = std::sync::Arc::new(
        crate::domain::SecretBox::load(
            Some("AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="),
            dir.path(),
        )
        .expect("key"),
    );
    let egress = crate::egress::Egress::parse("127.0.0.0/8").expect("allow list");
    let mcp = std::sync::Arc::new(crate::mcp::McpHub::new(
        std::sync::Arc::new(egress),
        crate::mcp::McpSettings::default(),
        secrets,
    ));
    let writer = parley_persistence::GroupCommit::start(db.clone());
    let events = crate::events::Events::default();
    let deps = ConversationDeps {
        quotas: crate::quotas::Quotas::new(db.clone(), writer.clone(), events.clone()),
        model_slots: crate::llm::ModelSlots::default(),
        changes: crate::changes::Announcer::default(),
        writer,
        db,
        llm,
        mcp,
        settings: ConversationSettings {
            idle_after: chrono::Duration::hours(24),
            actor_rest: Duration::from_secs(5),
            warm_actors: 1_000,
            busy_rest: Duration::from_secs(1),
            actor_idle: Duration::from_secs(600),
            max_tool_rounds: 8,
            turn_timeout: Duration::from_secs(30),
            handoff_sweep: Duration::from_secs(60),
        },
        announced: std::sync::Arc::default(),
        live: crate::conversation::LiveConversations::default(),
        events,
        placement: crate::cluster::Placement::single(),
        media: crate::media::MediaBell::default(),
        media_store: crate::media::MediaStore::local(&dir.path().join("media"))
            .expect("media store"),
    };
    (deps, dir, model)
}

/// Channel dependencies on the same database, with Meta unreachable (tests here use sandbox
/// channels).
pub(crate) fn channel_deps(deps: &ConversationDeps) -> crate::channel::ChannelDeps {
    let dir = std::env::temp_dir();
    crate::channel::ChannelDeps {
        db: deps.db.clone(),
        writer: deps.writer.clone(),
        graph: crate::whatsapp::GraphClient::new("http://127.0.0.1:9", Duration::from_secs(1)),
        secrets: std::sync::Arc::new(
            crate::domain::SecretBox::load(
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
        events: deps.events.clone(),
        placement: deps.placement.clone(),
    }
}

/// Dependencies of a whole runtime on one fresh database.
pub(crate) async fn runtime_deps() -> (RuntimeDeps, tempfile::TempDir, FakeModel) {
    let (conversations, dir, model) = deps().await;
    let channels = channel_deps(&conversations);
    let changes = crate::changes::Announcer::default();
    let deps = RuntimeDeps {
        placement: conversations.placement.clone(),
        changes: changes.clone(),
        inbound: InboundSettings::default(),
        scheduler_sweep: std::time::Duration::from_secs(60),
        scheduler_runs_kept: 100,
        events: crate::events::delivery::DeliveryDeps {
            db: conversations.db.clone(),
            writer: conversations.writer.clone(),
            secrets: channels.secrets.clone(),
            egress: std::sync::Arc::new(
                crate::egress::Egress::parse("127.0.0.0/8").expect("allow list"),
            ),
            events: conversations.events.clone(),
            settings: crate::events::delivery::EventSettings::default(),
            placement: conversations.placement.clone(),
            changes,
        },
        media: crate::media::MediaDeps {
            db: conversations.db.clone(),
            writer: conversations.writer.clone(),
            store: conversations.media_store.clone(),
            graph: channels.graph.clone(),
            secrets: channels.secrets.clone(),
            settings: crate::media::MediaSettings::default(),
            placement: conversations.placement.clone(),
            bell: conversations.media.clone(),
        },
        conversations,
        channels,
    };
    (deps, dir, model)
}

/// A workspace with a sandbox channel whose worker has one assistant, and two identities.
pub(crate) async fn world(db: &parley_persistence::DatabaseConnection) -> (i64, Uuid, Uuid, Uuid) {
    let now = clock::now();
    let business = tenancy::find_or_create_business(db, "B", now)
        .await
        .expect("business");
    let user = tenancy::find_or_create_user(db, business.id, None, now)
        .await
        .expect("user");
    let ws = workspaces::create_with_owner(db, business.id, user.id, "W", None, now)
        .await
        .expect("workspace")
        .id;
    let worker = workers::create(
        db,
        ws,
        NewWorker {
            name: "w".into(),
            description: None,
            timezone: None,
        },
        now,
    )
    .await
    .expect("worker");
    let fields = AssistantFields {
        name: "a".into(),
        instructions: "Echo.".into(),
        languages: json!([]),
        provider: "PROVIDER_ONE".into(),
        model: None,
        settings: json!({"history_turns": 20, "memory_enabled": true, "debounce_ms": 0}),
    };
    assistants::create(db, ws, worker.id, fields, now)
        .await
        .expect("assistant");
    let new_channel = NewChannel {
        name: "sandbox".into(),
        integration: parley_persistence::Integration::Sandbox,
        active: true,
        settings: json!({}),
        phone_number_id: None,
        business_account_id: None,
        access_token_encrypted: None,
        verify_token: "t".into(),
        verified: None,
    };
    let channel = channels::create(db, ws, new_channel, now)
        .await
        .expect("channel");
    let changes = ChannelChanges {
        worker_id: Some(Some(worker.id)),
        ..ChannelChanges::default()
    };
    channels::update(db, channel, changes, now)
        .await
        .expect("sync");
    let channel_id = channels::list(db, ws, parley_persistence::Page { page: 1, limit: 1 })
        .await
        .expect("channels")
        .items[0]
        .id;
    let person = |name: &str| NewIdentity {
        id: Uuid::now_v7(),
        name: Some(name.into()),
        external_id: None,
        metadata: json!({}),
        opted_out: false,
    };
    let a = identities::create(db, ws, person("A"), now)
        .await
        .expect("identity")
        .id;
    let b = identities::create(db, ws, person("B"), now)
        .await
        .expect("identity")
        .id;
    (ws, channel_id, a, b)
}

/// An outbound message of `identity_id` on the channel that Meta accepted as `wamid`.
pub(crate) async fn sent_message(
    db: &parley_persistence::DatabaseConnection,
    ws: i64,
    channel_id: Uuid,
    identity_id: Uuid,
    wamid: &str,
) -> Uuid {
    use parley_persistence::conversations::{self, NewMessage};
    use parley_persistence::{MessageStatus, deliveries};
    let now = clock::now();
    let conversation = conversations::start(db, ws, identity_id, channel_id, None, now)
        .await
        .expect("conversation")
        .conversation();
    let message = NewMessage::to_person("Hi".into(), MessageStatus::Pending);
    let message = conversations::append_message(db, &conversation, message, now)
        .await
        .expect("message");
    deliveries::record_send(db, message.id, MessageStatus::Sent, Some(wamid), None)
        .await
        .expect("send recorded");
    message.id
}
