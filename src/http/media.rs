//! The files people send: `GET /media/{media_id}` streams one (read key, the caller's
//! workspace only) with its type, length, `ETag` (its SHA-256) and `Range`.

use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::Response;

use crate::domain::Permission;
use crate::http::AppState;
use crate::http::auth::Caller;
use crate::http::error::{Refusal, Result};
use crate::http::extract::Path;
use crate::http::response::serve_attachment;
use crate::http::validation::parse_uuid;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub(crate) fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(get_media))
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
    serve_attachment(&state, caller.workspace_id, id, &headers).await
}
