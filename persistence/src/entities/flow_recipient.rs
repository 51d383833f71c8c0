//! One recipient of a flow and its progress: a restarted flow continues from these rows.

use sea_orm::entity::prelude::*;

use crate::values::RecipientStatus;

/// One row of `flow_recipients`.
#[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
#[sea_orm(table_name = "flow_recipients")]
pub struct Model {
    /// UUID v7.
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: Uuid,
    /// Its flow.
    pub flow_id: Uuid,
    /// Order of sending (the order of `contactUids`).
    pub position: i64,
    /// The identity it reaches.
    pub identity_id: Uuid,
    /// The contact as the flow's creator wrote it (`contactUid`).
    pub contact: String,
    /// Where it stands.
    pub status: RecipientStatus,
    /// Sends tried.
    pub attempts: i32,
    /// The outbound message of the latest attempt.
    pub message_id: Option<Uuid>,
    /// Meta's id of the sent template; delivery reports find the recipient by it.
    pub platform_message_id: Option<String>,
    /// Meta's error code of the latest failure.
    pub error_code: Option<i64>,
    /// Why it failed or was skipped.
    #[sea_orm(column_type = "Text", nullable)]
    pub error: Option<String>,
    /// A retry waits until then.
    pub next_attempt_at: Option<DateTimeUtc>,
    /// When it last changed.
    pub updated_at: DateTimeUtc,
}

/// Relations are expressed through explicit queries.
#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
