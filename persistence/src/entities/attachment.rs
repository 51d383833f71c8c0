//! One file a message carries: what Meta said of it, and where Parley keeps it.

use sea_orm::entity::prelude::*;

use crate::values::{AttachmentStatus, MediaKind};

/// One row of `attachments`.
#[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
#[sea_orm(table_name = "attachments")]
pub struct Model {
    /// UUID v7.
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: Uuid,
    /// The message that carries it.
    pub message_id: Uuid,
    /// Owning workspace.
    pub workspace_id: i64,
    /// The channel it came on (whose token fetches it, whose owner does the work).
    pub channel_id: Uuid,
    /// The person who sent it (deleting them deletes the file).
    pub identity_id: Uuid,
    /// What kind of file.
    pub kind: MediaKind,
    /// Its MIME type, as Meta gave it.
    pub mime_type: Option<String>,
    /// Its size in bytes, once stored.
    pub size: Option<i64>,
    /// Its SHA-256 (hex): Meta's promise while pending, the file's own once stored.
    pub sha256: Option<String>,
    /// The caption the person wrote.
    #[sea_orm(column_type = "Text", nullable)]
    pub caption: Option<String>,
    /// A document's file name, as the person's phone gave it (shown, never used as a path).
    #[sea_orm(column_type = "Text", nullable)]
    pub file_name: Option<String>,
    /// Whether an audio is a voice note.
    pub voice: bool,
    /// Where it stands.
    pub status: AttachmentStatus,
    /// Why it failed, or why the last fetch did.
    #[sea_orm(column_type = "Text", nullable)]
    pub failure: Option<String>,
    /// Where the media store keeps it (`{workspace}/{sha256}`), once stored.
    pub storage_key: Option<String>,
    /// Meta's media id, while it can be fetched.
    pub meta_media_id: Option<String>,
    /// When Meta forgets the media id (7 days after the webhook).
    pub expires_at: Option<DateTimeUtc>,
    /// Fetches tried.
    pub attempts: i32,
    /// When the next fetch is due (for a pending one).
    pub next_attempt_at: DateTimeUtc,
    /// What an audio says, once transcribed.
    #[sea_orm(column_type = "Text", nullable)]
    pub transcript: Option<String>,
    /// When the message that carries it was stored.
    pub created_at: DateTimeUtc,
    /// Last change.
    pub updated_at: DateTimeUtc,
}

/// Relations are expressed through explicit queries.
#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
