//! Fetching one attachment from Meta: the media id gives a download URL (it lives five
//! minutes), the URL gives the file, streamed into the media store while it is digested;
//! Meta's digest must match and the kind's size limit must hold. What went wrong decides
//! what happens next: a transient failure is tried again, a media id Meta forgot, a file too
//! large or not the file Meta described fails for good.

use std::time::Duration;

use base64::Engine;
use futures_util::StreamExt;
use parley_persistence::attachments::StoredFile;
use parley_persistence::entities::{attachment, channel};
use parley_persistence::{channels, clock};

use super::MediaDeps;
use super::store::{MediaStore, StoreError, WriteError};
use super::upload::SANDBOX_MEDIA_PREFIX;
use crate::whatsapp::{GraphError, MetaErrorKind};

/// What became of a fetch.
#[derive(Debug)]
pub(crate) enum Fetched {
    /// The file is kept.
    Stored(StoredFile),
    /// It may work later: why it did not now.
    Retry(String),
    /// It never will: why (`expired`, `sha256_mismatch`, `too_large`, …).
    Failed(String),
}

/// Longest wait for the next bytes of a download before it is given up (and tried again).
const STALL: Duration = Duration::from_secs(30);

/// Fetches `row` and keeps it in the store.
pub(crate) async fn fetch(deps: &MediaDeps, row: &attachment::Model) -> Fetched {
    let now = clock::now();
    if row.expires_at.is_some_and(|at| at <= now) {
        return Fetched::Failed("expired".to_owned());
    }
    let Some(media_id) = row.meta_media_id.as_deref() else {
        return Fetched::Failed("no_media_id".to_owned());
    };
    if let Some(sha256) = media_id.strip_prefix(SANDBOX_MEDIA_PREFIX) {
        return kept_by_sandbox(deps, row, sha256).await;
    }
    let channel = match channels::find_in_any_workspace(&deps.db, row.channel_id).await {
        Ok(Some(channel)) => channel,
        Ok(None) => return Fetched::Failed("channel_deleted".to_owned()),
        Err(error) => return Fetched::Retry(error.to_string()),
    };
    let Some(token) = token_of(deps, &channel) else {
        return Fetched::Retry("the channel has no usable access token".to_owned());
    };
    let info = match deps.graph.media(&token, media_id).await {
        Ok(info) => info,
        Err(error) => return refused(&error),
    };
    let limit = deps.settings.limits.of(row.kind);
    if info.file_size.is_some_and(|size| size > limit) {
        return Fetched::Failed("too_large".to_owned());
    }
    let response = match deps.graph.download(&token, &info.url).await {
        Ok(response) => response,
        // An expired URL (or any refusal of the download) is looked up again next time.
        Err(error) => return Fetched::Retry(format!("download: {error}")),
    };
    let body = response
        .bytes_stream()
        .map(|chunk| chunk.map_err(|e| e.to_string()));
    let body = stall_guard(body);
    let staged = match deps.store.stage(Box::pin(body), limit).await {
        Ok(staged) => staged,
        Err(WriteError::TooLarge { .. }) => return Fetched::Failed("too_large".to_owned()),
        Err(WriteError::Source(error)) => return Fetched::Retry(format!("download: {error}")),
        Err(WriteError::Store(error)) => return Fetched::Retry(error.to_string()),
    };
    let promised = row.sha256.as_deref().or(info.sha256.as_deref());
    if promised.is_some_and(|promised| !same_digest(promised, &staged.sha256)) {
        deps.store.discard(staged).await;
        return Fetched::Failed("sha256_mismatch".to_owned());
    }
    let key = MediaStore::key(row.workspace_id, &staged.sha256);
    let (sha256, size) = (staged.sha256.clone(), staged.size);
    if let Err(error) = deps.store.keep(staged, &key).await {
        return Fetched::Retry(error.to_string());
    }
    Fetched::Stored(StoredFile {
        storage_key: key,
        sha256,
        size: i64::try_from(size).unwrap_or(i64::MAX),
        mime_type: row.mime_type.is_none().then_some(info.mime_type).flatten(),
    })
}

/// A file a person sent on a sandbox channel: the sandbox kept it at its content address when
/// it took the message, so there is nothing to download.
async fn kept_by_sandbox(deps: &MediaDeps, row: &attachment::Model, sha256: &str) -> Fetched {
    if sha256.len() != 64 || !sha256.chars().all(|c| c.is_ascii_hexdigit()) {
        return Fetched::Failed("no_media_id".to_owned());
    }
    let key = MediaStore::key(row.workspace_id, sha256);
    match deps.store.size(&key).await {
        Ok(size) => Fetched::Stored(StoredFile {
            storage_key: key,
            sha256: sha256.to_owned(),
            size: i64::try_from(size).unwrap_or(i64::MAX),
            mime_type: None,
        }),
        Err(StoreError::Missing) => Fetched::Failed("expired".to_owned()),
        Err(error) => Fetched::Retry(error.to_string()),
    }
}

/// What Meta's refusal of a media lookup means: an id it no longer knows has expired; a
/// transient failure is tried again; anything else fails for good, with Meta's words.
fn refused(error: &GraphError) -> Fetched {
    match error {
        GraphError::Api(meta) if meta.code == Some(100) || meta.http_status == Some(404) => {
            Fetched::Failed("expired".to_owned())
        }
        GraphError::Api(meta) if meta.code == Some(131052) => {
            Fetched::Failed(format!("meta_refused: {}", meta.message))
        }
        error if error.kind() == MetaErrorKind::Transient => Fetched::Retry(error.to_string()),
        GraphError::Api(meta) if meta.code == Some(190) => {
            Fetched::Retry("Meta refused the channel's access token".to_owned())
        }
        error => Fetched::Failed(format!("meta_refused: {error}")),
    }
}

/// Whether Meta's digest (hex, or base64 as some of its answers give it) is `hex`.
pub(crate) fn same_digest(promised: &str, hex: &str) -> bool {
    let promised = promised.trim();
    if promised.len() == 64 && promised.chars().all(|c| c.is_ascii_hexdigit()) {
        return promised.eq_ignore_ascii_case(hex);
    }
    base64::engine::general_purpose::STANDARD
        .decode(promised)
        .or_else(|_| base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(promised))
        .is_ok_and(|bytes| hex::encode(bytes) == hex)
}

fn token_of(deps: &MediaDeps, channel: &channel::Model) -> Option<String> {
    let sealed = channel.access_token_encrypted.as_deref()?;
    deps.secrets.open(sealed).ok()
}

/// Ends a download that sends nothing for [`STALL`] with an error (so that a stalled
/// connection is tried again instead of holding a fetch for ever).
fn stall_guard<S>(body: S) -> impl futures_util::Stream<Item = Result<bytes::Bytes, String>>
where
    S: futures_util::Stream<Item = Result<bytes::Bytes, String>> + Send,
{
    futures_util::stream::unfold(Box::pin(body), |mut body| async move {
        match tokio::time::timeout(STALL, body.next()).await {
            Ok(Some(item)) => Some((item, body)),
            Ok(None) => None,
            Err(_) => Some((Err("the download stalled".to_owned()), body)),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metas_digest_is_read_as_hex_or_base64() {
        let hex = "b94d27b9934d3e08a52e52d7da7dabfac484efe37a5380ee9088f7ace2efcde9";
        assert!(same_digest(hex, hex));
        assert!(same_digest(&hex.to_uppercase(), hex));
        assert!(same_digest(
            "uU0nuZNNPgilLlLX2n2r+sSE7+N6U4DukIj3rOLvzek=",
            hex
        ));
        assert!(!same_digest(
            "uU0nuZNNPgilLlLX2n2r+sSE7+N6U4DukIj3rOLvzeX=",
            hex
        ));
        assert!(!same_digest("not a digest", hex));
    }

    #[test]
    fn a_forgotten_media_id_has_expired_and_a_transient_failure_is_tried_again() {
        let forgotten = GraphError::Api(crate::whatsapp::MetaError {
            code: Some(100),
            message: "Unsupported get request".to_owned(),
            title: None,
            details: None,
            http_status: Some(400),
        });
        assert!(matches!(refused(&forgotten), Fetched::Failed(ref why) if why == "expired"));
        let down = GraphError::Connection("refused".to_owned());
        assert!(matches!(refused(&down), Fetched::Retry(_)));
    }
}
