//! The files people send: `GET /media/{media_id}` streams one (read key, the caller's
//! workspace only) with its type, length, `ETag` (its SHA-256) and `Range`; and how an
//! attachment appears beside its message.

use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt;
use parley_actors::media::store::StoreError;
use parley_persistence::attachments;
use parley_persistence::entities::attachment;
use parley_persistence::values::{AttachmentStatus, MediaKind};
use serde::Serialize;
use uuid::Uuid;

use crate::domain::Permission;
use crate::http::AppState;
use crate::http::auth::Caller;
use crate::http::error::{ApiError, Refusal, Result};
use crate::http::extract::Path;
use crate::http::validation::parse_uuid;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub(crate) fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(get_media))
}

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

/// Read a file a person sent.
///
/// Streams the file with its `Content-Type`, `Content-Length` and `ETag` (its SHA-256); a
/// `Range: bytes=…` header reads part of it (206). A file still being fetched from Meta, or
/// one that could not be, answers 409.
#[utoipa::path(
    get,
    path = "/media/{media_id}",
    tag = "media",
    params(
        ("media_id" = String, Path, format = Uuid, description = "The attachment's id (`attachments[].id` of a message)"),
        ("Range" = Option<String>, Header, description = "`bytes=start-end`: part of the file"),
    ),
    responses(
        (status = 200, description = "The whole file", content_type = "application/octet-stream"),
        (status = 206, description = "The range asked for", content_type = "application/octet-stream"),
        (status = 404, body = Refusal, description = "No such file in the caller's workspace"),
        (status = 409, body = Refusal, description = "`media_pending` (still being fetched) or `media_failed`"),
        (status = 416, body = Refusal, description = "The range lies outside the file"),
    ),
)]
#[tracing::instrument(skip_all, fields(workspace_id = caller.workspace_id))]
async fn get_media(
    caller: Caller,
    State(state): State<AppState>,
    Path(media_id): Path<String>,
    headers: HeaderMap,
) -> Result<Response> {
    caller.require(Permission::Read)?;
    let id = parse_uuid(&media_id, "media_id")?;
    let found = attachments::find(&state.db, caller.workspace_id, id)
        .await?
        .ok_or(ApiError::NotFound("Media"))?;
    let (key, size, sha256) = match (&found.status, &found.storage_key, found.size, &found.sha256) {
        (AttachmentStatus::Stored, Some(key), Some(size), Some(sha256)) => (
            key.clone(),
            u64::try_from(size).unwrap_or(0),
            sha256.clone(),
        ),
        (AttachmentStatus::Failed, ..) => {
            return Err(ApiError::ConflictCode {
                code: "media_failed",
                message: format!(
                    "This file could not be kept: {}",
                    found.failure.as_deref().unwrap_or("unknown")
                ),
            });
        }
        _ => {
            return Err(ApiError::ConflictCode {
                code: "media_pending",
                message: "This file is still being fetched from WhatsApp; ask again shortly"
                    .to_owned(),
            });
        }
    };
    let etag = format!("\"{sha256}\"");
    if headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.split(',')
                .any(|tag| tag.trim() == etag || tag.trim() == "*")
        })
    {
        return Ok(not_modified(&etag));
    }
    let range = requested_range(&headers, size)?;
    let read = match state.actors.media().read(&key, range.clone()).await {
        Ok(read) => read,
        Err(StoreError::Missing) => {
            tracing::error!(attachment_id = %id, key, "a stored file is missing from the media store");
            return Err(ApiError::NotFound("Media"));
        }
        Err(error) => return Err(ApiError::Internal(error.into())),
    };
    let mime = found
        .mime_type
        .as_deref()
        .and_then(|m| HeaderValue::from_str(m).ok())
        .unwrap_or(HeaderValue::from_static("application/octet-stream"));
    let length = read.range.end - read.range.start;
    let body = Body::from_stream(read.bytes.map(|chunk| chunk.map_err(std::io::Error::other)));
    let mut response = Response::new(body);
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, mime);
    headers.insert(header::CONTENT_LENGTH, HeaderValue::from(length));
    headers.insert(header::ACCEPT_RANGES, HeaderValue::from_static("bytes"));
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    // A file a person sent is never rendered as a page of Parley's origin.
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static("sandbox; default-src 'none'"),
    );
    headers.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("private, max-age=3600"),
    );
    if let Ok(value) = HeaderValue::from_str(&etag) {
        headers.insert(header::ETAG, value);
    }
    if range.is_some() {
        let content_range = format!(
            "bytes {}-{}/{}",
            read.range.start,
            read.range.end.saturating_sub(1),
            read.size
        );
        if let Ok(value) = HeaderValue::from_str(&content_range) {
            headers.insert(header::CONTENT_RANGE, value);
        }
        *response.status_mut() = StatusCode::PARTIAL_CONTENT;
    }
    Ok(response)
}

/// The one range of `headers`' `Range` within a file of `size` bytes (`None`: the whole
/// file). Several ranges at once are read as the whole file, as RFC 9110 allows.
fn requested_range(headers: &HeaderMap, size: u64) -> Result<Option<std::ops::Range<u64>>> {
    let Some(raw) = headers.get(header::RANGE) else {
        return Ok(None);
    };
    let unsatisfiable = || ApiError::RangeNotSatisfiable { size };
    let raw = raw.to_str().map_err(|_| unsatisfiable())?;
    let ranges = http_range_header::parse_range_header(raw)
        .and_then(|parsed| parsed.validate(size))
        .map_err(|_| unsatisfiable())?;
    match ranges.as_slice() {
        [one] => Ok(Some(*one.start()..one.end().saturating_add(1))),
        _ => Ok(None),
    }
}

fn not_modified(etag: &str) -> Response {
    let mut response = StatusCode::NOT_MODIFIED.into_response();
    if let Ok(value) = HeaderValue::from_str(etag) {
        response.headers_mut().insert(header::ETAG, value);
    }
    response
}
