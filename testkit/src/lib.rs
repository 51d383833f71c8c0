//! Real HTTP fakes of the peers Parley talks to, for tests, benches and demo mode. Each fake is
//! a server on a loopback port speaking the peer's protocol, scriptable and recording what it
//! received, because the real services are not reachable from a test machine.
//!
//! - [`FakeModel`]: an OpenAI-compatible Chat Completions server (streaming and not, tool
//!   calls, latency, injected failures).
//!
//! Fakes of Meta's Graph API and of MCP servers arrive with the clients they stand in for.

mod model;

pub use model::{FakeModel, FakeToolCall, Reply};
