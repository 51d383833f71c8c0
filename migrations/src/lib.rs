//! Parley's database schema as an ordered list of sea-orm-migration steps.
//!
//! One dated file per step; a step that has been released is never edited, a later step changes
//! it. The same steps run on SQLite and PostgreSQL, so they use only portable column types.

pub use sea_orm_migration::prelude::*;

mod m20261122_000001_tenancy;
mod m20261122_000002_core_resources;
mod m20261122_000003_whatsapp;
mod m20261123_000004_outbound_and_retries;
mod m20261123_000005_idempotency_and_history;
mod m20261123_000006_verified_numbers;
mod m20261123_000007_mcp_servers;
mod m20261123_000008_campaigns_and_flows;
mod m20261123_000009_scheduled_tasks;
mod m20261124_000010_conversation_activity;
mod m20261125_000011_one_open_conversation;
mod m20261125_000012_campaigns_kept;
mod m20261126_000013_handoff;
mod m20261126_000014_event_webhooks;
mod m20261126_000015_cluster;
mod m20261127_000016_partial_message_indexes;
mod m20261127_000017_health_probe;
mod m20261127_000018_attachments;
mod m20261127_000019_workspace_media_retention;
mod m20261127_000020_usage_and_quotas;
mod m20261128_000021_operators;
mod m20261129_000022_active_tasks_index;
mod m20261201_000023_conversation_tokens;
mod m20261207_000024_pending_event_deliveries;

/// Applies Parley's migrations in order; `parley serve` and `parley migrate` run it.
#[derive(Debug)]
pub struct Migrator;

#[async_trait::async_trait]
impl MigratorTrait for Migrator {
    fn migrations() -> Vec<Box<dyn MigrationTrait>> {
        vec![
            Box::new(m20261122_000001_tenancy::Migration),
            Box::new(m20261122_000002_core_resources::Migration),
            Box::new(m20261122_000003_whatsapp::Migration),
            Box::new(m20261123_000004_outbound_and_retries::Migration),
            Box::new(m20261123_000005_idempotency_and_history::Migration),
            Box::new(m20261123_000006_verified_numbers::Migration),
            Box::new(m20261123_000007_mcp_servers::Migration),
            Box::new(m20261123_000008_campaigns_and_flows::Migration),
            Box::new(m20261123_000009_scheduled_tasks::Migration),
            Box::new(m20261124_000010_conversation_activity::Migration),
            Box::new(m20261125_000011_one_open_conversation::Migration),
            Box::new(m20261125_000012_campaigns_kept::Migration),
            Box::new(m20261126_000013_handoff::Migration),
            Box::new(m20261126_000014_event_webhooks::Migration),
            Box::new(m20261126_000015_cluster::Migration),
            Box::new(m20261127_000016_partial_message_indexes::Migration),
            Box::new(m20261127_000017_health_probe::Migration),
            Box::new(m20261127_000018_attachments::Migration),
            Box::new(m20261127_000019_workspace_media_retention::Migration),
            Box::new(m20261127_000020_usage_and_quotas::Migration),
            Box::new(m20261128_000021_operators::Migration),
            Box::new(m20261129_000022_active_tasks_index::Migration),
            Box::new(m20261201_000023_conversation_tokens::Migration),
            Box::new(m20261207_000024_pending_event_deliveries::Migration),
        ]
    }
}
