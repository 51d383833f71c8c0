//! Domain types: request values parsed once into types that cannot hold invalid data.

mod api_key;
mod assistant_settings;
mod email;
mod instructions;
mod language;
mod name;
mod permission;
mod timezone;

pub use api_key::{ApiKeySecret, hash_api_key};
pub use assistant_settings::{AssistantSettings, InvalidSetting};
pub use email::{Email, InvalidEmail};
pub use instructions::{Instructions, InvalidInstructions};
pub use language::{InvalidLanguageTag, LanguageTag};
pub use name::{BoundedName, LongName, Name, NameError};
pub use parley_actors::memory_key::{InvalidMemoryKey, MemoryKey};
pub use parley_actors::phone::{InvalidPhone, Phone};
pub use permission::{Permission, Permissions, UnknownPermission};
pub use timezone::{InvalidTimezone, Timezone};
