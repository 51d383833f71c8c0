//! A template of a sandbox channel: approved at once, kept here because no Meta keeps it.

use sea_orm::entity::prelude::*;

/// One row of `sandbox_templates`.
#[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
#[sea_orm(table_name = "sandbox_templates")]
pub struct Model {
    /// UUID v7; its Meta-like id.
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: Uuid,
    /// The sandbox channel.
    pub channel_id: Uuid,
    /// Template name.
    pub name: String,
    /// Language code (`en_US`).
    pub language: String,
    /// `MARKETING`, `UTILITY` or `AUTHENTICATION`.
    pub category: String,
    /// Meta's component objects.
    pub components: Json,
    /// When it was created.
    pub created_at: DateTimeUtc,
}

/// Relations are expressed through explicit queries.
#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
