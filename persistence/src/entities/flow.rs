//! A flow: one run of a campaign's template to a list of identities.

use sea_orm::entity::prelude::*;

use crate::values::FlowStatus;

/// One row of `flows`.
#[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
#[sea_orm(table_name = "flows")]
pub struct Model {
    /// UUID v7 (the API's `uid`).
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: Uuid,
    /// Owning workspace.
    pub workspace_id: i64,
    /// The campaign it sends.
    pub campaign_id: Uuid,
    /// The channel it sends from.
    pub channel_id: Uuid,
    /// Free text.
    #[sea_orm(column_type = "Text", nullable)]
    pub description: Option<String>,
    /// Where it stands.
    pub status: FlowStatus,
    /// Pacing, concurrency, retries and timeout, with defaults filled in.
    pub configuration: Json,
    /// How many recipients it has.
    pub total: i64,
    /// Why it ended as it did (an error's cause, `cancelled`, …).
    #[sea_orm(column_type = "Text", nullable)]
    pub reason: Option<String>,
    /// When its first send was made.
    pub started_at: Option<DateTimeUtc>,
    /// When every recipient had been tried; the delivery timeout counts from here.
    pub sends_done_at: Option<DateTimeUtc>,
    /// When it reached an end state.
    pub finished_at: Option<DateTimeUtc>,
    /// When it was created.
    pub created_at: DateTimeUtc,
    /// When it last changed.
    pub updated_at: DateTimeUtc,
}

/// Relations are expressed through explicit queries.
#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
