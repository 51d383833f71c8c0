//! Parley's persistence: connecting to SQLite or PostgreSQL, running migrations, the sea-orm
//! entities, and one module of query functions per aggregate.
//!
//! Query functions take `&impl ConnectionTrait` so that callers can run several of them inside
//! one transaction. Every query on a workspace resource is scoped by `workspace_id`.

pub mod api_keys;
pub mod assistants;
pub mod attachments;
pub mod campaigns;
pub mod channels;
pub mod clock;
pub mod cluster;
mod connection;
pub mod conversations;
pub mod deliveries;
pub mod entities;
mod error;
pub mod event_deliveries;
pub mod event_webhooks;
pub mod flows;
mod group_commit;
pub mod handoff;
pub mod health;
pub mod idempotency;
pub mod identities;
pub mod inbox;
pub mod mcp_servers;
pub mod memory;
pub mod one_call;
pub mod operators;
mod page;
pub mod sandbox_templates;
pub mod scheduled_tasks;
mod shape;
pub mod stages;
pub mod tenancy;
#[cfg(test)]
mod test_support;
pub mod usage;
pub mod values;
pub mod webhook_events;
pub mod workers;
pub mod workspaces;

pub use connection::{
    Checkpoints, WriteBehind, begin_write, checkpoint_connection, connect, migrate,
    pool_connections, sqlite_url_in,
};
pub use error::PersistenceError;
pub use group_commit::{GroupCommit, Merged, WRITE_BATCH, Writes};
pub use page::{Cursor, CursorPage, Page, Paged};
pub use sea_orm::{
    ConnectionTrait, DatabaseConnection, DatabaseExecutor, DatabaseTransaction, DbBackend,
    TransactionTrait,
};
pub use values::{
    CampaignStatus, ContactKind, ConversationMode, ConversationStatus, DeliveryStatus, Direction,
    EventStatus, EventType, FailureReason, FlowStatus, Integration, McpTransport, MessageStatus,
    ParamsStrategy, RecipientStatus, Role, RunStatus, SkipReason, TaskStatus, TaskType,
};

/// Result of a persistence operation.
pub type Result<T, E = PersistenceError> = std::result::Result<T, E>;
