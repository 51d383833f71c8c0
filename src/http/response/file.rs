//! A kept file as a response: its type, length, digest as `ETag`, a `Range` of it, and the
//! refusals of a file that is not kept. `GET /media/{id}` and the console serve files through
//! it alike.

use axum::body::Body;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt;
use parley_actors::media::store::{Read, StoreError};
use parley_persistence::attachments;
use parley_persistence::entities::attachment;
use parley_persistence::values::AttachmentStatus;
use uuid::Uuid;

use crate::http::AppState;
use crate::http::error::{ApiError, Result};

/// Streams the attachment `id` of `workspace_id` as [`file_response`] does, for whoever
/// may read the workspace (an API key, a console session): 304 for a current `If-None-Match`,
/// a refusal for a file that is not kept.
pub(crate) async fn serve_attachment(
    state: &AppState,
    workspace_id: i64,
    id: Uuid,
    headers: &HeaderMap,
) -> Result<Response> {
    let found = attachments::find(&state.db, workspace_id, id)
        .await?
        .ok_or(ApiError::NotFound("Media"))?;
    let (key, size, sha256) = kept(&found)?;
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
    let range = requested_range(headers, size)?;
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
    Ok(file_response(read, mime, &etag, range.is_some()))
}

/// Where a stored attachment's file is, its size and digest; a refusal for one that is not
/// stored (still being fetched, or failed for good).
fn kept(found: &attachment::Model) -> Result<(String, u64, String)> {
    match (&found.status, &found.storage_key, found.size, &found.sha256) {
        (AttachmentStatus::Stored, Some(key), Some(size), Some(sha256)) => Ok((
            key.clone(),
            u64::try_from(size).unwrap_or(0),
            sha256.clone(),
        )),
        (AttachmentStatus::Failed, ..) => Err(ApiError::ConflictCode {
            code: "media_failed",
            message: format!(
                "This file could not be kept: {}",
                found.failure.as_deref().unwrap_or("unknown")
            ),
        }),
        _ => Err(ApiError::ConflictCode {
            code: "media_pending",
            message: "This file is still being fetched from WhatsApp; ask again shortly".to_owned(),
        }),
    }
}

/// The response streaming `read`: its type, length, digest as `ETag`, and (for a range) 206
/// with its `Content-Range`. A file a person sent is never rendered as a page of Parley's
/// origin.
fn file_response(read: Read, mime: HeaderValue, etag: &str, partial: bool) -> Response {
    let length = read.range.end - read.range.start;
    let content_range = partial.then(|| {
        format!(
            "bytes {}-{}/{}",
            read.range.start,
            read.range.end.saturating_sub(1),
            read.size
        )
    });
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
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static("sandbox; default-src 'none'"),
    );
    headers.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("private, max-age=3600"),
    );
    if let Ok(value) = HeaderValue::from_str(etag) {
        headers.insert(header::ETAG, value);
    }
    if !shown_inline(headers.get(header::CONTENT_TYPE)) {
        headers.insert(
            header::CONTENT_DISPOSITION,
            HeaderValue::from_static("attachment"),
        );
    }
    if let Some(value) = content_range.and_then(|r| HeaderValue::from_str(&r).ok()) {
        headers.insert(header::CONTENT_RANGE, value);
        *response.status_mut() = StatusCode::PARTIAL_CONTENT;
    }
    response
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

/// Whether a browser may show a file of this type in place: pictures (not SVG, which can
/// carry scripts), audio, video, PDF and plain text. Anything else is downloaded.
fn shown_inline(mime: Option<&HeaderValue>) -> bool {
    let essence = mime
        .and_then(|m| m.to_str().ok())
        .and_then(|m| m.split(';').next())
        .map(|m| m.trim().to_ascii_lowercase())
        .unwrap_or_default();
    matches!(
        essence.as_str(),
        "image/jpeg" | "image/png" | "image/webp" | "image/gif" | "application/pdf" | "text/plain"
    ) || essence.starts_with("audio/")
        || essence.starts_with("video/")
}
