//! A one-time invitation to set an operator's password.

use sea_orm::entity::prelude::*;

/// One row of `operator_invitations`.
#[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
#[sea_orm(table_name = "operator_invitations")]
pub struct Model {
    /// SHA-256 of the link's token, hex: the token itself is only ever in the link.
    #[sea_orm(primary_key, auto_increment = false)]
    pub token_hash: String,
    /// Whom it invites.
    pub operator_id: Uuid,
    /// When it stops being accepted.
    pub expires_at: DateTimeUtc,
    /// When it was answered (an invitation is used once).
    pub used_at: Option<DateTimeUtc>,
    /// When it was made.
    pub created_at: DateTimeUtc,
}

/// Relations are expressed through explicit queries.
#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
