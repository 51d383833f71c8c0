//! Assistants of workers.

use chrono::{DateTime, Utc};
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter, QueryOrder, Set,
};
use serde_json::Value;
use uuid::Uuid;

use crate::entities::assistant;
use crate::page::fetch_page;
use crate::{Page, Paged, Result};

/// The fields of an assistant; validated by the caller.
#[derive(Clone, Debug)]
pub struct AssistantFields {
    /// Display name.
    pub name: String,
    /// Template of the system instructions.
    pub instructions: String,
    /// JSON array of language tags.
    pub languages: Value,
    /// `PROVIDER_ONE`.
    pub provider: String,
    /// Model override.
    pub model: Option<String>,
    /// Settings object with defaults filled in.
    pub settings: Value,
}

/// Stores a new assistant of `worker_id`.
///
/// # Errors
/// Fails on a database error.
pub async fn create(
    db: &impl ConnectionTrait,
    workspace_id: i64,
    worker_id: Uuid,
    fields: AssistantFields,
    now: DateTime<Utc>,
) -> Result<assistant::Model> {
    Ok(assistant::ActiveModel {
        id: Set(Uuid::now_v7()),
        workspace_id: Set(workspace_id),
        worker_id: Set(worker_id),
        name: Set(fields.name),
        instructions: Set(fields.instructions),
        languages: Set(fields.languages),
        provider: Set(fields.provider),
        model: Set(fields.model),
        settings: Set(fields.settings),
        created_at: Set(now),
        updated_at: Set(now),
    }
    .insert(db)
    .await?)
}

/// The assistant `id` of the workspace.
///
/// # Errors
/// Fails on a database error.
pub async fn find(
    db: &impl ConnectionTrait,
    workspace_id: i64,
    id: Uuid,
) -> Result<Option<assistant::Model>> {
    Ok(assistant::Entity::find_by_id(id)
        .filter(assistant::Column::WorkspaceId.eq(workspace_id))
        .one(db)
        .await?)
}

/// The assistants of a worker, oldest first (the order a conversation picks them in).
///
/// # Errors
/// Fails on a database error.
pub async fn list_for_worker(
    db: &impl ConnectionTrait,
    workspace_id: i64,
    worker_id: Uuid,
) -> Result<Vec<assistant::Model>> {
    Ok(assistant::Entity::find()
        .filter(assistant::Column::WorkspaceId.eq(workspace_id))
        .filter(assistant::Column::WorkerId.eq(worker_id))
        .order_by_asc(assistant::Column::Id)
        .all(db)
        .await?)
}

/// One page of a worker's assistants, oldest first (the first is the one a conversation falls
/// back to).
///
/// # Errors
/// Fails on a database error.
pub async fn page_for_worker(
    db: &impl ConnectionTrait,
    workspace_id: i64,
    worker_id: Uuid,
    page: Page,
) -> Result<Paged<assistant::Model>> {
    let query = assistant::Entity::find()
        .filter(assistant::Column::WorkspaceId.eq(workspace_id))
        .filter(assistant::Column::WorkerId.eq(worker_id))
        .order_by_asc(assistant::Column::Id);
    fetch_page(db, query, page).await
}

/// Replaces the fields of `current`.
///
/// # Errors
/// Fails on a database error.
pub async fn update(
    db: &impl ConnectionTrait,
    current: assistant::Model,
    fields: AssistantFields,
    now: DateTime<Utc>,
) -> Result<assistant::Model> {
    let mut active: assistant::ActiveModel = current.into();
    active.name = Set(fields.name);
    active.instructions = Set(fields.instructions);
    active.languages = Set(fields.languages);
    active.provider = Set(fields.provider);
    active.model = Set(fields.model);
    active.settings = Set(fields.settings);
    active.updated_at = Set(now);
    Ok(active.update(db).await?)
}

/// Deletes the assistant; `false` when there was none.
///
/// # Errors
/// Fails on a database error.
pub async fn delete(db: &impl ConnectionTrait, workspace_id: i64, id: Uuid) -> Result<bool> {
    let result = assistant::Entity::delete_many()
        .filter(assistant::Column::Id.eq(id))
        .filter(assistant::Column::WorkspaceId.eq(workspace_id))
        .exec(db)
        .await?;
    Ok(result.rows_affected > 0)
}
