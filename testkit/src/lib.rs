//! Real HTTP fakes of the peers Parley talks to, for tests, benches and demo mode. Each fake is
//! a server on a loopback port speaking the peer's protocol, scriptable and recording what it
//! received, because the real services are not reachable from a test machine.
//!
//! - [`FakeModel`]: an OpenAI-compatible Chat Completions server (streaming and not, tool
//!   calls, latency, injected failures).
//! - [`FakeGraph`]: Meta's Graph API for messages, templates and webhook registration, with
//!   Meta's rate limits, and signed webhook delivery to Parley.
//!
//! A fake of MCP servers arrives with the MCP client.

pub mod graph;
mod model;

pub use graph::{FakeGraph, SentMessage};
pub use model::{FakeModel, FakeToolCall, Reply};
