//! Parley's actor runtime and everything that talks to the outside world, in floors: each
//! module imports only from the floors beneath it (a module and its own children aside).
//!
//! 1. Ground: [`tree`] (the actor tree's vocabulary: paths, supervisor kinds, the slots
//!    handles are published in, a registry's bookkeeping), [`domain`] (values parsed once),
//!    [`changes`] (what caches hold and how they hear of changes), [`measure`], and
//!    [`remembered`] (values read once and remembered a while), [`cluster`] (which partitions
//!    this node owns, the fence its claims carry, and how the owner of the rest is reached).
//! 2. Protocols, no actors: [`whatsapp`] (the Graph client, Meta's typed errors, the wire
//!    form of a message, templates, inbound payloads), [`llm`], [`mcp`], and [`egress`] (where
//!    URLs tenants give may lead).
//! 3. Facts every sender shares: [`people`] (the identity behind a phone), [`thread`] (the
//!    conversation a message belongs to), [`store`] (writes that announce their change).
//! 4. Actors, each with its supervisor and handle: [`channel`] (one per WhatsApp number), then
//!    [`outbound`] (the one way a message goes out and its reports come back), then
//!    [`conversation`] (one per live identity), [`flow`] (campaigns), and last [`inbound`]
//!    (the worker answering webhook events) and [`scheduler`] (timed tasks).
//! 5. [`runtime`]: wires the tree and holds it for the server ([`ActorRuntime`]).
//!
//! Every spawn, failure, restart and stop is logged with the actor's path
//! (`root/conversations/identity:<uuid>`), and actors handle messages inside the span of the
//! request that sent them, so a request id shows on its actors' log lines.

pub mod assignment;
pub mod changes;
pub mod channel;
pub mod cluster;
pub mod conversation;
pub mod domain;
pub mod egress;
pub mod events;
pub mod flow;
pub mod inbound;
pub mod llm;
pub mod mcp;
pub mod measure;
pub mod media;
pub mod outbound;
pub mod people;
pub mod quotas;
pub mod remembered;
pub mod runtime;
pub mod scheduler;
pub mod store;
#[cfg(test)]
mod test_support;
pub mod thread;
pub mod tree;
pub mod whatsapp;

pub use changes::Change;
pub use channel::Channels;
pub use conversation::Conversations;
pub use conversation::{
    ConversationDeps, ConversationSettings, LiveConversations, ModeChange, ToolCallRecord,
    TurnError, TurnEvent, TurnOrigin, TurnOutcome, TurnRequest,
};
pub use flow::Flows;
pub use outbound::Outbox;
pub use runtime::{ActorRuntime, RuntimeDeps};
pub use scheduler::Scheduler;
pub use tree::{ActorPath, RuntimeError, SupervisorKind, SupervisorSnapshot};
