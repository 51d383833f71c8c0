//! Event webhook endpoints: the business's URLs, which events each takes, and the state the
//! delivery actor keeps on them (failing since when, disabled why). Secrets arrive sealed: this
//! crate never sees one in the clear.

use chrono::{DateTime, Utc};
use sea_orm::sea_query::Expr;
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, EntityTrait, IntoActiveModel, QueryFilter,
    QueryOrder, Set,
};
use serde_json::Value;
use uuid::Uuid;

use crate::entities::event_webhook;
use crate::page::fetch_page;
use crate::{Page, Paged, Result};

/// A new endpoint, checked by the caller.
#[derive(Clone, Debug)]
pub struct NewEndpoint {
    /// Where events are posted.
    pub url: String,
    /// The event types it takes (`["*"]`: all).
    pub events: Value,
    /// What the business calls it.
    pub description: Option<String>,
    /// Its signing secret, sealed.
    pub sealed_secret: String,
}

/// Stores an endpoint, enabled.
///
/// # Errors
/// The database's.
pub async fn create(
    db: &impl ConnectionTrait,
    workspace_id: i64,
    new: NewEndpoint,
    now: DateTime<Utc>,
) -> Result<event_webhook::Model> {
    Ok(event_webhook::ActiveModel {
        id: Set(Uuid::now_v7()),
        workspace_id: Set(workspace_id),
        url: Set(new.url),
        description: Set(new.description),
        events: Set(new.events),
        enabled: Set(true),
        secret: Set(new.sealed_secret),
        previous_secret: Set(None),
        previous_secret_until: Set(None),
        failing_since: Set(None),
        disabled_reason: Set(None),
        created_at: Set(now),
        updated_at: Set(now),
    }
    .insert(db)
    .await?)
}

/// The endpoint `id` of the workspace.
///
/// # Errors
/// The database's.
pub async fn find(
    db: &impl ConnectionTrait,
    workspace_id: i64,
    id: Uuid,
) -> Result<Option<event_webhook::Model>> {
    Ok(event_webhook::Entity::find_by_id(id)
        .filter(event_webhook::Column::WorkspaceId.eq(workspace_id))
        .one(db)
        .await?)
}

/// The workspace's endpoints, oldest first.
///
/// # Errors
/// The database's.
pub async fn list(
    db: &impl ConnectionTrait,
    workspace_id: i64,
    page: Page,
) -> Result<Paged<event_webhook::Model>> {
    let query = event_webhook::Entity::find()
        .filter(event_webhook::Column::WorkspaceId.eq(workspace_id))
        .order_by_asc(event_webhook::Column::Id);
    fetch_page(db, query, page).await
}

/// The enabled endpoints of `workspace_id`, or of every workspace: what events are routed by.
///
/// # Errors
/// The database's.
pub async fn enabled(
    db: &impl ConnectionTrait,
    workspace_id: Option<i64>,
) -> Result<Vec<event_webhook::Model>> {
    let mut query = event_webhook::Entity::find().filter(event_webhook::Column::Enabled.eq(true));
    if let Some(workspace_id) = workspace_id {
        query = query.filter(event_webhook::Column::WorkspaceId.eq(workspace_id));
    }
    Ok(query.all(db).await?)
}

/// What a `PATCH` changes; `None` leaves a field as it is.
#[derive(Clone, Debug, Default)]
pub struct EndpointUpdate {
    /// A new URL.
    pub url: Option<String>,
    /// New event types.
    pub events: Option<Value>,
    /// A new description (`Some(None)` clears it).
    pub description: Option<Option<String>>,
    /// Enabled or not; enabling clears why Parley disabled it and its failing streak.
    pub enabled: Option<bool>,
}

/// Applies `update` to `endpoint`.
///
/// # Errors
/// The database's.
pub async fn update(
    db: &impl ConnectionTrait,
    endpoint: event_webhook::Model,
    update: EndpointUpdate,
    now: DateTime<Utc>,
) -> Result<event_webhook::Model> {
    let mut active = endpoint.into_active_model();
    if let Some(url) = update.url {
        active.url = Set(url);
    }
    if let Some(events) = update.events {
        active.events = Set(events);
    }
    if let Some(description) = update.description {
        active.description = Set(description);
    }
    if let Some(enabled) = update.enabled {
        active.enabled = Set(enabled);
        if enabled {
            active.disabled_reason = Set(None);
            active.failing_since = Set(None);
        }
    }
    active.updated_at = Set(now);
    Ok(active.update(db).await?)
}

/// Gives `endpoint` the sealed secret `sealed`; the current one keeps signing until `until`.
///
/// # Errors
/// The database's.
pub async fn rotate(
    db: &impl ConnectionTrait,
    endpoint: event_webhook::Model,
    sealed: String,
    until: DateTime<Utc>,
    now: DateTime<Utc>,
) -> Result<event_webhook::Model> {
    let previous = endpoint.secret.clone();
    let mut active = endpoint.into_active_model();
    active.secret = Set(sealed);
    active.previous_secret = Set(Some(previous));
    active.previous_secret_until = Set(Some(until));
    active.updated_at = Set(now);
    Ok(active.update(db).await?)
}

/// Deletes the endpoint (its deliveries go with it); `false` when there was none.
///
/// # Errors
/// The database's.
pub async fn delete(db: &impl ConnectionTrait, workspace_id: i64, id: Uuid) -> Result<bool> {
    let deleted = event_webhook::Entity::delete_many()
        .filter(event_webhook::Column::Id.eq(id))
        .filter(event_webhook::Column::WorkspaceId.eq(workspace_id))
        .exec(db)
        .await?;
    Ok(deleted.rows_affected > 0)
}

/// A delivery to endpoint `id` succeeded: its failing streak ends.
///
/// # Errors
/// The database's.
pub async fn succeeded(db: &impl ConnectionTrait, id: Uuid) -> Result<()> {
    event_webhook::Entity::update_many()
        .col_expr(
            event_webhook::Column::FailingSince,
            Expr::value(Option::<DateTime<Utc>>::None),
        )
        .filter(event_webhook::Column::Id.eq(id))
        .filter(event_webhook::Column::FailingSince.is_not_null())
        .exec(db)
        .await?;
    Ok(())
}

/// A delivery to endpoint `id` failed at `now`: its failing streak starts, if it had none.
///
/// # Errors
/// The database's.
pub async fn failed(db: &impl ConnectionTrait, id: Uuid, now: DateTime<Utc>) -> Result<()> {
    event_webhook::Entity::update_many()
        .col_expr(event_webhook::Column::FailingSince, Expr::value(now))
        .filter(event_webhook::Column::Id.eq(id))
        .filter(event_webhook::Column::FailingSince.is_null())
        .exec(db)
        .await?;
    Ok(())
}

/// Disables endpoint `id` for `reason`; with `failing_before`, only when every delivery to it
/// has failed since before then. Answers whether it was disabled now.
///
/// # Errors
/// The database's.
pub async fn disable(
    db: &impl ConnectionTrait,
    id: Uuid,
    reason: &str,
    failing_before: Option<DateTime<Utc>>,
    now: DateTime<Utc>,
) -> Result<bool> {
    let mut update = event_webhook::Entity::update_many()
        .col_expr(event_webhook::Column::Enabled, Expr::value(false))
        .col_expr(event_webhook::Column::DisabledReason, Expr::value(reason))
        .col_expr(event_webhook::Column::UpdatedAt, Expr::value(now))
        .filter(event_webhook::Column::Id.eq(id))
        .filter(event_webhook::Column::Enabled.eq(true));
    if let Some(before) = failing_before {
        update = update.filter(event_webhook::Column::FailingSince.lt(before));
    }
    Ok(update.exec(db).await?.rows_affected > 0)
}
