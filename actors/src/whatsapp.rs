//! The WhatsApp Cloud API: the Graph API client and Meta's typed errors, what a message is on
//! the wire (text or a template) and how templates are found and rendered, webhook
//! signatures, and the inbound payload (messages and status reports).

pub mod error;
pub mod graph;
pub mod media_request;
pub mod message;
pub mod outgoing;
pub mod payload;
pub mod signature;
pub mod status;
pub mod template;
mod text;

pub use error::{MetaError, MetaErrorKind};
pub use graph::{GraphClient, GraphError};
pub use outgoing::{Author, OutboundContent, Outgoing, OutgoingMedia, TemplateMessage};
pub use template::{
    RenderedTemplate, TemplateParameters, TemplateRef, render_body, wire_components,
};
