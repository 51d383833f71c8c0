//! Retention: the files past the time their workspace (or the installation) keeps them are
//! marked no longer kept, then deleted by the media worker.

use chrono::{DateTime, Utc};
use sea_orm::sea_query::Expr;
use sea_orm::{ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter, QueryOrder, QuerySelect};
use uuid::Uuid;

use crate::Result;
use crate::entities::attachment;
use crate::values::AttachmentStatus;

/// Whose files a retention pass reads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RetentionScope {
    /// One workspace's (it has a retention of its own).
    Workspace(i64),
    /// Every workspace's but these (which have their own).
    Others(Vec<i64>),
}

/// Stored files of `scope`'s messages older than `before` (past the retention), oldest
/// first: `(id, storage key)`.
///
/// # Errors
/// Fails on a database error.
pub async fn past_retention(
    db: &impl ConnectionTrait,
    scope: &RetentionScope,
    before: DateTime<Utc>,
    limit: u64,
) -> Result<Vec<(Uuid, String)>> {
    let whose = match scope {
        RetentionScope::Workspace(id) => attachment::Column::WorkspaceId.eq(*id),
        RetentionScope::Others(ids) => {
            attachment::Column::WorkspaceId.is_not_in(ids.iter().copied())
        }
    };
    let rows: Vec<(Uuid, Option<String>)> = attachment::Entity::find()
        .select_only()
        .column(attachment::Column::Id)
        .column(attachment::Column::StorageKey)
        .filter(attachment::Column::Status.eq(AttachmentStatus::Stored))
        .filter(whose)
        .filter(attachment::Column::CreatedAt.lt(before))
        .order_by_asc(attachment::Column::CreatedAt)
        .limit(limit)
        .into_tuple()
        .all(db)
        .await?;
    Ok(rows
        .into_iter()
        .filter_map(|(id, key)| Some((id, key?)))
        .collect())
}

/// Marks the attachments `ids` as no longer kept (`failed`, `retention`): their files are
/// the caller's to delete once this committed.
///
/// # Errors
/// Fails on a database error.
pub async fn retire(db: &impl ConnectionTrait, ids: &[Uuid], now: DateTime<Utc>) -> Result<()> {
    if ids.is_empty() {
        return Ok(());
    }
    attachment::Entity::update_many()
        .col_expr(
            attachment::Column::Status,
            Expr::value(AttachmentStatus::Failed),
        )
        .col_expr(
            attachment::Column::Failure,
            Some("retention".to_owned()).into(),
        )
        .col_expr(
            attachment::Column::StorageKey,
            Option::<String>::None.into(),
        )
        .col_expr(attachment::Column::UpdatedAt, now.into())
        .filter(attachment::Column::Id.is_in(ids.iter().copied()))
        .exec(db)
        .await?;
    Ok(())
}
