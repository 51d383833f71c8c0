//! Parley's actor runtime and everything that talks to the outside world: a root supervisor
//! with one child supervisor per kind of live work (channels, conversations, flows, scheduled
//! tasks), started by `parley serve` and stopped on shutdown; the language-model client; the
//! instruction templates.
//!
//! Every spawn, failure, restart and stop is logged with the actor's path
//! (`root/conversations/identity:<uuid>`).

pub mod channel;
mod channel_registry;
pub mod conversation;
pub mod inbound;
mod live;
pub mod llm;
pub mod memory_key;
pub mod phone;
mod registry;
mod runtime;
pub mod secrets;
mod supervisor;
pub mod templating;
#[cfg(test)]
mod test_support;
pub mod whatsapp;

pub use channel_registry::Channels;
pub use conversation::{
    ConversationSettings, Deps, ToolCallRecord, TurnError, TurnOutcome, TurnRequest,
};
pub use registry::Conversations;
pub use runtime::{ActorRuntime, RuntimeError, SupervisorKind};
pub use supervisor::SupervisorSnapshot;
