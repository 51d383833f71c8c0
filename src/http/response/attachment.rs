//! A file a message carries, as the API shows it beside the message.

use parley_persistence::entities::attachment;
use parley_persistence::values::{AttachmentStatus, MediaKind};
use serde::Serialize;
use uuid::Uuid;

/// A file a message carries, as the API shows it beside the message.
#[derive(Clone, Debug, Serialize, utoipa::ToSchema)]
pub(crate) struct AttachmentRecord {
    /// Its id: `GET /media/{id}` reads the file once it is `stored`.
    id: Uuid,
    kind: MediaKind,
    mime_type: Option<String>,
    /// Its size in bytes, once stored.
    size: Option<i64>,
    caption: Option<String>,
    /// A document's file name, as the person's phone gave it.
    file_name: Option<String>,
    /// `pending` while it is fetched from Meta, `stored` once kept, `failed` for good.
    status: AttachmentStatus,
    /// Why it failed (`expired`, `sha256_mismatch`, `too_large`, …); `null` otherwise.
    failure: Option<String>,
    /// What a voice note or an audio says, once transcribed.
    transcript: Option<String>,
}

impl From<attachment::Model> for AttachmentRecord {
    fn from(a: attachment::Model) -> Self {
        let failure = (a.status == AttachmentStatus::Failed)
            .then_some(a.failure)
            .flatten();
        Self {
            id: a.id,
            kind: a.kind,
            mime_type: a.mime_type,
            size: a.size,
            caption: a.caption,
            file_name: a.file_name,
            status: a.status,
            failure,
            transcript: a.transcript,
        }
    }
}
