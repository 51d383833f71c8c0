//! Memory: what Parley remembers about an identity, one JSON value per dotted key.

use chrono::{DateTime, Utc};
use sea_orm::sea_query::OnConflict;
use sea_orm::{ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter, QueryOrder, Set};
use serde_json::Value;
use uuid::Uuid;

use crate::Result;
use crate::entities::memory_entry;

/// Every entry of the identity, sorted by key.
///
/// # Errors
/// Fails on a database error.
pub async fn list(
    db: &impl ConnectionTrait,
    identity_id: Uuid,
) -> Result<Vec<memory_entry::Model>> {
    Ok(memory_entry::Entity::find()
        .filter(memory_entry::Column::IdentityId.eq(identity_id))
        .order_by_asc(memory_entry::Column::Key)
        .all(db)
        .await?)
}

/// The entry `key` of the identity.
///
/// # Errors
/// Fails on a database error.
pub async fn find(
    db: &impl ConnectionTrait,
    identity_id: Uuid,
    key: &str,
) -> Result<Option<memory_entry::Model>> {
    Ok(memory_entry::Entity::find()
        .filter(memory_entry::Column::IdentityId.eq(identity_id))
        .filter(memory_entry::Column::Key.eq(key))
        .one(db)
        .await?)
}

/// Writes `key`, creating or replacing its value and metadata; answers the entry and whether it
/// was new. Concurrent writers of one key end with one row (the unique key decides).
///
/// # Errors
/// Fails on a database error.
pub async fn upsert(
    db: &impl ConnectionTrait,
    workspace_id: i64,
    identity_id: Uuid,
    key: &str,
    value: Value,
    metadata: Value,
    now: DateTime<Utc>,
) -> Result<(memory_entry::Model, bool)> {
    let existed = find(db, identity_id, key).await?.is_some();
    memory_entry::Entity::insert(memory_entry::ActiveModel {
        id: Set(Uuid::now_v7()),
        workspace_id: Set(workspace_id),
        identity_id: Set(identity_id),
        key: Set(key.to_owned()),
        value: Set(value),
        metadata: Set(metadata),
        created_at: Set(now),
        updated_at: Set(now),
    })
    .on_conflict(
        OnConflict::columns([memory_entry::Column::IdentityId, memory_entry::Column::Key])
            .update_columns([
                memory_entry::Column::Value,
                memory_entry::Column::Metadata,
                memory_entry::Column::UpdatedAt,
            ])
            .to_owned(),
    )
    .exec_without_returning(db)
    .await?;
    let stored = find(db, identity_id, key)
        .await?
        .ok_or_else(|| sea_orm::DbErr::RecordNotFound(format!("memory entry {key}")))?;
    Ok((stored, !existed))
}

/// Forgets `key`; `false` when it was not remembered.
///
/// # Errors
/// Fails on a database error.
pub async fn delete(db: &impl ConnectionTrait, identity_id: Uuid, key: &str) -> Result<bool> {
    let result = memory_entry::Entity::delete_many()
        .filter(memory_entry::Column::IdentityId.eq(identity_id))
        .filter(memory_entry::Column::Key.eq(key))
        .exec(db)
        .await?;
    Ok(result.rows_affected > 0)
}
