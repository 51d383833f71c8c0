//! Values both the API and the actors read, parsed once into types that cannot hold invalid
//! data: phone numbers, memory keys, assistant settings; and the primitives around them
//! (secrets at rest, instruction templates).

pub mod assistant_settings;
pub mod memory_key;
pub mod phone;
pub mod secrets;
pub mod templating;

pub use assistant_settings::{AssistantSettings, InvalidSetting};
pub use memory_key::{InvalidMemoryKey, MemoryKey};
pub use phone::{InvalidPhone, Phone};
pub use secrets::SecretBox;

/// Longest text WhatsApp takes in one message, in characters; chat messages, sandbox text and
/// fallback messages share it.
pub const TEXT_LIMIT: usize = 4096;
