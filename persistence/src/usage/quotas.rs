//! A workspace's quotas: stored as the operator set them, read by the limits that hold them.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use sea_orm::sea_query::OnConflict;
use sea_orm::{ConnectionTrait, EntityTrait, Set};

use super::Category;
use crate::Result;
use crate::entities::workspace_quota;

/// What a workspace may use; `None` (or a category left out) is no limit.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Quotas {
    /// Model tokens (prompt and completion) per UTC calendar month.
    pub model_tokens_per_month: Option<i64>,
    /// Messages sent per UTC day, every category together.
    pub messages_per_day: Option<i64>,
    /// Messages sent per UTC day, of one category.
    pub messages_per_day_by_category: BTreeMap<Category, i64>,
    /// Requests per second each API key may make.
    pub requests_per_second_per_key: Option<u32>,
}

impl Quotas {
    /// Whether none is set.
    pub fn is_unlimited(&self) -> bool {
        *self == Self::default()
    }

    fn of(row: workspace_quota::Model) -> Self {
        let by_category = row
            .messages_per_day_by_category
            .and_then(|v| serde_json::from_value::<BTreeMap<Category, i64>>(v).ok())
            .unwrap_or_default();
        Self {
            model_tokens_per_month: row.model_tokens_per_month,
            messages_per_day: row.messages_per_day,
            messages_per_day_by_category: by_category,
            requests_per_second_per_key: row
                .requests_per_second_per_key
                .and_then(|r| u32::try_from(r).ok()),
        }
    }
}

/// The quotas of `workspace_id` (none set: unlimited).
///
/// # Errors
/// The database's.
pub async fn get(db: &impl ConnectionTrait, workspace_id: i64) -> Result<Quotas> {
    Ok(workspace_quota::Entity::find_by_id(workspace_id)
        .one(db)
        .await?
        .map(Quotas::of)
        .unwrap_or_default())
}

/// Every workspace's quotas that limit anything.
///
/// # Errors
/// The database's.
pub async fn all(db: &impl ConnectionTrait) -> Result<Vec<(i64, Quotas)>> {
    Ok(workspace_quota::Entity::find()
        .all(db)
        .await?
        .into_iter()
        .map(|row| (row.workspace_id, Quotas::of(row)))
        .filter(|(_, quotas)| !quotas.is_unlimited())
        .collect())
}

/// Sets the quotas of `workspace_id` (all of them: one left `None` is lifted).
///
/// # Errors
/// The database's.
pub async fn set(
    db: &impl ConnectionTrait,
    workspace_id: i64,
    quotas: &Quotas,
    now: DateTime<Utc>,
) -> Result<()> {
    let by_category = (!quotas.messages_per_day_by_category.is_empty())
        .then(|| serde_json::to_value(&quotas.messages_per_day_by_category).ok())
        .flatten();
    let row = workspace_quota::ActiveModel {
        workspace_id: Set(workspace_id),
        model_tokens_per_month: Set(quotas.model_tokens_per_month),
        messages_per_day: Set(quotas.messages_per_day),
        messages_per_day_by_category: Set(by_category),
        requests_per_second_per_key: Set(quotas
            .requests_per_second_per_key
            .and_then(|r| i32::try_from(r).ok())),
        updated_at: Set(crate::clock::at_storage_precision(now)),
    };
    workspace_quota::Entity::insert(row)
        .on_conflict(
            OnConflict::column(workspace_quota::Column::WorkspaceId)
                .update_columns([
                    workspace_quota::Column::ModelTokensPerMonth,
                    workspace_quota::Column::MessagesPerDay,
                    workspace_quota::Column::MessagesPerDayByCategory,
                    workspace_quota::Column::RequestsPerSecondPerKey,
                    workspace_quota::Column::UpdatedAt,
                ])
                .to_owned(),
        )
        .exec_without_returning(db)
        .await?;
    Ok(())
}
