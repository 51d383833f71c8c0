//! The closed sets of values Parley stores as strings: channel integrations, MCP transports,
//! message directions, roles and statuses, conversation and webhook-event statuses, contact
//! kinds, campaign, flow, recipient and task states. Each is declared once through
//! [`string_values!`], so that sea-orm reads and writes it as its string, serde and the OpenAPI
//! document speak the same string, and no other crate spells these values.

use sea_orm::entity::prelude::*;
use serde::{Deserialize, Serialize};

/// Declares an enum stored and spoken as fixed strings, with `ALL`, `as_str` and `parse`.
///
/// The OpenAPI schema is written here rather than derived: `utoipa`'s derive does not see a
/// `serde(rename)` whose value comes through a macro, and would document the Rust names.
macro_rules! string_values {
    ($(#[doc = $doc:literal])* $name:ident { $($(#[$vmeta:meta])* $variant:ident = $text:literal),+ $(,)? }) => {
        $(#[doc = $doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, EnumIter, DeriveActiveEnum, Serialize, Deserialize)]
        #[sea_orm(rs_type = "String", db_type = "String(StringLen::None)")]
        pub enum $name {
            $($(#[$vmeta])* #[sea_orm(string_value = $text)] #[serde(rename = $text)] $variant,)+
        }

        impl $name {
            /// Every value, in declaration order.
            pub const ALL: [Self; [$($text),+].len()] = [$(Self::$variant),+];

            /// The wire and storage name.
            pub fn as_str(self) -> &'static str {
                match self { $(Self::$variant => $text,)+ }
            }

            /// The value named `name`, if it is one.
            pub fn parse(name: &str) -> Option<Self> {
                Self::ALL.into_iter().find(|v| v.as_str() == name)
            }
        }

        impl utoipa::PartialSchema for $name {
            fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
                let description: &str = concat!($($doc, "\n"),*);
                utoipa::openapi::schema::ObjectBuilder::new()
                    .schema_type(utoipa::openapi::schema::Type::String)
                    .enum_values(Some(Self::ALL.map(Self::as_str)))
                    .description(Some(description.lines().map(str::trim).collect::<Vec<_>>().join(" ").trim().to_owned()))
                    .into()
            }
        }

        impl utoipa::ToSchema for $name {}
    };
}

mod events;
mod media;
mod work;

pub use self::events::{DeliveryStatus, EventType};
pub use self::media::{AttachmentStatus, MediaKind};
pub use self::work::{
    CampaignStatus, FailureReason, FlowStatus, ParamsStrategy, RecipientStatus, RunStatus,
    SkipReason, TaskStatus, TaskType,
};

string_values! {
    /// How a channel reaches WhatsApp.
    Integration {
        /// Meta's WhatsApp Cloud API.
        CloudApi = "cloud_api",
        /// The Cloud API, with marketing templates sent to Meta's marketing-messages endpoint.
        MmLite = "mm_lite",
        /// No Meta at all: sends are recorded and reported delivered; inbound is injected.
        Sandbox = "sandbox",
    }
}

impl Integration {
    /// Whether sends go to Meta (every integration but the sandbox).
    pub fn is_live(self) -> bool {
        self != Self::Sandbox
    }
}

string_values! {
    /// How Parley speaks to an MCP server.
    McpTransport {
        /// The specification's contract: `GET {url}/tools`, `POST {url}/call`.
        Http = "http",
        /// The Model Context Protocol over Streamable HTTP (both its session and its
        /// stateless revisions).
        StreamableHttp = "streamable-http",
    }
}

string_values! {
    /// Which way a message went.
    Direction {
        /// From the person.
        Inbound = "inbound",
        /// To the person (or a tool result kept in the thread).
        Outbound = "outbound",
    }
}

string_values! {
    /// Who wrote a message (the names chat-completion APIs use).
    Role {
        /// The person.
        User = "user",
        /// The assistant (or the business, for templates).
        Assistant = "assistant",
        /// A tool's result.
        Tool = "tool",
        /// A person of the business, writing through the console or the API while the
        /// conversation was handed to them.
        Operator = "operator",
        /// A note for the model, stored in the conversation (a person handled it for a while).
        System = "system",
    }
}

string_values! {
    /// Where a message stands. Outbound statuses only move forward (see
    /// [`MessageStatus::rank`]).
    MessageStatus {
        /// An inbound message, stored.
        Received = "received",
        /// Outbound, stored, waiting for its channel to send it.
        Pending = "pending",
        /// Outbound, an HTTP attempt to Meta is under way; found at start-up, it may have
        /// reached Meta.
        Sending = "sending",
        /// Accepted by Meta (or answered to an API caller).
        Sent = "sent",
        /// Delivered to the person's phone.
        Delivered = "delivered",
        /// Read by the person.
        Read = "read",
        /// Not sent, or reported failed by Meta.
        Failed = "failed",
    }
}

impl MessageStatus {
    /// Rank of a delivery status; a status only ever moves to a higher rank.
    pub fn rank(self) -> u8 {
        match self {
            Self::Received | Self::Pending | Self::Sending => 0,
            Self::Sent => 1,
            Self::Delivered => 2,
            Self::Read => 3,
            Self::Failed => 4,
        }
    }

    /// The statuses a report of `self` may replace.
    pub fn lower(self) -> Vec<Self> {
        [
            Self::Pending,
            Self::Sending,
            Self::Sent,
            Self::Delivered,
            Self::Read,
        ]
        .into_iter()
        .filter(|s| s.rank() < self.rank())
        .collect()
    }
}

string_values! {
    /// Whether a conversation still takes messages.
    ConversationStatus {
        /// Takes messages.
        Open = "open",
        /// Idle past `conversation_idle_hours`, or its channel was deleted.
        Closed = "closed",
    }
}

string_values! {
    /// Who answers a conversation.
    ConversationMode {
        /// The assistant answers every message.
        Assistant = "assistant",
        /// A person has taken it over: messages are stored, the assistant stays quiet.
        Human = "human",
    }
}

string_values! {
    /// Where an inbound webhook event stands.
    EventStatus {
        /// Stored, not yet answered.
        Pending = "pending",
        /// Answered.
        Processed = "processed",
        /// Cannot be answered; kept for operators.
        Failed = "failed",
    }
}

string_values! {
    /// What a contact point of an identity is.
    ContactKind {
        /// A phone number, in E.164.
        Phone = "phone",
        /// An e-mail address, lower-cased.
        Email = "email",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delivery_statuses_only_move_forward() {
        assert!(MessageStatus::Read.rank() > MessageStatus::Delivered.rank());
        assert!(MessageStatus::Failed.rank() > MessageStatus::Read.rank());
        assert_eq!(
            MessageStatus::Delivered.lower(),
            [
                MessageStatus::Pending,
                MessageStatus::Sending,
                MessageStatus::Sent
            ]
        );
    }

    #[test]
    fn names_round_trip() {
        for status in MessageStatus::ALL {
            assert_eq!(MessageStatus::parse(status.as_str()), Some(status));
        }
        for integration in Integration::ALL {
            assert_eq!(Integration::parse(integration.as_str()), Some(integration));
        }
        assert_eq!(Integration::parse("whatsapp"), None);
    }
}
