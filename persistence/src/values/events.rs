//! The values of event webhooks: which fact an event tells of, and where a delivery stands.

use sea_orm::entity::prelude::*;
use serde::{Deserialize, Serialize};

string_values! {
    /// Where an event webhook delivery stands.
    DeliveryStatus {
        /// Not delivered yet: due at `next_attempt_at`.
        Pending = "pending",
        /// The endpoint answered 2xx.
        Succeeded = "succeeded",
        /// Its retries ran out (or its endpoint was deleted meanwhile).
        Failed = "failed",
    }
}

string_values! {
    /// Which fact an event webhook tells of.
    EventType {
        /// A person's message arrived.
        MessageReceived = "message.received",
        /// Meta accepted a message to a person.
        MessageSent = "message.sent",
        /// A message reached the person's phone.
        MessageDelivered = "message.delivered",
        /// The person read a message.
        MessageRead = "message.read",
        /// A message to a person failed.
        MessageFailed = "message.failed",
        /// A conversation was handed to a person.
        ConversationHandoff = "conversation.handoff",
        /// A conversation was given back to the assistant.
        ConversationResumed = "conversation.resumed",
        /// A conversation was assigned to an operator, or returned to the queue.
        ConversationAssigned = "conversation.assigned",
        /// A flow ended (completed, failed or cancelled).
        FlowFinished = "flow.finished",
        /// A scheduled task's run ended.
        TaskRunFinished = "task.run.finished",
        /// A person opted out of campaign templates.
        IdentityOptedOut = "identity.opted_out",
        /// A workspace reached one of its quotas.
        UsageQuotaReached = "usage.quota_reached",
    }
}
