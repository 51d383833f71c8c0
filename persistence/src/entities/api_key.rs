//! An API key: a hashed secret that acts for one user in one workspace with some permissions.

use sea_orm::entity::prelude::*;

/// One row of `api_keys`.
#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "api_keys")]
pub struct Model {
    /// UUID v7; the public handle used to list and revoke the key.
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: Uuid,
    /// The workspace the key acts in.
    pub workspace_id: i64,
    /// The user who created it; the key acts as that user.
    pub user_id: Uuid,
    /// Human label.
    pub name: String,
    /// Lower-case hex SHA-256 of the secret; the secret itself is never stored.
    pub key_hash: String,
    /// Comma-separated permission names (`read,write,admin`).
    pub permissions: String,
    /// When it was created.
    pub created_at: DateTimeUtc,
    /// Last successful authentication, updated at most once a minute.
    pub last_used_at: Option<DateTimeUtc>,
    /// After this instant the key no longer authenticates.
    pub expires_at: Option<DateTimeUtc>,
    /// Set once on revocation; a revoked key never authenticates again.
    pub revoked_at: Option<DateTimeUtc>,
}

/// Relations are expressed through explicit queries.
#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
