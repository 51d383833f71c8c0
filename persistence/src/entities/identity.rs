//! An identity: one person across contact points and channels.

use sea_orm::entity::prelude::*;

/// One row of `identities`.
#[derive(Clone, Debug, PartialEq, DeriveEntityModel, serde::Serialize, serde::Deserialize)]
#[sea_orm(table_name = "identities")]
pub struct Model {
    /// UUID v7, or the UUID a client chose when creating by PUT.
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: Uuid,
    /// Owning workspace.
    pub workspace_id: i64,
    /// Display name.
    pub name: Option<String>,
    /// Id in the client's own system; unique in the workspace.
    pub external_id: Option<String>,
    /// Custom metadata object.
    pub metadata: Json,
    /// Current stage.
    pub stage_id: Option<Uuid>,
    /// The person asked not to receive campaign templates.
    pub opted_out: bool,
    /// When it was created.
    pub created_at: DateTimeUtc,
    /// When it last changed.
    pub updated_at: DateTimeUtc,
}

/// Relations are expressed through explicit queries.
#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
