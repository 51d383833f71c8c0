//! A file in a multipart form, checked as it arrives: a type WhatsApp takes (400 naming
//! `file` otherwise), written to the media store's staging within its kind's limit (413 naming
//! `file` past it), never held whole in memory; and sent on to Meta for a channel's number.

use axum::extract::Multipart;
use axum::extract::multipart::Field;
use parley_actors::media::store::{Staged, WriteError};
use parley_actors::media::upload::{kind_of_type, upload};
use parley_persistence::entities::channel;
use parley_persistence::values::MediaKind;

use crate::http::AppState;
use crate::http::error::{ApiError, Result};

/// What an upload's file part is: a type WhatsApp takes, its kind, and the name it goes by
/// (its last path segment, never a path).
pub(crate) struct CheckedFile {
    pub(crate) mime_type: String,
    pub(crate) kind: MediaKind,
    pub(crate) file_name: String,
}

impl CheckedFile {
    /// The file part `field`, typed by `declared` (the form's `type`) or its own type.
    pub(crate) fn of(declared: Option<&str>, field: &Field<'_>) -> Result<Self> {
        let mime_type = declared
            .map(str::to_owned)
            .or_else(|| field.content_type().map(str::to_owned))
            .unwrap_or_default();
        let kind = kind_of_type(&mime_type).ok_or_else(|| {
            ApiError::invalid_field(
                ["file"],
                format!(
                    "is of type {mime_type:?}, which WhatsApp does not send (JPEG or PNG \
                     images, WebP stickers, AAC, AMR, MPEG, MP4 or OGG audio, MP4 or 3GPP \
                     video, text, PDF or Office documents)"
                ),
            )
        })?;
        let file_name = field
            .file_name()
            .map(|n| n.rsplit(['/', '\\']).next().unwrap_or(n).to_owned())
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| kind.as_str().to_owned());
        Ok(Self {
            mime_type,
            kind,
            file_name,
        })
    }
}

/// Writes the file part to staging within its kind's limit (413 naming `file` past it).
pub(crate) async fn stage_file(
    state: &AppState,
    field: Field<'_>,
    checked: &CheckedFile,
) -> Result<Staged> {
    let limit = state.settings.media.settings().limits.of(checked.kind);
    match state.actors.media().stage(Box::pin(field), limit).await {
        Ok(staged) => Ok(staged),
        Err(WriteError::TooLarge { limit }) => Err(ApiError::file_too_large(
            "file",
            format!(
                "is larger than the {limit} bytes WhatsApp takes for {}",
                checked.kind.as_str()
            ),
        )),
        Err(WriteError::Source(error)) => Err(ApiError::invalid_field(
            ["file"],
            format!("could not be read: {}", error.body_text()),
        )),
        Err(WriteError::Store(error)) => Err(ApiError::Internal(error.into())),
    }
}

/// The next field of `form`; 400 naming `file` when the form ends without one.
pub(crate) async fn next_field<'f>(form: &'f mut Multipart) -> Result<Field<'f>> {
    form.next_field()
        .await
        .map_err(|e| {
            ApiError::invalid_field(["file"], format!("could not be read: {}", e.body_text()))
        })?
        .ok_or_else(|| ApiError::invalid_field(["file"], "is required"))
}

/// Stages the file part (checked as `checked` says) and streams it to Meta's upload endpoint
/// for `channel`'s number; answers Meta's media id and the file's size.
pub(crate) async fn upload_to_meta(
    state: &AppState,
    channel: &channel::Model,
    field: Field<'_>,
    checked: &CheckedFile,
) -> Result<(String, u64)> {
    let staged = stage_file(state, field, checked).await?;
    let size = staged.size;
    let token = channel
        .access_token_encrypted
        .as_deref()
        .and_then(|sealed| state.secrets.open(sealed).ok());
    let media_id = upload(
        state.actors.media(),
        state.actors.graph(),
        channel,
        token.as_deref(),
        staged,
        &checked.mime_type,
        &checked.file_name,
    )
    .await?;
    Ok((media_id, size))
}
