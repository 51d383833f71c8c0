//! The closed sets of values Parley stores as strings: channel integrations, message
//! directions, roles and statuses, conversation and webhook-event statuses. Each is an enum
//! that sea-orm reads and writes as its string, so no other crate spells these values.

use sea_orm::entity::prelude::*;
use serde::{Deserialize, Serialize};

/// How a channel reaches WhatsApp.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, EnumIter, DeriveActiveEnum, Serialize, Deserialize,
)]
#[sea_orm(rs_type = "String", db_type = "String(StringLen::None)")]
#[serde(rename_all = "snake_case")]
pub enum Integration {
    /// Meta's WhatsApp Cloud API.
    #[sea_orm(string_value = "cloud_api")]
    CloudApi,
    /// The Cloud API, with marketing templates sent to Meta's marketing-messages endpoint.
    #[sea_orm(string_value = "mm_lite")]
    MmLite,
    /// No Meta at all: sends are recorded and reported delivered; inbound is injected.
    #[sea_orm(string_value = "sandbox")]
    Sandbox,
}

impl Integration {
    /// Every integration, in the order the API lists them.
    pub const ALL: [Self; 3] = [Self::CloudApi, Self::MmLite, Self::Sandbox];

    /// The wire and storage name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::CloudApi => "cloud_api",
            Self::MmLite => "mm_lite",
            Self::Sandbox => "sandbox",
        }
    }

    /// The integration named `name`, if it is one.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|i| i.as_str() == name)
    }

    /// Whether sends go to Meta (every integration but the sandbox).
    pub fn is_live(self) -> bool {
        self != Self::Sandbox
    }
}

/// How Parley speaks to an MCP server.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, EnumIter, DeriveActiveEnum, Serialize, Deserialize,
)]
#[sea_orm(rs_type = "String", db_type = "String(StringLen::None)")]
pub enum McpTransport {
    /// The specification's contract: `GET {url}/tools`, `POST {url}/call`.
    #[sea_orm(string_value = "http")]
    #[serde(rename = "http")]
    Http,
    /// The Model Context Protocol over Streamable HTTP (both its session and its stateless
    /// revisions).
    #[sea_orm(string_value = "streamable-http")]
    #[serde(rename = "streamable-http")]
    StreamableHttp,
}

impl McpTransport {
    /// The wire and storage name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Http => "http",
            Self::StreamableHttp => "streamable-http",
        }
    }

    /// The transport named `name`, if it is one.
    pub fn parse(name: &str) -> Option<Self> {
        [Self::Http, Self::StreamableHttp]
            .into_iter()
            .find(|t| t.as_str() == name)
    }
}

/// Which way a message went.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, EnumIter, DeriveActiveEnum, Serialize, Deserialize,
)]
#[sea_orm(rs_type = "String", db_type = "String(StringLen::None)")]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    /// From the person.
    #[sea_orm(string_value = "inbound")]
    Inbound,
    /// To the person (or a tool result kept in the thread).
    #[sea_orm(string_value = "outbound")]
    Outbound,
}

/// Who wrote a message.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, EnumIter, DeriveActiveEnum, Serialize, Deserialize,
)]
#[sea_orm(rs_type = "String", db_type = "String(StringLen::None)")]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// The person.
    #[sea_orm(string_value = "user")]
    User,
    /// The assistant (or the business, for templates).
    #[sea_orm(string_value = "assistant")]
    Assistant,
    /// A tool's result.
    #[sea_orm(string_value = "tool")]
    Tool,
}

impl Role {
    /// The name chat-completion APIs use.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::User => "user",
            Self::Assistant => "assistant",
            Self::Tool => "tool",
        }
    }
}

/// Where a message stands. Outbound statuses only move forward (see [`MessageStatus::rank`]).
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, EnumIter, DeriveActiveEnum, Serialize, Deserialize,
)]
#[sea_orm(rs_type = "String", db_type = "String(StringLen::None)")]
#[serde(rename_all = "snake_case")]
pub enum MessageStatus {
    /// An inbound message, stored.
    #[sea_orm(string_value = "received")]
    Received,
    /// Outbound, stored, waiting for its channel to send it.
    #[sea_orm(string_value = "pending")]
    Pending,
    /// Outbound, an HTTP attempt to Meta is under way; found at start-up, it may have reached
    /// Meta.
    #[sea_orm(string_value = "sending")]
    Sending,
    /// Accepted by Meta (or answered to an API caller).
    #[sea_orm(string_value = "sent")]
    Sent,
    /// Delivered to the person's phone.
    #[sea_orm(string_value = "delivered")]
    Delivered,
    /// Read by the person.
    #[sea_orm(string_value = "read")]
    Read,
    /// Not sent, or reported failed by Meta.
    #[sea_orm(string_value = "failed")]
    Failed,
}

impl MessageStatus {
    /// Every status.
    pub const ALL: [Self; 7] = [
        Self::Received,
        Self::Pending,
        Self::Sending,
        Self::Sent,
        Self::Delivered,
        Self::Read,
        Self::Failed,
    ];

    /// The wire and storage name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Received => "received",
            Self::Pending => "pending",
            Self::Sending => "sending",
            Self::Sent => "sent",
            Self::Delivered => "delivered",
            Self::Read => "read",
            Self::Failed => "failed",
        }
    }

    /// The status named `name`, if it is one.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.as_str() == name)
    }

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

/// Whether a conversation still takes messages.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, EnumIter, DeriveActiveEnum, Serialize, Deserialize,
)]
#[sea_orm(rs_type = "String", db_type = "String(StringLen::None)")]
#[serde(rename_all = "snake_case")]
pub enum ConversationStatus {
    /// Takes messages.
    #[sea_orm(string_value = "open")]
    Open,
    /// Idle past `conversation_idle_hours`, or its channel was deleted.
    #[sea_orm(string_value = "closed")]
    Closed,
}

/// Where an inbound webhook event stands.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, EnumIter, DeriveActiveEnum, Serialize, Deserialize,
)]
#[sea_orm(rs_type = "String", db_type = "String(StringLen::None)")]
#[serde(rename_all = "snake_case")]
pub enum EventStatus {
    /// Stored, not yet answered.
    #[sea_orm(string_value = "pending")]
    Pending,
    /// Answered.
    #[sea_orm(string_value = "processed")]
    Processed,
    /// Cannot be answered; kept for operators.
    #[sea_orm(string_value = "failed")]
    Failed,
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
