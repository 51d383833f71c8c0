//! One event for one endpoint, until it is delivered or its retries run out.

use sea_orm::entity::prelude::*;

use crate::values::DeliveryStatus;

/// One row of `event_deliveries`.
#[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
#[sea_orm(table_name = "event_deliveries")]
pub struct Model {
    /// UUID v7.
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: Uuid,
    /// Owning workspace.
    pub workspace_id: i64,
    /// The endpoint.
    pub endpoint_id: Uuid,
    /// The event (`webhook-id`; the same for every endpoint and every attempt).
    pub event_id: Uuid,
    /// Its type, e.g. `message.received`.
    pub event_type: String,
    /// The body posted, as first written (retries post the same bytes).
    #[sea_orm(column_type = "Text")]
    pub body: String,
    /// Where it stands.
    pub status: DeliveryStatus,
    /// Attempts made.
    pub attempts: i32,
    /// The endpoint's status code of the last attempt.
    pub last_status_code: Option<i32>,
    /// Why the last attempt failed.
    #[sea_orm(column_type = "Text", nullable)]
    pub last_error: Option<String>,
    /// When the next attempt is due (for a pending delivery).
    pub next_attempt_at: DateTimeUtc,
    /// When the event was written.
    pub created_at: DateTimeUtc,
    /// Last change.
    pub updated_at: DateTimeUtc,
}

/// The pending deliveries, in the words of the index that holds only them (migration
/// `m20261207_000024`): a plan made once for any bound status could not use it.
pub(crate) fn pending() -> sea_orm::sea_query::SimpleExpr {
    Expr::cust(r#""event_deliveries"."status" = 'pending'"#)
}

/// Relations are expressed through explicit queries.
#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
