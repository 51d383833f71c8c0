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
mod swept_settings;
pub mod templating;
mod timezone;

pub use api_key::{ApiKeySecret, hash_api_key};
pub use assistant_settings::{AssistantSettings, InvalidSetting};
pub use email::{Email, InvalidEmail};
pub use instructions::{Instructions, InvalidInstructions};
pub use language::{InvalidLanguageTag, LanguageTag, is_template_language};
pub use memory_key::{InvalidMemoryKey, MemoryKey};
pub use name::{BoundedName, LongName, Name, NameError};
pub use permission::{Permission, Permissions, UnknownPermission};
pub use phone::{InvalidPhone, Phone};
pub use secrets::SecretBox;
pub(crate) use swept_settings::SweptSettings;
pub use timezone::{InvalidTimezone, Timezone};

/// The default of the largest free-form JSON value (metadata, a description object, a task's
/// configuration or parameters), in bytes as JSON: bounded so that a list page of them stays
/// small and one tenant cannot fill the server's memory with requests waiting.
pub const FREE_FORM_LIMIT: usize = 16 * 1024;

/// The limit in force: one per process (`server.max_field_bytes`), set at start-up.
static FREE_FORM_BYTES: std::sync::atomic::AtomicUsize =
    std::sync::atomic::AtomicUsize::new(FREE_FORM_LIMIT);

/// Sets the largest free-form value this process accepts (at start-up; at least 1 KiB).
pub fn set_free_form_limit(bytes: usize) {
    FREE_FORM_BYTES.store(bytes.max(1024), std::sync::atomic::Ordering::Relaxed);
}

/// The largest free-form value this process accepts, in bytes as JSON.
pub fn free_form_limit() -> usize {
    FREE_FORM_BYTES.load(std::sync::atomic::Ordering::Relaxed)
}

/// Whether `value`, written as JSON, is within [`free_form_limit`].
pub fn within_free_form_limit(value: &serde_json::Value) -> bool {
    serde_json::to_vec(value).is_ok_and(|json| json.len() <= free_form_limit())
}

/// Longest text WhatsApp takes in one message, in characters; chat messages, sandbox text and
/// fallback messages share it.
pub const TEXT_LIMIT: usize = 4096;
