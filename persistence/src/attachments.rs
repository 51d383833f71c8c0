//! Attachments: the files messages carry. A message's attachments are inserted with it (see
//! [`crate::conversations::append_message`]); the media worker reads the pending ones that are
//! due and settles each as stored or failed; reads answer them beside their messages.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use sea_orm::sea_query::Expr;
use sea_orm::{ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter, QueryOrder, QuerySelect};
use uuid::Uuid;

use crate::Result;
use crate::entities::{attachment, message};
use crate::values::{AttachmentStatus, MediaKind};

mod retention;

pub use self::retention::{RetentionScope, past_retention, retire};

/// A file a message carries, as the message arrived with it.
#[derive(Clone, Debug, PartialEq)]
pub struct NewAttachment {
    /// Its id, chosen before it is stored (the `message.received` event names it).
    pub id: Uuid,
    /// What kind of file.
    pub kind: MediaKind,
    /// Its MIME type, as Meta gave it.
    pub mime_type: Option<String>,
    /// Its SHA-256 as Meta gave it (hex or base64).
    pub sha256: Option<String>,
    /// The caption.
    pub caption: Option<String>,
    /// A document's file name.
    pub file_name: Option<String>,
    /// Whether an audio is a voice note.
    pub voice: bool,
    /// Meta's media id, to fetch it by.
    pub meta_media_id: Option<String>,
    /// When Meta forgets the media id.
    pub expires_at: Option<DateTime<Utc>>,
}

impl NewAttachment {
    /// Where it stands when stored: pending, or failed at once when there is no media id to
    /// fetch it by.
    pub fn status(&self) -> AttachmentStatus {
        if self.meta_media_id.is_some() {
            AttachmentStatus::Pending
        } else {
            AttachmentStatus::Failed
        }
    }
}

/// The rows of `new`, carried by `message` (of `identity_id`): pending, due at once, or failed
/// at once when there is no media id to fetch them by.
pub(crate) fn rows(
    message: &message::Model,
    identity_id: Uuid,
    new: &[NewAttachment],
) -> Vec<attachment::Model> {
    new.iter()
        .map(|file| {
            let status = file.status();
            let failure = (status == AttachmentStatus::Failed).then(|| "no_media_id".to_owned());
            attachment::Model {
                id: file.id,
                message_id: message.id,
                workspace_id: message.workspace_id,
                channel_id: message.channel_id,
                identity_id,
                kind: file.kind,
                mime_type: file.mime_type.clone(),
                size: None,
                sha256: file.sha256.clone(),
                caption: file.caption.clone(),
                file_name: file.file_name.clone(),
                voice: file.voice,
                status,
                failure,
                storage_key: None,
                meta_media_id: file.meta_media_id.clone(),
                expires_at: file.expires_at,
                attempts: 0,
                next_attempt_at: message.created_at,
                transcript: None,
                created_at: message.created_at,
                updated_at: message.created_at,
            }
        })
        .collect()
}

/// Inserts `rows` (nothing when there are none).
pub(crate) async fn insert(db: &impl ConnectionTrait, rows: &[attachment::Model]) -> Result<()> {
    if rows.is_empty() {
        return Ok(());
    }
    attachment::Entity::insert_many(rows.iter().cloned().map(attachment::ActiveModel::from))
        .exec_without_returning(db)
        .await?;
    Ok(())
}

/// The attachments of `messages`, by message, each message's in the order they came.
///
/// # Errors
/// Fails on a database error.
pub async fn of_messages(
    db: &impl ConnectionTrait,
    messages: &[Uuid],
) -> Result<HashMap<Uuid, Vec<attachment::Model>>> {
    let mut by_message: HashMap<Uuid, Vec<attachment::Model>> = HashMap::new();
    if messages.is_empty() {
        return Ok(by_message);
    }
    let rows = attachment::Entity::find()
        .filter(attachment::Column::MessageId.is_in(messages.iter().copied()))
        .order_by_asc(attachment::Column::Id)
        .all(db)
        .await?;
    for row in rows {
        by_message.entry(row.message_id).or_default().push(row);
    }
    Ok(by_message)
}

/// The attachment `id` of `workspace_id`.
///
/// # Errors
/// Fails on a database error.
pub async fn find(
    db: &impl ConnectionTrait,
    workspace_id: i64,
    id: Uuid,
) -> Result<Option<attachment::Model>> {
    Ok(attachment::Entity::find_by_id(id)
        .filter(attachment::Column::WorkspaceId.eq(workspace_id))
        .one(db)
        .await?)
}

/// Pending attachments due at `now`, oldest first, leaving out `held` (being fetched); only
/// those of `channels` when given.
///
/// # Errors
/// Fails on a database error.
pub async fn due(
    db: &impl ConnectionTrait,
    now: DateTime<Utc>,
    limit: u64,
    held: &[Uuid],
) -> Result<Vec<attachment::Model>> {
    let mut query = attachment::Entity::find()
        .filter(attachment::Column::Status.eq(AttachmentStatus::Pending))
        .filter(attachment::Column::NextAttemptAt.lte(now));
    if !held.is_empty() {
        query = query.filter(attachment::Column::Id.is_not_in(held.iter().copied()));
    }
    Ok(query
        .order_by_asc(attachment::Column::NextAttemptAt)
        .limit(limit)
        .all(db)
        .await?)
}

/// What a stored file is.
#[derive(Clone, Debug)]
pub struct StoredFile {
    /// Where the media store keeps it.
    pub storage_key: String,
    /// Its SHA-256, hex.
    pub sha256: String,
    /// Its size in bytes.
    pub size: i64,
    /// Its MIME type.
    pub mime_type: Option<String>,
}

/// Marks the attachment `of` stored as `file`, its bytes counted in its workspace's usage in
/// the same transaction `db` is. A row no longer pending (deleted, or settled by
/// another node meanwhile) is left as it is; answers whether this call stored it.
///
/// # Errors
/// Fails on a database error.
pub async fn stored(
    db: &impl ConnectionTrait,
    of: &attachment::Model,
    file: StoredFile,
    now: DateTime<Utc>,
) -> Result<bool> {
    let (id, size) = (of.id, file.size);
    let mut update = attachment::Entity::update_many()
        .col_expr(
            attachment::Column::Status,
            Expr::value(AttachmentStatus::Stored),
        )
        .col_expr(
            attachment::Column::StorageKey,
            Some(file.storage_key).into(),
        )
        .col_expr(attachment::Column::Sha256, Some(file.sha256).into())
        .col_expr(attachment::Column::Size, Some(file.size).into())
        .col_expr(attachment::Column::Failure, Option::<String>::None.into())
        .col_expr(attachment::Column::UpdatedAt, now.into());
    if let Some(mime_type) = file.mime_type {
        update = update.col_expr(attachment::Column::MimeType, Some(mime_type).into());
    }
    let done = update
        .filter(attachment::Column::Id.eq(id))
        .filter(attachment::Column::Status.eq(AttachmentStatus::Pending))
        .exec(db)
        .await?;
    if done.rows_affected != 1 {
        return Ok(false);
    }
    let kept =
        crate::usage::Count::new(of.workspace_id, now, crate::usage::Metric::MediaBytes, size);
    crate::usage::add(db, &[kept.on(of.channel_id)]).await?;
    Ok(true)
}

/// Leaves the attachment pending after a transient failure, to be fetched again at `at`;
/// keeps why.
///
/// # Errors
/// Fails on a database error.
pub async fn retry_later(
    db: &impl ConnectionTrait,
    id: Uuid,
    attempts: i32,
    at: DateTime<Utc>,
    failure: String,
) -> Result<()> {
    attachment::Entity::update_many()
        .col_expr(attachment::Column::Attempts, attempts.into())
        .col_expr(attachment::Column::NextAttemptAt, at.into())
        .col_expr(attachment::Column::Failure, Some(failure).into())
        .col_expr(attachment::Column::UpdatedAt, Utc::now().into())
        .filter(attachment::Column::Id.eq(id))
        .filter(attachment::Column::Status.eq(AttachmentStatus::Pending))
        .exec(db)
        .await?;
    Ok(())
}

/// Fails the attachment for good, with why (`expired`, `sha256_mismatch`, `too_large`, …).
///
/// # Errors
/// Fails on a database error.
pub async fn failed(
    db: &impl ConnectionTrait,
    id: Uuid,
    attempts: i32,
    failure: String,
    now: DateTime<Utc>,
) -> Result<()> {
    attachment::Entity::update_many()
        .col_expr(
            attachment::Column::Status,
            Expr::value(AttachmentStatus::Failed),
        )
        .col_expr(attachment::Column::Attempts, attempts.into())
        .col_expr(attachment::Column::Failure, Some(failure).into())
        .col_expr(attachment::Column::UpdatedAt, now.into())
        .filter(attachment::Column::Id.eq(id))
        .filter(attachment::Column::Status.eq(AttachmentStatus::Pending))
        .exec(db)
        .await?;
    Ok(())
}

/// The storage keys of `identity_id`'s stored files, to delete with them.
///
/// # Errors
/// Fails on a database error.
pub async fn keys_of_identity(db: &impl ConnectionTrait, identity_id: Uuid) -> Result<Vec<String>> {
    let keys: Vec<Option<String>> = attachment::Entity::find()
        .select_only()
        .column(attachment::Column::StorageKey)
        .filter(attachment::Column::IdentityId.eq(identity_id))
        .filter(attachment::Column::StorageKey.is_not_null())
        .into_tuple()
        .all(db)
        .await?;
    let mut keys: Vec<String> = keys.into_iter().flatten().collect();
    keys.sort_unstable();
    keys.dedup();
    Ok(keys)
}

/// Those of `keys` no attachment refers to any more: files the store may delete (a content
/// address is shared by every attachment of the same file in a workspace).
///
/// # Errors
/// Fails on a database error.
pub async fn unreferenced(db: &impl ConnectionTrait, keys: &[String]) -> Result<Vec<String>> {
    if keys.is_empty() {
        return Ok(Vec::new());
    }
    let used: Vec<Option<String>> = attachment::Entity::find()
        .select_only()
        .column(attachment::Column::StorageKey)
        .filter(attachment::Column::StorageKey.is_in(keys.iter().cloned()))
        .into_tuple()
        .all(db)
        .await?;
    let used: Vec<String> = used.into_iter().flatten().collect();
    Ok(keys
        .iter()
        .filter(|key| !used.contains(key))
        .cloned()
        .collect())
}

/// Records what the audio `attachment_id` says, and makes its message read `content` (the
/// history shows the words), in one transaction.
///
/// # Errors
/// Fails on a database error; nothing is changed then.
pub async fn transcribed(
    db: &sea_orm::DatabaseConnection,
    attachment_id: Uuid,
    message_id: Uuid,
    transcript: &str,
    content: &str,
) -> Result<()> {
    let txn = crate::begin_write(db).await?;
    attachment::Entity::update_many()
        .col_expr(
            attachment::Column::Transcript,
            Some(transcript.to_owned()).into(),
        )
        .col_expr(attachment::Column::UpdatedAt, Utc::now().into())
        .filter(attachment::Column::Id.eq(attachment_id))
        .exec(&txn)
        .await?;
    message::Entity::update_many()
        .col_expr(message::Column::Content, content.to_owned().into())
        .filter(message::Column::Id.eq(message_id))
        .exec(&txn)
        .await?;
    txn.commit().await?;
    Ok(())
}
