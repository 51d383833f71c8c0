//! An inbound WhatsApp message as received by the webhook, kept until it has been answered.

use sea_orm::entity::prelude::*;

use crate::values::EventStatus;

/// One row of `webhook_events`.
#[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
#[sea_orm(table_name = "webhook_events")]
pub struct Model {
    /// UUID v7, so events sort by arrival.
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: Uuid,
    /// Owning workspace.
    pub workspace_id: i64,
    /// The channel it arrived on.
    pub channel_id: Uuid,
    /// WhatsApp's message id (`wamid…`); unique per channel.
    pub platform_message_id: String,
    /// The message object and the sender's profile name, as Meta sent them.
    pub payload: Json,
    /// Pending until answered, then processed (or failed).
    pub status: EventStatus,
    /// Why processing failed.
    pub error: Option<String>,
    /// When the webhook delivered it.
    pub received_at: DateTimeUtc,
    /// When it was answered.
    pub processed_at: Option<DateTimeUtc>,
    /// Processing attempts that ended in a transient failure.
    pub attempts: i32,
    /// When a failed attempt may be retried; `None` for a fresh event.
    pub next_attempt_at: Option<DateTimeUtc>,
}

/// Relations are expressed through explicit queries.
#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
