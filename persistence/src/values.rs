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

string_values! {
    /// Whether a campaign may start flows (`ACTIVE` and `DEPRECATED` may).
    CampaignStatus {
        /// Can be used in flows.
        Active = "ACTIVE",
        /// Pending approval or setup.
        Pending = "PENDING",
        /// Still works but not recommended.
        Deprecated = "DEPRECATED",
        /// Inactive.
        Inactive = "INACTIVE",
        /// Cannot be used.
        Blocked = "BLOCKED",
    }
}

impl CampaignStatus {
    /// Whether flows of this campaign may start.
    pub fn is_usable(self) -> bool {
        matches!(self, Self::Active | Self::Deprecated)
    }
}

string_values! {
    /// How a campaign fills its template's parameters.
    ParamsStrategy {
        /// The template's example values.
        UseDefault = "USE_DEFAULT",
        /// Expressions read against each recipient's identity.
        UseContactAssociation = "USE_CONTACT_ASSOCIATION",
    }
}

string_values! {
    /// Where a flow stands (DESIGN §5 "Flows" has the moves).
    FlowStatus {
        /// Created, not started.
        Draft = "draft",
        /// Ready to run; its actor starts it.
        Queued = "queued",
        /// Sending.
        Running = "running",
        /// Sending stopped until resumed.
        Paused = "paused",
        /// Every recipient delivered or read.
        Completed = "completed",
        /// Some delivered or read, some not.
        PartialCompleted = "partial_completed",
        /// Cancelled by a user.
        Cancelled = "cancelled",
        /// Nobody received it.
        Failed = "failed",
        /// A fatal channel or campaign problem.
        Error = "error",
        /// Sent, but no delivery confirmed within the timeout.
        Timeout = "timeout",
    }
}

impl FlowStatus {
    /// Whether a FlowActor owns a flow in this status.
    pub fn is_live(self) -> bool {
        matches!(self, Self::Queued | Self::Running | Self::Paused)
    }

    /// Whether a user may move a flow from `self` to `to` (the automatic ends are the
    /// actor's alone).
    pub fn may_move_to(self, to: Self) -> bool {
        use FlowStatus::{Cancelled, Draft, Paused, Queued, Running};
        matches!(
            (self, to),
            (Draft, Queued | Cancelled)
                | (Queued, Paused | Cancelled)
                | (Running, Paused | Cancelled)
                | (Paused, Running | Cancelled)
        )
    }
}

string_values! {
    /// Where one recipient of a flow stands; moves forward only.
    RecipientStatus {
        /// Not tried yet, or waiting to be retried.
        Pending = "pending",
        /// Claimed: a send is under way (found at start-up: failed `interrupted`).
        Sending = "sending",
        /// Accepted by Meta.
        Sent = "sent",
        /// Delivered to the phone.
        Delivered = "delivered",
        /// Read.
        Read = "read",
        /// Not sent, or reported failed.
        Failed = "failed",
        /// Not sent on purpose (opted out, a parameter without a value).
        Skipped = "skipped",
    }
}

impl RecipientStatus {
    /// The recipient status a delivery report moves a sent template to.
    pub fn of_delivery(status: MessageStatus) -> Option<Self> {
        match status {
            MessageStatus::Sent => Some(Self::Sent),
            MessageStatus::Delivered => Some(Self::Delivered),
            MessageStatus::Read => Some(Self::Read),
            MessageStatus::Failed => Some(Self::Failed),
            _ => None,
        }
    }
}

string_values! {
    /// What a scheduled task does.
    TaskType {
        /// Free text to an identity on a channel (inside the 24-hour window).
        SendMessage = "send_message",
        /// A template to an identity on a channel.
        SendTemplate = "send_template",
        /// Creates and queues a campaign flow.
        StartFlow = "start_flow",
        /// Moves an identity to a stage.
        SetStage = "set_stage",
        /// The identity's assistant writes a message with the given instructions, and it is sent.
        AssistantFollowup = "assistant_followup",
    }
}

string_values! {
    /// Where a scheduled task stands.
    TaskStatus {
        /// Waiting for its time.
        Scheduled = "scheduled",
        /// Held until resumed.
        Paused = "paused",
        /// Running now.
        Running = "running",
        /// Ran (a one-off task).
        Completed = "completed",
        /// Its run failed (a one-off task).
        Failed = "failed",
    }
}

string_values! {
    /// How one run of a scheduled task went.
    RunStatus {
        /// Executing (found at start-up: failed `interrupted`).
        Running = "running",
        /// Done.
        Succeeded = "succeeded",
        /// Failed, with its error.
        Failed = "failed",
    }
}

string_values! {
    /// Why a flow recipient was skipped (its `error`).
    SkipReason {
        /// The identity was deleted after the flow was created.
        IdentityDeleted = "identity_deleted",
        /// The person opted out of campaign templates.
        OptedOut = "opted_out",
        /// The identity has no phone number.
        NoPhone = "no_phone",
        /// A template parameter has no value for this person.
        MissingParameter = "missing_parameter",
    }
}

string_values! {
    /// Why Parley itself failed a message, a flow recipient or a task run (its `error`).
    FailureReason {
        /// Caught mid-send (or mid-run) by a stop: it may have reached Meta, so it is never
        /// sent (or run) again.
        Interrupted = "interrupted",
        /// The campaign's template does not exist at Meta.
        TemplateNotFound = "template_not_found",
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
