//! Templates of sandbox channels, answered in Meta's shape so that campaigns, flows and the send
//! endpoint treat a sandbox channel like a live one.

use chrono::{DateTime, Utc};
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter, QueryOrder, Set,
};
use serde_json::{Value, json};
use uuid::Uuid;

use crate::Result;
use crate::entities::sandbox_template;

/// Stores a template, approved.
///
/// # Errors
/// [`crate::PersistenceError::Conflict`] when the channel has that name in that language.
pub async fn create(
    db: &impl ConnectionTrait,
    channel_id: Uuid,
    name: &str,
    language: &str,
    category: &str,
    components: Value,
    now: DateTime<Utc>,
) -> Result<Value> {
    let stored = sandbox_template::ActiveModel {
        id: Set(Uuid::now_v7()),
        channel_id: Set(channel_id),
        name: Set(name.to_owned()),
        language: Set(language.to_owned()),
        category: Set(category.to_owned()),
        components: Set(components),
        created_at: Set(now),
    }
    .insert(db)
    .await?;
    Ok(as_meta(stored))
}

/// The channel's templates in Meta's shape, oldest first.
///
/// # Errors
/// The database's.
pub async fn list(db: &impl ConnectionTrait, channel_id: Uuid) -> Result<Vec<Value>> {
    Ok(sandbox_template::Entity::find()
        .filter(sandbox_template::Column::ChannelId.eq(channel_id))
        .order_by_asc(sandbox_template::Column::Id)
        .all(db)
        .await?
        .into_iter()
        .map(as_meta)
        .collect())
}

fn as_meta(template: sandbox_template::Model) -> Value {
    json!({"id": template.id.to_string(), "name": template.name, "language": template.language,
           "status": "APPROVED", "category": template.category, "components": template.components})
}
