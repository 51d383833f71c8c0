//! The language-model client for `PROVIDER_ONE`: any OpenAI-compatible Chat Completions
//! endpoint, streaming or not, with tools, a per-call timeout and retries with backoff on 429,
//! 5xx and connection errors.

mod client;
mod fair;
mod sse;
mod transcribe;
mod types;

pub use client::{LlmClient, LlmConfig, RequestSent, TokenSink};
pub use fair::ModelSlots;
pub use types::{ChatMessage, ChatRequest, Completion, LlmError, ToolCall, ToolSpec, Usage};

/// Installs rustls' ring provider once per process; call it before building any HTTP client.
/// reqwest is built without a provider of its own so that the build needs no C toolchain beyond
/// what sqlx already uses.
pub fn install_crypto_provider() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // Another part of the process may have installed one first; either is fine.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}
