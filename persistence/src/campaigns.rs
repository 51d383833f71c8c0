//! Template campaigns of a workspace.

use chrono::{DateTime, Utc};
use sea_orm::sea_query::{Expr, ExprTrait, Func};
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, EntityTrait, PaginatorTrait, QueryFilter, Set,
};
use serde_json::Value;
use uuid::Uuid;

use crate::entities::{campaign, flow};
use crate::page::fetch_keyset;
use crate::values::{CampaignStatus, FlowStatus, ParamsStrategy};
use crate::{Cursor, CursorPage, Result};

/// A campaign's fields, validated by the caller.
#[derive(Clone, Debug)]
pub struct CampaignFields {
    /// Display name.
    pub name: String,
    /// Free-form object.
    pub description: Option<Value>,
    /// Whether it may start flows.
    pub status: CampaignStatus,
    /// The template's name.
    pub template_name: String,
    /// The template's language.
    pub template_language: String,
    /// How parameters are filled.
    pub params_strategy: ParamsStrategy,
    /// Parameter name → source expression.
    pub template_parameters: Value,
}

/// Stores a new campaign.
///
/// # Errors
/// The database's.
pub async fn create(
    db: &impl ConnectionTrait,
    workspace_id: i64,
    channel_id: Uuid,
    fields: CampaignFields,
    now: DateTime<Utc>,
) -> Result<campaign::Model> {
    Ok(campaign::ActiveModel {
        id: Set(Uuid::now_v7()),
        workspace_id: Set(workspace_id),
        channel_id: Set(channel_id),
        name: Set(fields.name),
        description: Set(fields.description),
        status: Set(fields.status),
        template_name: Set(fields.template_name),
        template_language: Set(fields.template_language),
        params_strategy: Set(fields.params_strategy),
        template_parameters: Set(fields.template_parameters),
        created_at: Set(now),
        updated_at: Set(now),
        deleted_at: Set(None),
    }
    .insert(db)
    .await?)
}

/// The campaign `id` of the workspace.
///
/// # Errors
/// The database's.
pub async fn find(
    db: &impl ConnectionTrait,
    workspace_id: i64,
    id: Uuid,
) -> Result<Option<campaign::Model>> {
    Ok(campaign::Entity::find_by_id(id)
        .filter(campaign::Column::WorkspaceId.eq(workspace_id))
        .filter(campaign::Column::DeletedAt.is_null())
        .one(db)
        .await?)
}

/// The campaign `id`, whatever its workspace (for actors that hold a flow already).
///
/// # Errors
/// The database's.
pub async fn find_in_any_workspace(
    db: &impl ConnectionTrait,
    id: Uuid,
) -> Result<Option<campaign::Model>> {
    Ok(campaign::Entity::find_by_id(id).one(db).await?)
}

/// What a campaign list keeps.
#[derive(Clone, Debug, Default)]
pub struct CampaignFilter {
    /// Only this status.
    pub status: Option<CampaignStatus>,
    /// Only this channel's.
    pub channel_id: Option<Uuid>,
    /// Names containing this, in any case.
    pub name: Option<String>,
}

/// A keyset page of the workspace's campaigns, newest first.
///
/// # Errors
/// The database's.
pub async fn list(
    db: &impl ConnectionTrait,
    workspace_id: i64,
    filter: CampaignFilter,
    cursor: Option<Cursor>,
    limit: u64,
) -> Result<CursorPage<campaign::Model>> {
    let mut query = campaign::Entity::find()
        .filter(campaign::Column::WorkspaceId.eq(workspace_id))
        .filter(campaign::Column::DeletedAt.is_null());
    if let Some(status) = filter.status {
        query = query.filter(campaign::Column::Status.eq(status));
    }
    if let Some(channel_id) = filter.channel_id {
        query = query.filter(campaign::Column::ChannelId.eq(channel_id));
    }
    if let Some(name) = filter.name {
        let pattern = format!("%{}%", escape_like(&name.to_lowercase()));
        query = query.filter(
            Expr::expr(Func::lower(Expr::col(campaign::Column::Name)))
                .like(sea_orm::sea_query::LikeExpr::new(pattern).escape('\\')),
        );
    }
    fetch_keyset(
        db,
        query,
        campaign::Column::Id,
        |c| c.id,
        true,
        cursor,
        limit,
    )
    .await
}

/// `text` with LIKE's wildcards taken literally.
fn escape_like(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for c in text.chars() {
        if matches!(c, '%' | '_' | '\\') {
            escaped.push('\\');
        }
        escaped.push(c);
    }
    escaped
}

/// Replaces a campaign's fields (the channel never changes) and touches `updated_at`.
///
/// # Errors
/// The database's.
pub async fn update(
    db: &impl ConnectionTrait,
    current: campaign::Model,
    fields: CampaignFields,
    now: DateTime<Utc>,
) -> Result<campaign::Model> {
    let mut active: campaign::ActiveModel = current.into();
    active.name = Set(fields.name);
    active.description = Set(fields.description);
    active.status = Set(fields.status);
    active.template_name = Set(fields.template_name);
    active.template_language = Set(fields.template_language);
    active.params_strategy = Set(fields.params_strategy);
    active.template_parameters = Set(fields.template_parameters);
    active.updated_at = Set(now);
    Ok(active.update(db).await?)
}

/// How many flows of the campaign a FlowActor owns (queued, running or paused).
///
/// # Errors
/// The database's.
pub async fn active_flows(db: &impl ConnectionTrait, campaign_id: Uuid) -> Result<u64> {
    Ok(flow::Entity::find()
        .filter(flow::Column::CampaignId.eq(campaign_id))
        .filter(flow::Column::Status.is_in([
            FlowStatus::Queued,
            FlowStatus::Running,
            FlowStatus::Paused,
        ]))
        .count(db)
        .await?)
}

/// Deletes a campaign; its (finished) flows stay readable.
///
/// # Errors
/// The database's.
pub async fn delete(db: &impl ConnectionTrait, workspace_id: i64, id: Uuid) -> Result<bool> {
    // Marked, not removed: its flows (which cascade from it) stay readable.
    let deleted = campaign::Entity::update_many()
        .col_expr(
            campaign::Column::DeletedAt,
            Expr::value(crate::clock::now()),
        )
        .filter(campaign::Column::Id.eq(id))
        .filter(campaign::Column::WorkspaceId.eq(workspace_id))
        .filter(campaign::Column::DeletedAt.is_null())
        .exec(db)
        .await?;
    Ok(deleted.rows_affected > 0)
}
