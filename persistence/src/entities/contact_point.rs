//! A phone number or e-mail address of an identity.

use sea_orm::entity::prelude::*;

/// One row of `contact_points`.
#[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
#[sea_orm(table_name = "contact_points")]
pub struct Model {
    /// UUID v7.
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: Uuid,
    /// Owning workspace.
    pub workspace_id: i64,
    /// The identity it belongs to.
    pub identity_id: Uuid,
    /// `phone` or `email`.
    pub kind: crate::values::ContactKind,
    /// E.164 phone or lower-cased e-mail; unique per kind in the workspace.
    pub value: String,
    /// Whether it is the identity's `phone`/`email` in the record.
    pub is_primary: bool,
    /// When it was added.
    pub created_at: DateTimeUtc,
}

/// Relations are expressed through explicit queries.
#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
