//! Channels: WhatsApp Business numbers and sandbox channels of a workspace.

use chrono::{DateTime, Utc};
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter, QueryOrder,
    QuerySelect, Set,
};
use serde_json::Value;
use uuid::Uuid;

use crate::entities::channel;
use crate::page::fetch_page;
use crate::values::Integration;
use crate::{Page, Paged, Result};

/// A channel to create; validated (and its token sealed) by the caller.
#[derive(Clone, Debug)]
pub struct NewChannel {
    /// Display name.
    pub name: String,
    /// How it reaches WhatsApp.
    pub integration: Integration,
    /// Whether it starts live.
    pub active: bool,
    /// Settings object.
    pub settings: Value,
    /// Meta's phone number id.
    pub phone_number_id: Option<String>,
    /// Meta's business account id.
    pub business_account_id: Option<String>,
    /// Sealed access token.
    pub access_token_encrypted: Option<String>,
    /// Token for Meta's webhook verification.
    pub verify_token: String,
    /// What Meta said of the number when its credentials were verified.
    pub verified: Option<VerifiedNumber>,
}

/// A number as Meta verified it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct VerifiedNumber {
    /// The number as Meta shows it.
    pub display_phone_number: Option<String>,
    /// The business's verified name.
    pub verified_name: Option<String>,
}

/// Stores a new `waba` channel.
///
/// # Errors
/// [`crate::PersistenceError::Conflict`] when the phone number id is already a channel.
pub async fn create(
    db: &impl ConnectionTrait,
    workspace_id: i64,
    new: NewChannel,
    now: DateTime<Utc>,
) -> Result<channel::Model> {
    Ok(channel::ActiveModel {
        id: Set(Uuid::now_v7()),
        workspace_id: Set(workspace_id),
        name: Set(new.name),
        channel_type: Set("waba".to_owned()),
        integration: Set(new.integration),
        active: Set(new.active),
        settings: Set(new.settings),
        phone_number_id: Set(new.phone_number_id),
        business_account_id: Set(new.business_account_id),
        access_token_encrypted: Set(new.access_token_encrypted),
        worker_id: Set(None),
        verify_token: Set(new.verify_token),
        credentials_error: Set(None),
        display_phone_number: Set(new
            .verified
            .as_ref()
            .and_then(|v| v.display_phone_number.clone())),
        verified_name: Set(new.verified.and_then(|v| v.verified_name)),
        created_at: Set(now),
        updated_at: Set(now),
        deleted_at: Set(None),
    }
    .insert(db)
    .await?)
}

/// The channel `id` of the workspace.
///
/// # Errors
/// Fails on a database error.
pub async fn find(
    db: &impl ConnectionTrait,
    workspace_id: i64,
    id: Uuid,
) -> Result<Option<channel::Model>> {
    Ok(channel::Entity::find_by_id(id)
        .filter(channel::Column::WorkspaceId.eq(workspace_id))
        .filter(channel::Column::DeletedAt.is_null())
        .one(db)
        .await?)
}

/// The workspace's channels, oldest first.
///
/// # Errors
/// Fails on a database error.
pub async fn list(
    db: &impl ConnectionTrait,
    workspace_id: i64,
    page: Page,
) -> Result<Paged<channel::Model>> {
    let query = channel::Entity::find()
        .filter(channel::Column::WorkspaceId.eq(workspace_id))
        .filter(channel::Column::DeletedAt.is_null())
        .order_by_asc(channel::Column::Id);
    fetch_page(db, query, page).await
}

/// What an update changes; `None` leaves a field as it is.
#[derive(Clone, Debug, Default)]
pub struct ChannelChanges {
    /// New name.
    pub name: Option<String>,
    /// New settings object.
    pub settings: Option<Value>,
    /// Activate or deactivate.
    pub active: Option<bool>,
    /// New phone number id.
    pub phone_number_id: Option<String>,
    /// New business account id.
    pub business_account_id: Option<String>,
    /// New sealed access token.
    pub access_token_encrypted: Option<String>,
    /// New synced worker; `Some(None)` unsyncs.
    pub worker_id: Option<Option<Uuid>>,
    /// What Meta said of the number when new credentials were verified.
    pub verified: Option<VerifiedNumber>,
}

/// Applies `changes`.
///
/// # Errors
/// [`crate::PersistenceError::Conflict`] when the new phone number id is another channel's.
pub async fn update(
    db: &impl ConnectionTrait,
    current: channel::Model,
    changes: ChannelChanges,
    now: DateTime<Utc>,
) -> Result<channel::Model> {
    let mut active: channel::ActiveModel = current.into();
    if let Some(name) = changes.name {
        active.name = Set(name);
    }
    if let Some(settings) = changes.settings {
        active.settings = Set(settings);
    }
    if let Some(is_active) = changes.active {
        active.active = Set(is_active);
    }
    if let Some(id) = changes.phone_number_id {
        active.phone_number_id = Set(Some(id));
    }
    if let Some(id) = changes.business_account_id {
        active.business_account_id = Set(Some(id));
    }
    if let Some(token) = changes.access_token_encrypted {
        active.access_token_encrypted = Set(Some(token));
        // New credentials deserve a new chance.
        active.credentials_error = Set(None);
    }
    if let Some(worker_id) = changes.worker_id {
        active.worker_id = Set(worker_id);
    }
    if let Some(verified) = changes.verified {
        active.display_phone_number = Set(verified.display_phone_number);
        active.verified_name = Set(verified.verified_name);
    }
    active.updated_at = Set(now);
    Ok(active.update(db).await?)
}

/// Deletes the channel: it disappears from the API and lets go of its number and credentials,
/// while its conversations stay readable (closed, their channel id kept); `false` when there
/// was none. Run it in a transaction.
///
/// # Errors
/// Fails on a database error.
pub async fn delete(
    db: &impl ConnectionTrait,
    workspace_id: i64,
    id: Uuid,
    now: DateTime<Utc>,
) -> Result<bool> {
    use crate::entities::conversation;
    use crate::values::ConversationStatus;
    let Some(found) = find(db, workspace_id, id).await? else {
        return Ok(false);
    };
    let mut tombstone: channel::ActiveModel = found.into();
    tombstone.active = Set(false);
    tombstone.phone_number_id = Set(None);
    tombstone.access_token_encrypted = Set(None);
    tombstone.worker_id = Set(None);
    tombstone.updated_at = Set(now);
    tombstone.deleted_at = Set(Some(now));
    tombstone.update(db).await?;
    conversation::Entity::update_many()
        .col_expr(
            conversation::Column::Status,
            sea_orm::sea_query::Expr::value(ConversationStatus::Closed),
        )
        .filter(conversation::Column::ChannelId.eq(id))
        .exec(db)
        .await?;
    Ok(true)
}

/// Records that Meta refused the channel's credentials (error 190).
///
/// # Errors
/// Fails on a database error.
pub async fn mark_credentials_invalid(
    db: &impl ConnectionTrait,
    id: Uuid,
    message: &str,
) -> Result<()> {
    channel::Entity::update_many()
        .col_expr(
            channel::Column::CredentialsError,
            Some(message.to_owned()).into(),
        )
        .filter(channel::Column::Id.eq(id))
        .exec(db)
        .await?;
    Ok(())
}

/// A channel by id, whatever its workspace; for webhooks, which carry no key.
///
/// # Errors
/// Fails on a database error.
pub async fn find_in_any_workspace(
    db: &impl ConnectionTrait,
    id: Uuid,
) -> Result<Option<channel::Model>> {
    Ok(channel::Entity::find_by_id(id)
        .filter(channel::Column::DeletedAt.is_null())
        .one(db)
        .await?)
}

/// The channel of a phone number id; for webhooks routed by `metadata.phone_number_id`.
///
/// # Errors
/// Fails on a database error.
pub async fn find_by_phone_number_id(
    db: &impl ConnectionTrait,
    phone_number_id: &str,
) -> Result<Option<channel::Model>> {
    Ok(channel::Entity::find()
        .filter(channel::Column::PhoneNumberId.eq(phone_number_id))
        .filter(channel::Column::DeletedAt.is_null())
        .one(db)
        .await?)
}

/// The id of every channel, deleted ones included (their messages may still wait).
///
/// # Errors
/// Fails on a database error.
pub async fn all_ids(db: &impl ConnectionTrait) -> Result<Vec<Uuid>> {
    Ok(channel::Entity::find()
        .select_only()
        .column(channel::Column::Id)
        .into_tuple()
        .all(db)
        .await?)
}

/// Every active channel, of every workspace.
///
/// # Errors
/// Fails on a database error.
pub async fn all_active(db: &impl ConnectionTrait) -> Result<Vec<channel::Model>> {
    Ok(channel::Entity::find()
        .filter(channel::Column::Active.eq(true))
        .filter(channel::Column::DeletedAt.is_null())
        .all(db)
        .await?)
}
