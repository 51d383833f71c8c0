//! What the actor runtime needs, built from configuration.

use std::sync::Arc;
use std::time::Duration;

use parley_actors::changes::Announcer;
use parley_actors::channel::{ChannelDeps, ChannelSettings};
use parley_actors::cluster::Placement;
use parley_actors::domain::SecretBox;
use parley_actors::events::Events;
use parley_actors::events::delivery::{DeliveryDeps, EventSettings};
use parley_actors::inbound::worker::InboundSettings;
use parley_actors::llm::{LlmClient, LlmConfig, ModelSlots};
use parley_actors::mcp::{McpHub, McpSettings};
use parley_actors::media::{MediaBell, MediaDeps, MediaStore};
use parley_actors::quotas::Quotas;
use parley_actors::whatsapp::GraphClient;
use parley_actors::{ConversationDeps, ConversationSettings, LiveConversations, RuntimeDeps};
use parley_persistence::{DatabaseConnection, GroupCommit};

use super::Settings;

impl Settings {
    /// What the actor runtime needs from configuration: the database's writer, the event
    /// routes and the announcer are built here once, and every part gets them (and
    /// `placement`) as it is built.
    pub fn runtime_deps(
        &self,
        db: DatabaseConnection,
        secrets: Arc<SecretBox>,
        placement: Placement,
        media: MediaStore,
    ) -> RuntimeDeps {
        let actors = &self.actors;
        let writer = GroupCommit::start(db.clone());
        let events = Events::default();
        let changes = Announcer::new(Arc::new(placement.clone()));
        let announcer = changes.clone();
        let delivery = DeliveryDeps {
            db: db.clone(),
            writer: writer.clone(),
            secrets: secrets.clone(),
            egress: Arc::new(self.egress.policy().unwrap_or_default()),
            events: events.clone(),
            settings: EventSettings {
                sweep: Duration::from_millis(actors.event_delivery_sweep_ms.max(10)),
                per_endpoint: actors.event_delivery_per_endpoint.max(1),
                ..EventSettings::default()
            },
            placement: placement.clone(),
            changes: changes.clone(),
        };
        let shared = Shared {
            db,
            writer,
            secrets,
            events,
            placement,
            bell: MediaBell::default(),
            changes: announcer,
        };
        let channels = self.channel_deps(&shared);
        RuntimeDeps {
            conversations: self.conversation_deps(&shared, &media),
            media: MediaDeps {
                db: shared.db.clone(),
                writer: shared.writer.clone(),
                store: media,
                graph: channels.graph.clone(),
                secrets: shared.secrets.clone(),
                settings: self.media.settings(),
                placement: shared.placement.clone(),
                bell: shared.bell.clone(),
            },
            channels,
            placement: shared.placement,
            changes,
            events: delivery,
            inbound: InboundSettings {
                concurrency: actors.inbound_concurrency.max(1),
                queue: actors.inbound_queue.max(1),
                retry_base: Duration::from_millis(actors.inbound_retry_base_ms),
                retry_max: Duration::from_secs(actors.inbound_retry_max_secs),
                sweep_every: Duration::from_millis(actors.inbound_sweep_ms.max(10)),
                stop_words: actors
                    .stop_words
                    .split(',')
                    .map(str::trim)
                    .filter(|w| !w.is_empty())
                    .map(str::to_owned)
                    .collect(),
            },
            scheduler_sweep: Duration::from_millis(actors.scheduler_sweep_ms.max(10)),
            scheduler_runs_kept: actors.scheduler_runs_kept,
        }
    }

    fn conversation_deps(&self, shared: &Shared, media: &MediaStore) -> ConversationDeps {
        let llm = &self.llm;
        let client = LlmClient::new(LlmConfig {
            transcription_model: llm.transcription_model.clone(),
            base_url: llm.base_url.clone(),
            api_key: llm.api_key.as_ref().map(|k| k.expose().to_owned()),
            default_model: llm.model.clone(),
            timeout: Duration::from_secs(llm.timeout_secs),
            max_retries: llm.max_retries,
            retry_backoff: Duration::from_millis(llm.retry_backoff_ms),
        });
        // Checked at start-up (`Application::build`); an unreadable list allows nothing.
        let egress = Arc::new(self.egress.policy().unwrap_or_default());
        let mcp = McpHub::new(
            egress,
            McpSettings {
                timeout: Duration::from_secs(self.mcp.timeout_secs.max(1)),
                max_response_bytes: self.mcp.max_response_bytes,
                tool_cache_ttl: Duration::from_secs(self.mcp.tool_cache_secs),
            },
            shared.secrets.clone(),
        );
        ConversationDeps {
            db: shared.db.clone(),
            writer: shared.writer.clone(),
            llm: client,
            mcp: Arc::new(mcp),
            settings: ConversationSettings {
                idle_after: self.actors.conversation_idle(),
                actor_rest: self.actors.conversation_actor_rest(),
                warm_actors: self.actors.conversation_actors_warm,
                busy_rest: Duration::from_millis(self.actors.conversation_actor_busy_rest_ms),
                actor_idle: Duration::from_secs(self.actors.conversation_actor_idle_secs),
                max_tool_rounds: llm.max_tool_rounds,
                turn_timeout: Duration::from_secs(self.actors.turn_timeout_secs),
                handoff_sweep: Duration::from_millis(self.actors.handoff_sweep_ms.max(10)),
            },
            announced: Arc::default(),
            live: LiveConversations::default(),
            events: shared.events.clone(),
            placement: shared.placement.clone(),
            media: shared.bell.clone(),
            media_store: media.clone(),
            model_slots: ModelSlots::new(self.actors.model_calls_per_workspace),
            changes: shared.changes.clone(),
            quotas: Quotas::new(
                shared.db.clone(),
                shared.writer.clone(),
                shared.events.clone(),
            ),
        }
    }

    fn channel_deps(&self, shared: &Shared) -> ChannelDeps {
        let whatsapp = &self.whatsapp;
        ChannelDeps {
            db: shared.db.clone(),
            writer: shared.writer.clone(),
            graph: GraphClient::new(
                &whatsapp.graph_url,
                Duration::from_secs(whatsapp.timeout_secs),
            ),
            secrets: shared.secrets.clone(),
            settings: ChannelSettings {
                per_second: whatsapp.rate_per_sec,
                pair_burst: whatsapp.pair_burst,
                pair_period: Duration::from_millis(whatsapp.pair_period_ms),
                max_retries: whatsapp.max_retries,
                retry_backoff: Duration::from_millis(whatsapp.retry_backoff_ms),
                public_url: self.server.public_url.clone(),
            },
            events: shared.events.clone(),
            placement: shared.placement.clone(),
        }
    }
}

/// What every part of the runtime shares, built once.
struct Shared {
    db: DatabaseConnection,
    writer: GroupCommit,
    secrets: Arc<SecretBox>,
    events: Events,
    placement: Placement,
    bell: MediaBell,
    changes: Announcer,
}
