//! MCP servers of a workspace and their attachment to assistants.

use chrono::{DateTime, Utc};
use sea_orm::sea_query::{OnConflict, Query};
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter, QueryOrder, Set,
};
use serde_json::Value;
use uuid::Uuid;

use crate::entities::{assistant_mcp_server, mcp_server};
use crate::page::fetch_page;
use crate::values::McpTransport;
use crate::{Page, Paged, Result};

/// An MCP server to register or change; validated (and its header values sealed) by the caller.
#[derive(Clone, Debug)]
pub struct McpServerFields {
    /// Display name.
    pub name: String,
    /// How to speak to it.
    pub transport: McpTransport,
    /// Its address.
    pub url: String,
    /// `[{key, value}]` with sealed values.
    pub headers: Value,
}

/// Registers a server.
///
/// # Errors
/// Fails on a database error.
pub async fn create(
    db: &impl ConnectionTrait,
    workspace_id: i64,
    fields: McpServerFields,
    now: DateTime<Utc>,
) -> Result<mcp_server::Model> {
    Ok(mcp_server::ActiveModel {
        id: Set(Uuid::now_v7()),
        workspace_id: Set(workspace_id),
        name: Set(fields.name),
        transport: Set(fields.transport),
        url: Set(fields.url),
        headers: Set(fields.headers),
        created_at: Set(now),
        updated_at: Set(now),
    }
    .insert(db)
    .await?)
}

/// The server `id` of the workspace.
///
/// # Errors
/// Fails on a database error.
pub async fn find(
    db: &impl ConnectionTrait,
    workspace_id: i64,
    id: Uuid,
) -> Result<Option<mcp_server::Model>> {
    Ok(mcp_server::Entity::find_by_id(id)
        .filter(mcp_server::Column::WorkspaceId.eq(workspace_id))
        .one(db)
        .await?)
}

/// The workspace's servers, oldest first.
///
/// # Errors
/// Fails on a database error.
pub async fn list(
    db: &impl ConnectionTrait,
    workspace_id: i64,
    page: Page,
) -> Result<Paged<mcp_server::Model>> {
    let query = mcp_server::Entity::find()
        .filter(mcp_server::Column::WorkspaceId.eq(workspace_id))
        .order_by_asc(mcp_server::Column::Id);
    fetch_page(db, query, page).await
}

/// Replaces a server's fields.
///
/// # Errors
/// Fails on a database error.
pub async fn update(
    db: &impl ConnectionTrait,
    current: mcp_server::Model,
    fields: McpServerFields,
    now: DateTime<Utc>,
) -> Result<mcp_server::Model> {
    let mut active: mcp_server::ActiveModel = current.into();
    active.name = Set(fields.name);
    active.transport = Set(fields.transport);
    active.url = Set(fields.url);
    active.headers = Set(fields.headers);
    active.updated_at = Set(now);
    Ok(active.update(db).await?)
}

/// Deletes a server, detaching it from every assistant; `false` when there was none.
///
/// # Errors
/// Fails on a database error.
pub async fn delete(db: &impl ConnectionTrait, workspace_id: i64, id: Uuid) -> Result<bool> {
    if find(db, workspace_id, id).await?.is_none() {
        return Ok(false);
    }
    assistant_mcp_server::Entity::delete_many()
        .filter(assistant_mcp_server::Column::McpServerId.eq(id))
        .exec(db)
        .await?;
    mcp_server::Entity::delete_by_id(id).exec(db).await?;
    Ok(true)
}

/// Attaches a server to an assistant; attaching twice changes nothing.
///
/// # Errors
/// Fails on a database error.
pub async fn attach(
    db: &impl ConnectionTrait,
    workspace_id: i64,
    assistant_id: Uuid,
    mcp_server_id: Uuid,
    now: DateTime<Utc>,
) -> Result<()> {
    assistant_mcp_server::Entity::insert(assistant_mcp_server::ActiveModel {
        id: Set(Uuid::now_v7()),
        workspace_id: Set(workspace_id),
        assistant_id: Set(assistant_id),
        mcp_server_id: Set(mcp_server_id),
        created_at: Set(now),
    })
    .on_conflict(
        OnConflict::columns([
            assistant_mcp_server::Column::AssistantId,
            assistant_mcp_server::Column::McpServerId,
        ])
        .do_nothing()
        .to_owned(),
    )
    .exec_without_returning(db)
    .await?;
    Ok(())
}

/// Detaches a server from an assistant; detaching what is not attached changes nothing.
///
/// # Errors
/// Fails on a database error.
pub async fn detach(
    db: &impl ConnectionTrait,
    assistant_id: Uuid,
    mcp_server_id: Uuid,
) -> Result<()> {
    assistant_mcp_server::Entity::delete_many()
        .filter(assistant_mcp_server::Column::AssistantId.eq(assistant_id))
        .filter(assistant_mcp_server::Column::McpServerId.eq(mcp_server_id))
        .exec(db)
        .await?;
    Ok(())
}

/// The servers attached to an assistant, in the order they were attached.
///
/// # Errors
/// Fails on a database error.
pub async fn attached_to(
    db: &impl ConnectionTrait,
    assistant_id: Uuid,
) -> Result<Vec<mcp_server::Model>> {
    let attachments = assistant_mcp_server::Entity::find()
        .filter(assistant_mcp_server::Column::AssistantId.eq(assistant_id))
        .order_by_asc(assistant_mcp_server::Column::CreatedAt)
        .order_by_asc(assistant_mcp_server::Column::Id)
        .all(db)
        .await?;
    if attachments.is_empty() {
        return Ok(Vec::new());
    }
    let ids = Query::select()
        .column(assistant_mcp_server::Column::McpServerId)
        .from(assistant_mcp_server::Entity)
        .and_where(assistant_mcp_server::Column::AssistantId.eq(assistant_id))
        .to_owned();
    let servers = mcp_server::Entity::find()
        .filter(mcp_server::Column::Id.in_subquery(ids))
        .all(db)
        .await?;
    Ok(attachments
        .iter()
        .filter_map(|a| servers.iter().find(|s| s.id == a.mcp_server_id).cloned())
        .collect())
}
