//! The WhatsApp Cloud API: the Graph API client, webhook signatures and the inbound payload.

pub mod graph;
pub mod payload;
pub mod signature;

pub use graph::{GraphClient, GraphError};
