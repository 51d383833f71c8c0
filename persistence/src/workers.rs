//! Workers: the holders of assistants that channels are synced to.

use chrono::{DateTime, Utc};
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter, QueryOrder, Set,
};
use uuid::Uuid;

use crate::entities::{assistant, channel, worker};
use crate::page::{PageShapes, fetch_shaped_page};
use crate::{Page, Paged, Result};

/// A worker to create; the caller has validated the fields.
#[derive(Clone, Debug)]
pub struct NewWorker {
    /// Display name.
    pub name: String,
    /// Free text.
    pub description: Option<String>,
    /// IANA zone.
    pub timezone: Option<String>,
}

/// Stores a new worker.
///
/// # Errors
/// Fails on a database error.
pub async fn create(
    db: &impl ConnectionTrait,
    workspace_id: i64,
    new: NewWorker,
    now: DateTime<Utc>,
) -> Result<worker::Model> {
    Ok(worker::ActiveModel {
        id: Set(Uuid::now_v7()),
        workspace_id: Set(workspace_id),
        name: Set(new.name),
        description: Set(new.description),
        timezone: Set(new.timezone),
        created_at: Set(now),
        updated_at: Set(now),
    }
    .insert(db)
    .await?)
}

/// The worker `id` of the workspace.
///
/// # Errors
/// Fails on a database error.
pub async fn find(
    db: &impl ConnectionTrait,
    workspace_id: i64,
    id: Uuid,
) -> Result<Option<worker::Model>> {
    Ok(worker::Entity::find_by_id(id)
        .filter(worker::Column::WorkspaceId.eq(workspace_id))
        .one(db)
        .await?)
}

/// The workspace's workers, oldest first.
///
/// # Errors
/// Fails on a database error.
pub async fn list(
    db: &impl ConnectionTrait,
    workspace_id: i64,
    page: Page,
) -> Result<Paged<worker::Model>> {
    static SHAPES: PageShapes = PageShapes::new();
    let query = || {
        worker::Entity::find()
            .filter(worker::Column::WorkspaceId.eq(workspace_id))
            .order_by_asc(worker::Column::Id)
    };
    fetch_shaped_page(db, &SHAPES, vec![workspace_id.into()], query, page).await
}

/// Deletes the worker with its assistants and unsyncs its channels; `false` when there was no
/// such worker. Run it in a transaction.
///
/// # Errors
/// Fails on a database error.
pub async fn delete(db: &impl ConnectionTrait, workspace_id: i64, id: Uuid) -> Result<bool> {
    if find(db, workspace_id, id).await?.is_none() {
        return Ok(false);
    }
    channel::Entity::update_many()
        .col_expr(channel::Column::WorkerId, Option::<Uuid>::None.into())
        .filter(channel::Column::WorkerId.eq(id))
        .exec(db)
        .await?;
    assistant::Entity::delete_many()
        .filter(assistant::Column::WorkerId.eq(id))
        .exec(db)
        .await?;
    worker::Entity::delete_by_id(id).exec(db).await?;
    Ok(true)
}
