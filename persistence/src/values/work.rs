//! The values of campaigns, flows and scheduled tasks: the work Parley does on a schedule.

use sea_orm::entity::prelude::*;
use serde::{Deserialize, Serialize};

use super::MessageStatus;

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
