//! Domain types: request values parsed once into types that cannot hold invalid data.

mod api_key;
mod name;
mod permission;

pub use api_key::{ApiKeySecret, hash_api_key};
pub use name::{Name, NameError};
pub use permission::{Permission, Permissions, UnknownPermission};
