//! Parley: a self-hostable conversational messaging service. AI assistants answer people on
//! WhatsApp Business channels, remember them across channels and move them through journey
//! stages; the same conversations can be driven over HTTP.
//!
//! This crate is the front door: configuration, the CLI, the HTTP API and start-up. Live work
//! happens in `parley-actors`; storage in `parley-persistence`.

pub mod cli;
pub mod config;
pub mod demo;
pub use parley_actors::domain;
pub mod http;
pub mod huge_pages;
mod invitations;
mod mail;
mod metrics;
pub mod serve;
pub mod startup;
pub mod telemetry;
pub mod tenancy;
mod tokens;
