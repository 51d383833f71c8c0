//! Real HTTP fakes of the peers Parley talks to, for tests and benches. Each fake is
//! a server on a loopback port speaking the peer's protocol, scriptable and recording what it
//! received, because the real services are not reachable from a test machine.
//!
//! - [`FakeModel`]: an OpenAI-compatible Chat Completions server (streaming and not, tool
//!   calls, latency, injected failures).
//! - [`FakeGraph`]: Meta's Graph API for messages, templates and webhook registration, with
//!   Meta's rate limits, and signed webhook delivery to Parley.
//!
//! - [`FakeMcp`]: MCP servers, of the specification's `http` contract and of the Model
//!   Context Protocol over Streamable HTTP (rmcp's server, stateless or with sessions).
//!
//! And [`process::serve`]: `parley serve` as a process of its own, for what kills, freezes or
//! clusters real servers ([`process::Served`]: one with a data directory of its own, killed
//! when dropped).

pub mod graph;
mod mcp;
mod model;
pub mod process;

pub use graph::{FakeGraph, SentMessage};
pub use mcp::{FakeMcp, McpFlavour, McpRequest, ToolBehaviour};
pub use model::{FakeModel, FakeToolCall, Reply, StreamTimes, Transcription};
