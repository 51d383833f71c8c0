//! One remembered fact about an identity.

use sea_orm::entity::prelude::*;

/// One row of `memory_entries`.
#[derive(Clone, Debug, PartialEq, DeriveEntityModel, serde::Serialize, serde::Deserialize)]
#[sea_orm(table_name = "memory_entries")]
pub struct Model {
    /// UUID v7.
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: Uuid,
    /// Owning workspace.
    pub workspace_id: i64,
    /// The identity.
    pub identity_id: Uuid,
    /// Dotted lower-case key; unique per identity.
    pub key: String,
    /// Any JSON value.
    pub value: Json,
    /// `source`, `confidence` and anything else given.
    pub metadata: Json,
    /// When the key was first written.
    pub created_at: DateTimeUtc,
    /// When it was last written.
    pub updated_at: DateTimeUtc,
}

/// Relations are expressed through explicit queries.
#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
