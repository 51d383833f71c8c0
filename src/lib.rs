//! Parley: a self-hostable conversational messaging service. AI assistants answer people on
//! WhatsApp Business channels, remember them across channels and move them through journey
//! stages; the same conversations can be driven over HTTP.
//!
//! This crate is the front door: configuration, the CLI, the HTTP API and start-up. Live work
//! happens in `parley-actors`; storage in `parley-persistence`.

pub mod cli;
pub mod config;
pub mod demo;
pub mod domain;
pub mod http;
mod metrics;
pub mod serve;
pub mod startup;
pub mod telemetry;
pub mod tenancy;

/// The memory allocator of every program that links Parley (the server, its tests, the
/// benches). Each live identity keeps a small, long-lived actor and cache while its turns
/// allocate and free far more; with glibc's malloc the two interleaved in per-thread arenas
/// and two thirds of a live identity's resident memory was fragmentation (heaptrack on the
/// `idle_identities` bench: about 10 KiB live heap against 31 KiB of RSS per identity).
/// mimalloc keeps allocations of a size together and returns freed pages.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;
