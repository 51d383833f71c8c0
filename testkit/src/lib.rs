//! Real HTTP fakes of the peers Parley talks to: Meta's Graph API, an OpenAI-compatible model
//! server and MCP servers. Tests, benches and demo mode use them in place of the real services,
//! which are not reachable from a test machine.
//!
//! The fakes arrive with the issues that add the clients they stand in for; this crate exists
//! now so that the workspace layout is the final one.
