//! Parley's load harness and micro-benchmarks. Every benchmark reports its result next to a
//! baseline measured in the same run, because shared machines are noisy.
//!
//! The harnesses arrive with the features they measure (chat turns, webhook-to-reply
//! throughput); this crate exists now so that the workspace layout is the final one.
