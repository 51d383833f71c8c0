//! An assistant of a worker: the model's instructions and settings.

use sea_orm::entity::prelude::*;

/// One row of `assistants`.
#[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
#[sea_orm(table_name = "assistants")]
pub struct Model {
    /// UUID v7.
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: Uuid,
    /// Owning workspace.
    pub workspace_id: i64,
    /// The worker it belongs to; deleted with it.
    pub worker_id: Uuid,
    /// Display name.
    pub name: String,
    /// Handlebars template of the system instructions, stored as written.
    #[sea_orm(column_type = "Text")]
    pub instructions: String,
    /// JSON array of language tags (`xx` or `xx-XX`).
    pub languages: Json,
    /// Model provider; only `PROVIDER_ONE`.
    pub provider: String,
    /// Model name overriding the configured default.
    pub model: Option<String>,
    /// JSON object of the assistant settings, defaults filled in.
    pub settings: Json,
    /// When it was created.
    pub created_at: DateTimeUtc,
    /// When it last changed.
    pub updated_at: DateTimeUtc,
}

/// Relations are expressed through explicit queries.
#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
