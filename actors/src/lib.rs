//! Parley's actor runtime: a root supervisor with one child supervisor per kind of live work
//! (channels, conversations, flows, scheduled tasks), started by `parley serve` and stopped on
//! shutdown.
//!
//! The children are thin for now; later work fills each supervisor with its actors. What is fixed
//! here is the shape of the tree, the logging of every spawn, failure, restart and stop by actor
//! path, and restart with backoff.

pub mod llm;
mod runtime;
mod supervisor;

pub use runtime::{ActorRuntime, RuntimeError, SupervisorKind};
pub use supervisor::SupervisorSnapshot;
