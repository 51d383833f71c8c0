//! A business's endpoint for event webhooks.

use sea_orm::entity::prelude::*;

/// One row of `event_webhooks`.
#[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
#[sea_orm(table_name = "event_webhooks")]
pub struct Model {
    /// UUID v7.
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: Uuid,
    /// Owning workspace.
    pub workspace_id: i64,
    /// Where events are posted.
    #[sea_orm(column_type = "Text")]
    pub url: String,
    /// What the business calls it.
    #[sea_orm(column_type = "Text", nullable)]
    pub description: Option<String>,
    /// The event types it takes (`["*"]`: all).
    pub events: Json,
    /// Whether events are delivered to it.
    pub enabled: bool,
    /// The signing secret (`whsec_…`), sealed.
    #[sea_orm(column_type = "Text")]
    pub secret: String,
    /// The secret before the last rotation, sealed; it signs beside the new one until
    /// `previous_secret_until`.
    #[sea_orm(column_type = "Text", nullable)]
    pub previous_secret: Option<String>,
    /// Until when the previous secret signs.
    pub previous_secret_until: Option<DateTimeUtc>,
    /// Since when every delivery to it has failed (`None` after a success).
    pub failing_since: Option<DateTimeUtc>,
    /// Why Parley disabled it (410 Gone, or five days of failures).
    #[sea_orm(column_type = "Text", nullable)]
    pub disabled_reason: Option<String>,
    /// Creation time.
    pub created_at: DateTimeUtc,
    /// Last update.
    pub updated_at: DateTimeUtc,
}

/// Relations are expressed through explicit queries.
#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
