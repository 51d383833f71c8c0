//! An identity's journey: the stage it is in and the history of its moves.

use chrono::{DateTime, Utc};
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter, QueryOrder, Set,
};
use serde_json::Value;
use uuid::Uuid;

use crate::entities::{identity, identity_stage, stage};
use crate::page::fetch_page;
use crate::{Page, Paged, Result};

/// The stages with the given ids.
///
/// # Errors
/// Fails on a database error.
pub async fn stages_by_id(
    db: &impl ConnectionTrait,
    stage_ids: &[Uuid],
) -> Result<Vec<stage::Model>> {
    if stage_ids.is_empty() {
        return Ok(Vec::new());
    }
    Ok(stage::Entity::find()
        .filter(stage::Column::Id.is_in(stage_ids.iter().copied()))
        .all(db)
        .await?)
}

/// Puts the identity in `stage` and appends the move to its history. Run it in a transaction.
///
/// # Errors
/// Fails on a database error.
pub async fn set_stage(
    db: &impl ConnectionTrait,
    current: identity::Model,
    stage: &stage::Model,
    metadata: Value,
    now: DateTime<Utc>,
) -> Result<(identity::Model, identity_stage::Model)> {
    let entry = identity_stage::ActiveModel {
        id: Set(Uuid::now_v7()),
        workspace_id: Set(current.workspace_id),
        identity_id: Set(current.id),
        stage_id: Set(Some(stage.id)),
        stage_name: Set(stage.name.clone()),
        metadata: Set(metadata),
        created_at: Set(now),
    }
    .insert(db)
    .await?;
    let mut active: identity::ActiveModel = current.into();
    active.stage_id = Set(Some(stage.id));
    active.updated_at = Set(now);
    Ok((active.update(db).await?, entry))
}

/// The identity's stage history, oldest first.
///
/// # Errors
/// Fails on a database error.
pub async fn stage_history(
    db: &impl ConnectionTrait,
    identity_id: Uuid,
    page: Page,
) -> Result<Paged<identity_stage::Model>> {
    let query = identity_stage::Entity::find()
        .filter(identity_stage::Column::IdentityId.eq(identity_id))
        .order_by_asc(identity_stage::Column::CreatedAt)
        .order_by_asc(identity_stage::Column::Id);
    fetch_page(db, query, page).await
}
