//! Files the business sends: an upload is checked (a type WhatsApp takes, within its kind's
//! limit) while it is written to staging, then streamed to Meta's upload endpoint for the
//! channel's number, which answers the media id a send names. A sandbox channel keeps the file
//! itself, under its content address, and answers an id of its own.

use futures_util::StreamExt;
use parley_persistence::entities::channel;
use parley_persistence::values::{Integration, MediaKind};

use super::MediaStore;
use super::store::Staged;
use crate::whatsapp::{GraphClient, GraphError};

/// The MIME types WhatsApp takes, by kind (PROTOCOLS.md, Media).
const TYPES: [(&str, MediaKind); 16] = [
    ("image/jpeg", MediaKind::Image),
    ("image/png", MediaKind::Image),
    ("image/webp", MediaKind::Sticker),
    ("audio/aac", MediaKind::Audio),
    ("audio/amr", MediaKind::Audio),
    ("audio/mpeg", MediaKind::Audio),
    ("audio/mp4", MediaKind::Audio),
    ("audio/ogg", MediaKind::Audio),
    ("video/mp4", MediaKind::Video),
    ("video/3gpp", MediaKind::Video),
    ("text/plain", MediaKind::Document),
    ("application/pdf", MediaKind::Document),
    ("application/msword", MediaKind::Document),
    ("application/vnd.ms-excel", MediaKind::Document),
    ("application/vnd.ms-powerpoint", MediaKind::Document),
    (
        "application/vnd.openxmlformats-officedocument",
        MediaKind::Document,
    ),
];

/// The kind of file a MIME type is, when WhatsApp takes it (`audio/ogg; codecs=opus` is an
/// audio; the Office Open XML types are documents).
pub fn kind_of_type(mime_type: &str) -> Option<MediaKind> {
    let essence = mime_type
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    TYPES.iter().find_map(|(known, kind)| {
        let matches = essence == *known
            || (known.ends_with("officedocument") && essence.starts_with(&format!("{known}.")));
        matches.then_some(*kind)
    })
}

/// The media id the prefix of a sandbox channel's uploads.
pub const SANDBOX_MEDIA_PREFIX: &str = "sandbox.";

/// Sends the staged file to Meta for `channel`'s number with `token` (a sandbox channel keeps
/// it); answers the media id. The staged file is gone afterwards either way.
///
/// # Errors
/// Meta's refusal (131053 for a file it does not take), or why Meta or the store could not be
/// asked.
pub async fn upload(
    store: &MediaStore,
    graph: &GraphClient,
    channel: &channel::Model,
    token: Option<&str>,
    staged: Staged,
    mime_type: &str,
    file_name: &str,
) -> Result<String, GraphError> {
    if channel.integration == Integration::Sandbox {
        let key = MediaStore::key(channel.workspace_id, &staged.sha256);
        let id = format!("{SANDBOX_MEDIA_PREFIX}{}", staged.sha256);
        store
            .keep(staged, &key)
            .await
            .map_err(|e| GraphError::Connection(e.to_string()))?;
        return Ok(id);
    }
    let (Some(token), Some(number)) = (token, channel.phone_number_id.as_deref()) else {
        store.discard(staged).await;
        return Err(GraphError::Malformed(
            "the channel has no access token or phone number id".to_owned(),
        ));
    };
    let read = match store.read(staged.key(), None).await {
        Ok(read) => read,
        Err(error) => {
            store.discard(staged).await;
            return Err(GraphError::Connection(error.to_string()));
        }
    };
    let body =
        reqwest::Body::wrap_stream(read.bytes.map(|chunk| chunk.map_err(std::io::Error::other)));
    let uploaded = graph
        .upload(token, number, body, staged.size, mime_type, file_name)
        .await;
    store.discard(staged).await;
    uploaded
}
