//! API keys: stored as hashes, looked up by hash on every request.

use chrono::{DateTime, Utc};
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter, QueryOrder,
    QuerySelect, Set,
};
use uuid::Uuid;

use crate::entities::{api_key, workspace};
use crate::page::fetch_page;
use crate::{Page, Paged, Result};

/// A key to store; the caller has hashed the secret.
#[derive(Clone, Debug)]
pub struct NewApiKey {
    /// Workspace the key acts in.
    pub workspace_id: i64,
    /// User the key acts as.
    pub user_id: Uuid,
    /// Human label.
    pub name: String,
    /// Hex SHA-256 of the secret.
    pub key_hash: String,
    /// Comma-separated permission names.
    pub permissions: String,
    /// Optional end of validity.
    pub expires_at: Option<DateTime<Utc>>,
}

/// Stores a new key.
///
/// # Errors
/// Fails on a database error (a hash collision would be a conflict, and is not expected).
pub async fn insert(
    db: &impl ConnectionTrait,
    key: NewApiKey,
    now: DateTime<Utc>,
) -> Result<api_key::Model> {
    Ok(api_key::ActiveModel {
        id: Set(Uuid::now_v7()),
        workspace_id: Set(key.workspace_id),
        user_id: Set(key.user_id),
        name: Set(key.name),
        key_hash: Set(key.key_hash),
        permissions: Set(key.permissions),
        created_at: Set(now),
        last_used_at: Set(None),
        expires_at: Set(key.expires_at),
        revoked_at: Set(None),
    }
    .insert(db)
    .await?)
}

/// The key with this hash together with its workspace, whatever its state: the caller decides
/// whether a revoked or expired key may pass (it may not).
///
/// # Errors
/// Fails on a database error.
pub async fn find_by_hash(
    db: &impl ConnectionTrait,
    key_hash: &str,
) -> Result<Option<(api_key::Model, workspace::Model)>> {
    // One statement: every authenticated request runs it.
    let of_workspace: sea_orm::RelationDef = api_key::Entity::belongs_to(workspace::Entity)
        .from(api_key::Column::WorkspaceId)
        .to(workspace::Column::Id)
        .into();
    let found = api_key::Entity::find()
        .join(sea_orm::JoinType::InnerJoin, of_workspace)
        .select_also(workspace::Entity)
        .filter(api_key::Column::KeyHash.eq(key_hash))
        .one(db)
        .await?;
    Ok(found.and_then(|(key, workspace)| workspace.map(|w| (key, w))))
}

/// Records a use of the key at `now` (the caller writes it at most once a minute per key, so
/// that reads do not each cost a write).
///
/// # Errors
/// Fails on a database error.
pub async fn touch(db: &impl ConnectionTrait, key_id: Uuid, now: DateTime<Utc>) -> Result<()> {
    api_key::Entity::update_many()
        .col_expr(api_key::Column::LastUsedAt, now.into())
        .filter(api_key::Column::Id.eq(key_id))
        .exec(db)
        .await?;
    Ok(())
}

/// The keys of a workspace, oldest first.
///
/// # Errors
/// Fails on a database error.
pub async fn list_for_workspace(
    db: &impl ConnectionTrait,
    workspace_id: i64,
    page: Page,
) -> Result<Paged<api_key::Model>> {
    let query = api_key::Entity::find().filter(api_key::Column::WorkspaceId.eq(workspace_id));
    fetch_page(
        db,
        query
            .order_by_asc(api_key::Column::CreatedAt)
            .order_by_asc(api_key::Column::Id),
        page,
    )
    .await
}

/// The key `id`.
///
/// # Errors
/// Fails on a database error.
pub async fn find_by_id(db: &impl ConnectionTrait, id: Uuid) -> Result<Option<api_key::Model>> {
    Ok(api_key::Entity::find_by_id(id).one(db).await?)
}

/// Revokes `key` (idempotent: a revoked key keeps its first revocation time).
///
/// # Errors
/// Fails on a database error.
pub async fn revoke(
    db: &impl ConnectionTrait,
    key: api_key::Model,
    now: DateTime<Utc>,
) -> Result<api_key::Model> {
    if key.revoked_at.is_some() {
        return Ok(key);
    }
    let mut active: api_key::ActiveModel = key.into();
    active.revoked_at = Set(Some(now));
    Ok(active.update(db).await?)
}
