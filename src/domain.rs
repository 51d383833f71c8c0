//! Domain types: request values parsed once into types that cannot hold invalid data.

mod api_key;
mod email;
mod instructions;
mod language;
mod name;
mod permission;
mod timezone;

pub use api_key::{ApiKeySecret, hash_api_key};
pub use email::{Email, InvalidEmail};
pub use instructions::{Instructions, InvalidInstructions};
pub use language::{InvalidLanguageTag, LanguageTag};
pub use name::{BoundedName, LongName, Name, NameError};
pub use parley_actors::domain::{
    AssistantSettings, InvalidMemoryKey, InvalidPhone, InvalidSetting, MemoryKey, Phone, TEXT_LIMIT,
};
pub use permission::{Permission, Permissions, UnknownPermission};
pub use timezone::{InvalidTimezone, Timezone};
