//! Workspaces and their members.

use chrono::{DateTime, Utc};
use sea_orm::sea_query::Query;
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, EntityTrait, PaginatorTrait, QueryFilter,
    QueryOrder, QuerySelect, Set,
};
use uuid::Uuid;

use crate::entities::{workspace, workspace_member};
use crate::page::fetch_page;
use crate::{Page, Paged, Result};

/// Creates a workspace in `business_id` with `owner_id` as its owner. Run it in a transaction:
/// it writes two rows.
///
/// # Errors
/// [`crate::PersistenceError::Conflict`] when the business already has a workspace of that name.
pub async fn create_with_owner(
    db: &impl ConnectionTrait,
    business_id: Uuid,
    owner_id: Uuid,
    name: &str,
    description: Option<&str>,
    now: DateTime<Utc>,
) -> Result<workspace::Model> {
    let created = workspace::ActiveModel {
        business_id: Set(business_id),
        name: Set(name.to_owned()),
        description: Set(description.map(str::to_owned)),
        created_at: Set(now),
        updated_at: Set(now),
        ..Default::default()
    }
    .insert(db)
    .await?;
    workspace_member::ActiveModel {
        workspace_id: Set(created.id),
        user_id: Set(owner_id),
        role: Set(workspace_member::ROLE_OWNER.to_owned()),
        created_at: Set(now),
    }
    .insert(db)
    .await?;
    Ok(created)
}

/// The workspace `id` when it belongs to `business_id` and `user_id` is one of its members.
///
/// # Errors
/// Fails on a database error.
pub async fn find_for_member(
    db: &impl ConnectionTrait,
    business_id: Uuid,
    user_id: Uuid,
    id: i64,
) -> Result<Option<workspace::Model>> {
    Ok(workspace::Entity::find_by_id(id)
        .filter(workspace::Column::BusinessId.eq(business_id))
        .filter(workspace::Column::Id.in_subquery(memberships_of(user_id)))
        .one(db)
        .await?)
}

/// The workspaces of `business_id` that `user_id` is a member of, oldest first.
///
/// # Errors
/// Fails on a database error.
pub async fn list_for_member(
    db: &impl ConnectionTrait,
    business_id: Uuid,
    user_id: Uuid,
    page: Page,
) -> Result<Paged<workspace::Model>> {
    let query = workspace::Entity::find()
        .filter(workspace::Column::BusinessId.eq(business_id))
        .filter(workspace::Column::Id.in_subquery(memberships_of(user_id)));
    fetch_page(db, query.order_by_asc(workspace::Column::Id), page).await
}

/// What an update changes; `None` leaves a field as it is.
#[derive(Clone, Debug, Default)]
pub struct WorkspaceChanges {
    /// New name.
    pub name: Option<String>,
    /// New description; `Some(None)` clears it.
    pub description: Option<Option<String>>,
    /// Days its media files are kept (0: kept); `Some(None)` returns to the installation's.
    pub media_retention_days: Option<Option<i32>>,
}

/// Applies `changes` to `current` and returns the stored result.
///
/// # Errors
/// [`crate::PersistenceError::Conflict`] when the new name is taken in the business.
pub async fn update(
    db: &impl ConnectionTrait,
    current: workspace::Model,
    changes: WorkspaceChanges,
    now: DateTime<Utc>,
) -> Result<workspace::Model> {
    let mut active: workspace::ActiveModel = current.into();
    if let Some(name) = changes.name {
        active.name = Set(name);
    }
    if let Some(description) = changes.description {
        active.description = Set(description);
    }
    if let Some(days) = changes.media_retention_days {
        active.media_retention_days = Set(days);
    }
    active.updated_at = Set(now);
    Ok(active.update(db).await?)
}

/// How many workspaces exist in the installation; zero means nobody has bootstrapped yet.
///
/// # Errors
/// Fails on a database error.
pub async fn count_all(db: &impl ConnectionTrait) -> Result<u64> {
    Ok(workspace::Entity::find().count(db).await?)
}

/// The workspace `id`, whoever owns it; for operator tools, never for the API.
///
/// # Errors
/// Fails on a database error.
pub async fn find_by_id(db: &impl ConnectionTrait, id: i64) -> Result<Option<workspace::Model>> {
    Ok(workspace::Entity::find_by_id(id).one(db).await?)
}

fn memberships_of(user_id: Uuid) -> sea_orm::sea_query::SelectStatement {
    Query::select()
        .column(workspace_member::Column::WorkspaceId)
        .from(workspace_member::Entity)
        .and_where(workspace_member::Column::UserId.eq(user_id))
        .to_owned()
}

/// The workspaces with a media retention of their own, and its days (0: kept).
///
/// # Errors
/// Fails on a database error.
pub async fn media_retentions(db: &impl ConnectionTrait) -> Result<Vec<(i64, i32)>> {
    let rows: Vec<(i64, Option<i32>)> = workspace::Entity::find()
        .select_only()
        .column(workspace::Column::Id)
        .column(workspace::Column::MediaRetentionDays)
        .filter(workspace::Column::MediaRetentionDays.is_not_null())
        .into_tuple()
        .all(db)
        .await?;
    Ok(rows
        .into_iter()
        .filter_map(|(id, days)| Some((id, days?)))
        .collect())
}
