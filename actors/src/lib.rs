//! Parley's actor runtime and everything that talks to the outside world.
//!
//! - [`runtime`]: the supervised tree (root → channels, conversations, inbound, flows,
//!   scheduler) and [`ActorRuntime`], the one handle the server holds.
//! - [`conversation`]: one actor per live identity, running the assistant's turns.
//! - [`channel`]: one actor per WhatsApp number, owning its limits and the Graph API.
//! - [`inbound`]: the bounded worker answering stored webhook events.
//! - [`outbound`]: the one way to send a message to a person.
//! - [`people`]: the identity behind a phone number.
//! - [`changes`]: how writes tell live actors that what they cache changed.
//! - [`remembered`]: values read once and remembered for a while, read again ahead of expiry.
//! - [`llm`], [`whatsapp`], [`mcp`]: protocol clients, no actors.
//! - [`domain`]: values parsed once (phones, memory keys, assistant settings) and the
//!   primitives around them.
//!
//! Every spawn, failure, restart and stop is logged with the actor's path
//! (`root/conversations/identity:<uuid>`), and actors handle messages inside the span of the
//! request that sent them, so a request id shows on its actors' log lines.

pub mod changes;
pub mod channel;
pub mod conversation;
pub mod domain;
pub mod flow;
pub mod inbound;
pub mod llm;
pub mod mcp;
pub mod measure;
pub mod outbound;
pub mod people;
pub mod remembered;
pub mod runtime;
pub mod schedule;
#[cfg(test)]
mod test_support;
pub mod whatsapp;

pub use changes::Change;
pub use channel::registry::Channels;
pub use conversation::registry::Conversations;
pub use conversation::{
    ConversationDeps, ConversationSettings, ToolCallRecord, TurnError, TurnEvent, TurnOrigin,
    TurnOutcome, TurnRequest,
};
pub use flow::registry::Flows;
pub use outbound::Outbox;
pub use runtime::{
    ActorPath, ActorRuntime, RuntimeDeps, RuntimeError, SupervisorKind, SupervisorSnapshot,
};
pub use schedule::Scheduler;
