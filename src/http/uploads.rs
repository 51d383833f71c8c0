//! `POST /channels/{channel_id}/waba/media`: a file the business will send, uploaded for the
//! channel's number. The file is checked before anything reaches Meta (a type WhatsApp takes,
//! within its kind's limit: 400 or 413 naming `file`) while it streams to staging, never held
//! whole in memory; then it streams to Meta, whose media id the answer carries. These routes
//! take bodies up to the largest file WhatsApp sends and wait on Meta under their own limit.

use axum::extract::{DefaultBodyLimit, Multipart, State};
use serde::Serialize;

use crate::domain::Permission;
use crate::http::AppState;
use crate::http::auth::Caller;
use crate::http::envelope::Envelope;
use crate::http::error::{ApiError, Refusal, Result};
use crate::http::extract::Path;
use crate::http::extract::upload::{CheckedFile, next_field, upload_to_meta};
use crate::http::lookup::find_channel;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

/// Bytes a multipart body may carry beyond its file (boundaries, the other fields).
const FORM_OVERHEAD: usize = 64 * 1024;

/// The body limit of a form that carries a file of at most `largest_file` bytes.
pub(crate) fn form_limit(largest_file: u64) -> usize {
    usize::try_from(largest_file)
        .unwrap_or(usize::MAX)
        .saturating_add(FORM_OVERHEAD)
}

pub(crate) fn router(body_limit: usize) -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(upload_media))
        .route_layer(DefaultBodyLimit::max(body_limit))
}

/// What an upload answers.
#[derive(Debug, Serialize, utoipa::ToSchema)]
struct UploadedRecord {
    /// The id a send names (`media.media_id`); Meta keeps an upload 30 days.
    media_id: String,
    /// `image`, `audio`, `video`, `document` or `sticker`.
    kind: String,
    /// The file's type, as uploaded.
    mime_type: String,
    /// Its size in bytes.
    size: u64,
}

/// The multipart form of an upload.
#[derive(utoipa::ToSchema)]
#[allow(dead_code)] // The schema of the form; the body is read field by field.
struct UploadForm {
    /// The file, with its `Content-Type`: JPEG or PNG images, WebP stickers, AAC, AMR, MPEG,
    /// MP4 or OGG audio, MP4 or 3GPP video, text, PDF and Office documents.
    #[schema(value_type = String, format = Binary)]
    file: Vec<u8>,
    /// The file's type, when its part has none (give it before `file`).
    #[schema(value_type = Option<String>)]
    r#type: Option<String>,
}

/// Upload a file to send.
///
/// Checked before it reaches Meta: a type WhatsApp takes (400 naming `file` otherwise) within
/// its kind's limit (image 5 MB, audio and video 16 MB, document 100 MB, sticker 500 KB; 413
/// naming `file`). Answers the media id that operator replies name in `media.media_id`.
#[utoipa::path(
    post,
    path = "/channels/{channel_id}/waba/media",
    tag = "messages",
    params(("channel_id" = String, Path, format = Uuid, description = "Channel id")),
    request_body(content = UploadForm, content_type = "multipart/form-data"),
    responses(
        (status = 201, body = Envelope<UploadedRecord>),
        (status = 400, body = Refusal), (status = 413, body = Refusal),
        (status = 409, body = Refusal), (status = 502, body = Refusal),
    ),
)]
#[tracing::instrument(skip_all, fields(workspace_id = caller.workspace_id, channel_id = %channel_id))]
async fn upload_media(
    caller: Caller,
    State(state): State<AppState>,
    Path(channel_id): Path<String>,
    mut form: Multipart,
) -> Result<Envelope<UploadedRecord>> {
    caller.require(Permission::Write)?;
    let channel = find_channel(&state, &caller, &channel_id).await?;
    if !channel.active {
        return Err(ApiError::Conflict("The channel is not active".to_owned()));
    }
    let mut declared: Option<String> = None;
    loop {
        let field = next_field(&mut form).await?;
        match field.name() {
            Some("type") => {
                declared = Some(field.text().await.unwrap_or_default().trim().to_owned());
            }
            Some("file") => {
                let checked = CheckedFile::of(declared.as_deref(), &field)?;
                let (media_id, size) = upload_to_meta(&state, &channel, field, &checked).await?;
                let record = UploadedRecord {
                    media_id,
                    kind: checked.kind.as_str().to_owned(),
                    mime_type: checked.mime_type,
                    size,
                };
                return Ok(Envelope::created("Media uploaded", record));
            }
            _ => {}
        }
    }
}
