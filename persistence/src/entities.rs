//! sea-orm entities, one per table. Rows only; the rules live in the query modules and above.

pub mod api_key;
pub mod assistant;
pub mod assistant_mcp_server;
pub mod business;
pub mod campaign;
pub mod channel;
pub mod contact_point;
pub mod conversation;
pub mod flow;
pub mod flow_recipient;
pub mod idempotency_key;
pub mod identity;
pub mod identity_stage;
pub mod mcp_server;
pub mod memory_entry;
pub mod message;
pub mod sandbox_template;
pub mod scheduled_task;
pub mod scheduled_task_run;
pub mod stage;
pub mod user;
pub mod webhook_event;
pub mod worker;
pub mod workspace;
pub mod workspace_member;
