//! The WhatsApp Cloud API: the Graph API client, webhook signatures and the inbound payload.

pub mod graph;
pub mod message;
pub mod payload;
pub mod signature;
pub mod status;

pub use graph::{GraphClient, GraphError};
