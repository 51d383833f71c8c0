//! Media: the files people send (pictures, voice notes, videos, documents, stickers). A media
//! message is stored with its attachments in the transaction that stores the message; the
//! media worker (`root/media`, on a cluster the channel's owner) fetches each pending one from
//! Meta into the [`MediaStore`], retrying transient failures with a growing backoff until
//! Meta forgets the media id (seven days after the webhook). A restart loses nothing: a
//! fetch in flight is still pending in the table, and the next sweep takes it again.

mod fetch;
pub mod store;
pub mod upload;
pub(crate) mod worker;

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use parley_persistence::DatabaseConnection;
use parley_persistence::attachments::NewAttachment;
use parley_persistence::values::MediaKind;

pub use self::store::MediaStore;
pub use self::worker::MediaBell;
use crate::cluster::Placement;
use crate::domain::SecretBox;
use crate::whatsapp::GraphClient;
use crate::whatsapp::message::InboundMedia;

/// How long Meta keeps a media id after the webhook that carried it.
pub const MEDIA_ID_LIFETIME: chrono::Duration = chrono::Duration::days(7);

/// The largest file kept of each kind, in bytes; Meta's own limits by default.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MediaLimits {
    /// Images (Meta: 5 MB).
    pub image: u64,
    /// Audio and voice notes (Meta: 16 MB).
    pub audio: u64,
    /// Videos (Meta: 16 MB).
    pub video: u64,
    /// Documents (Meta: 100 MB).
    pub document: u64,
    /// Stickers (Meta: 500 KB animated).
    pub sticker: u64,
}

impl Default for MediaLimits {
    fn default() -> Self {
        const MB: u64 = 1024 * 1024;
        Self {
            image: 5 * MB,
            audio: 16 * MB,
            video: 16 * MB,
            document: 100 * MB,
            sticker: 500 * 1024,
        }
    }
}

impl MediaLimits {
    /// The largest limit of any kind.
    pub fn largest(&self) -> u64 {
        [
            self.image,
            self.audio,
            self.video,
            self.document,
            self.sticker,
        ]
        .into_iter()
        .max()
        .unwrap_or(0)
    }

    /// The limit of `kind`.
    pub fn of(&self, kind: MediaKind) -> u64 {
        match kind {
            MediaKind::Image => self.image,
            MediaKind::Audio => self.audio,
            MediaKind::Video => self.video,
            MediaKind::Document => self.document,
            MediaKind::Sticker => self.sticker,
        }
    }
}

/// How the media worker works; from configuration.
#[derive(Clone, Debug)]
pub struct MediaSettings {
    /// Fetches at once on this node.
    pub concurrency: usize,
    /// How often the table is looked at for due fetches (retries, and what a wake-up missed).
    pub sweep: Duration,
    /// First wait before a failed fetch is tried again; doubles per attempt.
    pub retry_base: Duration,
    /// Longest wait between attempts.
    pub retry_max: Duration,
    /// Largest file kept per kind.
    pub limits: MediaLimits,
    /// Files are deleted this long after their message (`None`: kept for ever).
    pub retention: Option<chrono::Duration>,
    /// How often files past the retention are looked for.
    pub retention_sweep: Duration,
}

impl Default for MediaSettings {
    fn default() -> Self {
        Self {
            concurrency: 8,
            sweep: Duration::from_secs(2),
            retry_base: Duration::from_secs(2),
            retry_max: Duration::from_secs(15 * 60),
            limits: MediaLimits::default(),
            retention: None,
            retention_sweep: Duration::from_secs(3600),
        }
    }
}

/// What the media worker needs.
#[derive(Clone, Debug)]
pub struct MediaDeps {
    /// Connection pool.
    pub db: DatabaseConnection,
    /// A file's being stored is written with other writes (one commit for many on a burst).
    pub writer: parley_persistence::GroupCommit,
    /// Where files are kept.
    pub store: MediaStore,
    /// Meta's Graph API (media lookups and downloads).
    pub graph: GraphClient,
    /// Opens the channels' access tokens.
    pub secrets: Arc<SecretBox>,
    /// Pace, retries and limits.
    pub settings: MediaSettings,
    /// Which channels' media is fetched here (all, on a single node).
    pub placement: Placement,
    /// Rung when media messages are stored.
    pub bell: MediaBell,
}

/// The attachment row of a file a person sent with a message received at `received`; `None`
/// for a kind Parley does not keep.
pub(crate) fn new_attachment(
    media: &InboundMedia,
    received: DateTime<Utc>,
) -> Option<NewAttachment> {
    let kind = MediaKind::parse(&media.kind)?;
    Some(NewAttachment {
        id: uuid::Uuid::now_v7(),
        kind,
        mime_type: media.mime_type.clone(),
        sha256: media.sha256.clone(),
        caption: media.caption.clone(),
        file_name: media.file_name.clone(),
        voice: media.voice,
        meta_media_id: media.media_id.clone(),
        expires_at: Some(received + MEDIA_ID_LIFETIME),
    })
}

/// How an attachment is told before it is fetched (the `message.received` event): as the
/// API's records show it, with no size yet.
pub(crate) fn pending_record(file: &NewAttachment) -> serde_json::Value {
    serde_json::json!({
        "id": file.id,
        "kind": file.kind,
        "mime_type": file.mime_type,
        "size": null,
        "caption": file.caption,
        "file_name": file.file_name,
        "status": file.status(),
    })
}

/// Deletes the files at `keys` that no attachment refers to any more (a content address is
/// shared by every copy of the same file in a workspace), once the rows that named them are
/// gone. A file that cannot be deleted now is logged; it is named by no row.
pub async fn delete_files(db: &DatabaseConnection, store: &MediaStore, keys: &[String]) {
    let unreferenced = match parley_persistence::attachments::unreferenced(db, keys).await {
        Ok(unreferenced) => unreferenced,
        Err(error) => {
            tracing::error!(%error, files = keys.len(), "could not tell which files to delete");
            return;
        }
    };
    for key in unreferenced {
        if let Err(error) = store.delete(&key).await {
            tracing::error!(%error, key, "could not delete a file");
        }
    }
}
