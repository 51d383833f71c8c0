//! Journey stages of a workspace.

use chrono::{DateTime, Utc};
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter, QueryOrder, Set,
};
use serde_json::Value;
use uuid::Uuid;

use crate::entities::stage;
use crate::page::fetch_page;
use crate::{Page, Paged, Result};

/// Stores a new stage.
///
/// # Errors
/// [`crate::PersistenceError::Conflict`] when the workspace has a stage of that name.
pub async fn create(
    db: &impl ConnectionTrait,
    workspace_id: i64,
    name: &str,
    description: Option<String>,
    metadata: Value,
    now: DateTime<Utc>,
) -> Result<stage::Model> {
    Ok(stage::ActiveModel {
        id: Set(Uuid::now_v7()),
        workspace_id: Set(workspace_id),
        name: Set(name.to_owned()),
        description: Set(description),
        metadata: Set(metadata),
        created_at: Set(now),
        updated_at: Set(now),
    }
    .insert(db)
    .await?)
}

/// The stage `id` of the workspace.
///
/// # Errors
/// Fails on a database error.
pub async fn find(
    db: &impl ConnectionTrait,
    workspace_id: i64,
    id: Uuid,
) -> Result<Option<stage::Model>> {
    Ok(stage::Entity::find_by_id(id)
        .filter(stage::Column::WorkspaceId.eq(workspace_id))
        .one(db)
        .await?)
}

/// The stage of the workspace called exactly `name`.
///
/// # Errors
/// Fails on a database error.
pub async fn find_by_name(
    db: &impl ConnectionTrait,
    workspace_id: i64,
    name: &str,
) -> Result<Option<stage::Model>> {
    Ok(stage::Entity::find()
        .filter(stage::Column::WorkspaceId.eq(workspace_id))
        .filter(stage::Column::Name.eq(name))
        .one(db)
        .await?)
}

/// The workspace's stages, oldest first.
///
/// # Errors
/// Fails on a database error.
pub async fn list(
    db: &impl ConnectionTrait,
    workspace_id: i64,
    page: Page,
) -> Result<Paged<stage::Model>> {
    let query = stage::Entity::find()
        .filter(stage::Column::WorkspaceId.eq(workspace_id))
        .order_by_asc(stage::Column::Id);
    fetch_page(db, query, page).await
}

/// What an update changes; `None` leaves a field as it is.
#[derive(Clone, Debug, Default)]
pub struct StageChanges {
    /// New name.
    pub name: Option<String>,
    /// New description; `Some(None)` clears it.
    pub description: Option<Option<String>>,
    /// New metadata.
    pub metadata: Option<Value>,
}

/// Applies `changes`.
///
/// # Errors
/// [`crate::PersistenceError::Conflict`] when the new name is taken.
pub async fn update(
    db: &impl ConnectionTrait,
    current: stage::Model,
    changes: StageChanges,
    now: DateTime<Utc>,
) -> Result<stage::Model> {
    let mut active: stage::ActiveModel = current.into();
    if let Some(name) = changes.name {
        active.name = Set(name);
    }
    if let Some(description) = changes.description {
        active.description = Set(description);
    }
    if let Some(metadata) = changes.metadata {
        active.metadata = Set(metadata);
    }
    active.updated_at = Set(now);
    Ok(active.update(db).await?)
}

/// Deletes the stage; identities in it are left without a stage and their history keeps the
/// stage's name. `false` when there was none.
///
/// # Errors
/// Fails on a database error.
pub async fn delete(db: &impl ConnectionTrait, workspace_id: i64, id: Uuid) -> Result<bool> {
    use crate::entities::{identity, identity_stage};
    if find(db, workspace_id, id).await?.is_none() {
        return Ok(false);
    }
    identity::Entity::update_many()
        .col_expr(identity::Column::StageId, Option::<Uuid>::None.into())
        .filter(identity::Column::StageId.eq(id))
        .exec(db)
        .await?;
    identity_stage::Entity::update_many()
        .col_expr(identity_stage::Column::StageId, Option::<Uuid>::None.into())
        .filter(identity_stage::Column::StageId.eq(id))
        .exec(db)
        .await?;
    stage::Entity::delete_by_id(id).exec(db).await?;
    Ok(true)
}
