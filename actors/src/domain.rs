//! Parley's one domain module: values parsed once into types that cannot hold invalid data
//! (phone numbers, e-mails, memory keys, names, language tags, timezones, permissions, API
//! key secrets, assistant instructions and settings), and the primitives around them (secrets
//! at rest, instruction templates). The API parses request values into these; the actors read
//! them.

mod api_key;
pub mod assistant_settings;
mod email;
mod instructions;
mod language;
pub mod memory_key;
mod name;
mod permission;
pub mod phone;
pub mod secrets;
pub mod templating;
mod timezone;

pub use api_key::{ApiKeySecret, hash_api_key};
pub use assistant_settings::{AssistantSettings, InvalidSetting};
pub use email::{Email, InvalidEmail};
pub use instructions::{Instructions, InvalidInstructions};
pub use language::{InvalidLanguageTag, LanguageTag};
pub use memory_key::{InvalidMemoryKey, MemoryKey};
pub use name::{BoundedName, LongName, Name, NameError};
pub use permission::{Permission, Permissions, UnknownPermission};
pub use phone::{InvalidPhone, Phone};
pub use secrets::SecretBox;
pub use timezone::{InvalidTimezone, Timezone};

/// Largest free-form JSON value (metadata, a description object, a task's configuration or
/// parameters), in bytes as JSON: bounded so that a list page of them stays small and one
/// tenant cannot fill the server's memory with another's requests waiting.
pub const FREE_FORM_LIMIT: usize = 16 * 1024;

/// Whether `value`, written as JSON, is within [`FREE_FORM_LIMIT`].
pub fn within_free_form_limit(value: &serde_json::Value) -> bool {
    serde_json::to_vec(value).is_ok_and(|json| json.len() <= FREE_FORM_LIMIT)
}

/// Longest text WhatsApp takes in one message, in characters; chat messages, sandbox text and
/// fallback messages share it.
pub const TEXT_LIMIT: usize = 4096;
