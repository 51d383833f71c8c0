//! Saved replies: text a workspace's operators insert by a shortcut.

use chrono::{DateTime, Utc};
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter, QueryOrder, Set,
};
use uuid::Uuid;

use crate::Result;
use crate::entities::saved_reply;

/// Saves `text` under `shortcut`.
///
/// # Errors
/// [`crate::PersistenceError::Conflict`] when the workspace has that shortcut.
pub async fn create(
    db: &impl ConnectionTrait,
    workspace_id: i64,
    shortcut: &str,
    text: String,
    now: DateTime<Utc>,
) -> Result<saved_reply::Model> {
    Ok(saved_reply::ActiveModel {
        id: Set(Uuid::now_v7()),
        workspace_id: Set(workspace_id),
        shortcut: Set(shortcut.to_owned()),
        text: Set(text),
        created_at: Set(now),
    }
    .insert(db)
    .await?)
}

/// The workspace's saved replies, by shortcut.
///
/// # Errors
/// Fails on a database error.
pub async fn list(db: &impl ConnectionTrait, workspace_id: i64) -> Result<Vec<saved_reply::Model>> {
    Ok(saved_reply::Entity::find()
        .filter(saved_reply::Column::WorkspaceId.eq(workspace_id))
        .order_by_asc(saved_reply::Column::Shortcut)
        .all(db)
        .await?)
}

/// The workspace's saved reply of `shortcut`.
///
/// # Errors
/// Fails on a database error.
pub async fn find(
    db: &impl ConnectionTrait,
    workspace_id: i64,
    shortcut: &str,
) -> Result<Option<saved_reply::Model>> {
    Ok(saved_reply::Entity::find()
        .filter(saved_reply::Column::WorkspaceId.eq(workspace_id))
        .filter(saved_reply::Column::Shortcut.eq(shortcut))
        .one(db)
        .await?)
}

/// Deletes the workspace's saved reply `id`; `false` when there was none.
///
/// # Errors
/// Fails on a database error.
pub async fn delete(db: &impl ConnectionTrait, workspace_id: i64, id: Uuid) -> Result<bool> {
    Ok(saved_reply::Entity::delete_many()
        .filter(saved_reply::Column::WorkspaceId.eq(workspace_id))
        .filter(saved_reply::Column::Id.eq(id))
        .exec(db)
        .await?
        .rows_affected
        == 1)
}
