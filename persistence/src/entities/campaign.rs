//! A template campaign: which template a channel sends to flows' recipients, and how its
//! parameters are filled.

use sea_orm::entity::prelude::*;

use crate::values::{CampaignStatus, ParamsStrategy};

/// One row of `campaigns`.
#[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
#[sea_orm(table_name = "campaigns")]
pub struct Model {
    /// UUID v7 (the API's `uid`).
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: Uuid,
    /// Owning workspace.
    pub workspace_id: i64,
    /// The channel it sends from; never changes.
    pub channel_id: Uuid,
    /// Display name.
    pub name: String,
    /// Free-form object.
    pub description: Option<Json>,
    /// Whether it may start flows.
    pub status: CampaignStatus,
    /// The template's name at Meta.
    pub template_name: String,
    /// The template's language (`en_US`).
    pub template_language: String,
    /// How parameters are filled.
    pub params_strategy: ParamsStrategy,
    /// Parameter name → source expression.
    pub template_parameters: Json,
    /// When it was created.
    pub created_at: DateTimeUtc,
    /// When it last changed.
    pub updated_at: DateTimeUtc,
    /// When it was deleted: its flows stay readable, the campaign itself is gone from the API.
    pub deleted_at: Option<DateTimeUtc>,
}

/// Relations are expressed through explicit queries.
#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
