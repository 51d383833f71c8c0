//! One entry of an identity's stage history.

use sea_orm::entity::prelude::*;

/// One row of `identity_stages`.
#[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
#[sea_orm(table_name = "identity_stages")]
pub struct Model {
    /// UUID v7, so entries sort by time.
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: Uuid,
    /// Owning workspace.
    pub workspace_id: i64,
    /// The identity.
    pub identity_id: Uuid,
    /// The stage; cleared if the stage is deleted.
    pub stage_id: Option<Uuid>,
    /// The stage's name at the time, kept when the stage goes.
    pub stage_name: String,
    /// Metadata given with the move.
    pub metadata: Json,
    /// When the identity entered the stage.
    pub created_at: DateTimeUtc,
}

/// Relations are expressed through explicit queries.
#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
