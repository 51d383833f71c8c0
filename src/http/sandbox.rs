//! The `sandbox` integration: the WhatsApp pipeline with no Meta. `POST
//! /channels/{id}/sandbox/inbound {"from","name","text"}` injects a message as if the webhook had
//! delivered it; `GET /channels/{id}/sandbox/outbox` lists what the channel sent (recorded and
//! marked delivered).

use axum::extract::{Multipart, State};
use chrono::{DateTime, Utc};
use parley_actors::media::MediaStore;
use parley_actors::media::upload::SANDBOX_MEDIA_PREFIX;
use parley_actors::whatsapp::message::InboundMedia;
use parley_actors::whatsapp::payload::{InboundContent, InboundMessage};
use parley_persistence::entities::message;
use parley_persistence::values::MediaKind;
use parley_persistence::{Integration, MessageStatus, Role, clock, deliveries, webhook_events};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::domain::{Permission, Phone, TEXT_LIMIT};
use crate::http::AppState;
use crate::http::auth::Caller;
use crate::http::envelope::Envelope;
use crate::http::error::Refusal;
use crate::http::error::{ApiError, Result};
use crate::http::extract::upload::{CheckedFile, next_field, stage_file};
use crate::http::extract::{Json, Path, Query};
use crate::http::lookup::find_channel;
use crate::http::pagination::{ListQuery, PageResponse};
use crate::http::validation::{Problems, optional_text};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub(crate) fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(inject_inbound))
        .routes(routes!(list_outbox))
}

/// The route of a person's file, which takes bodies up to `body_limit` (the largest file
/// WhatsApp sends, with its form).
pub(crate) fn media_router(body_limit: usize) -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(inject_media))
        .route_layer(axum::extract::DefaultBodyLimit::max(body_limit))
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
struct InboundBody {
    /// The person's phone number (E.164 recommended).
    #[schema(min_length = 1)]
    from: String,
    #[schema(value_type = Option<String>)]
    name: Option<String>,
    #[schema(min_length = 1, max_length = 4096)]
    text: String,
}

/// Make a person send a message on a sandbox channel.
///
/// As if it came from WhatsApp: the synced worker's assistant answers, and its reply lands in the
/// outbox.
#[utoipa::path(
    post,
    path = "/channels/{channel_id}/sandbox/inbound",
    tag = "sandbox",
    params(("channel_id" = String, Path, format = Uuid, description = "Channel id")),
    request_body = InboundBody,
    responses((status = 201, body = Envelope<InboundAccepted>), (status = 502, body = Refusal)),
)]
#[tracing::instrument(skip_all, fields(workspace_id = caller.workspace_id))]
async fn inject_inbound(
    caller: Caller,
    State(state): State<AppState>,
    Path(channel_id): Path<String>,
    Json(body): Json<InboundBody>,
) -> Result<Envelope<InboundAccepted>> {
    caller.require(Permission::Write)?;
    let channel = find_channel(&state, &caller, &channel_id).await?;
    if channel.integration != Integration::Sandbox {
        return Err(ApiError::Conflict(
            "Messages can be injected only into sandbox channels".to_owned(),
        ));
    }
    let mut problems = Problems::default();
    let phone = problems.parse(["from"], Phone::try_from(body.from.as_str()));
    let name = optional_text(&mut problems, "name", body.name, 200);
    if body.text.trim().is_empty() {
        problems.add(["text"], "must not be empty");
    } else if body.text.chars().count() > TEXT_LIMIT {
        problems.add(["text"], format!("must be at most {TEXT_LIMIT} characters"));
    }
    problems.finish()?;
    let phone = phone.ok_or_else(|| ApiError::invalid_field(["from"], "is required"))?;
    let content = InboundContent::Text { body: body.text };
    let accepted = inject(&state, &channel, phone, name, content).await?;
    Ok(Envelope::created(
        "Message accepted; the assistant's reply will appear in the outbox",
        accepted,
    ))
}

/// Stores a person's message on a sandbox channel as a webhook event and hands it to the
/// inbound worker, as the webhook does.
pub(crate) async fn inject(
    state: &AppState,
    channel: &parley_persistence::entities::channel::Model,
    from: Phone,
    name: Option<String>,
    content: InboundContent,
) -> Result<InboundAccepted> {
    let wamid = format!("sandbox.in.{}", Uuid::now_v7());
    let message = InboundMessage {
        wamid: wamid.clone(),
        from,
        profile_name: name,
        sent_at: Some(Utc::now()),
        content,
    };
    let payload = serde_json::to_value(&message)
        .map_err(|e| ApiError::Internal(anyhow::anyhow!("storing a sandbox message: {e}")))?;
    let event = webhook_events::NewEvent {
        workspace_id: channel.workspace_id,
        channel_id: channel.id,
        platform_message_id: wamid.clone(),
        payload,
        now: clock::now(),
    };
    let event_id = state.actors.inbound().store(event).await?.ok_or_else(|| {
        ApiError::Internal(anyhow::anyhow!("a fresh sandbox message id collided"))
    })?;
    Ok(InboundAccepted {
        event_id,
        platform_message_id: wamid,
    })
}

/// A person's message the sandbox took, as a webhook event (camelCase, like every channel
/// body).
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct InboundAccepted {
    /// The stored event the inbound worker answers.
    event_id: Uuid,
    /// The WhatsApp-style id the sandbox gave the message.
    platform_message_id: String,
}

/// A message the sandbox channel sent (camelCase, like every channel body).
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
struct OutboxRecord {
    id: Uuid,
    conversation_id: Uuid,
    /// Who wrote it: `assistant` (replies and templates) or `operator`.
    role: Role,
    content: String,
    status: MessageStatus,
    platform_message_id: Option<String>,
    reply_to_message_id: Option<Uuid>,
    created_at: DateTime<Utc>,
}

impl From<message::Model> for OutboxRecord {
    fn from(m: message::Model) -> Self {
        Self {
            id: m.id,
            conversation_id: m.conversation_id,
            role: m.role,
            content: m.content,
            status: m.status,
            platform_message_id: m.platform_message_id,
            reply_to_message_id: m.reply_to_message_id,
            created_at: m.created_at,
        }
    }
}

/// Read what a sandbox channel sent.
///
/// Oldest first: everything the channel sent (the assistant's replies, templates, operators'
/// messages), each with who wrote it and its delivery status.
#[utoipa::path(
    get,
    path = "/channels/{channel_id}/sandbox/outbox",
    tag = "sandbox",
    params(("channel_id" = String, Path, format = Uuid, description = "Channel id"), ListQuery),
    responses((status = 200, body = PageResponse<OutboxRecord>), (status = 502, body = Refusal)),
)]
#[tracing::instrument(skip_all, fields(workspace_id = caller.workspace_id))]
async fn list_outbox(
    caller: Caller,
    State(state): State<AppState>,
    Path(channel_id): Path<String>,
    Query(query): Query<ListQuery>,
) -> Result<PageResponse<OutboxRecord>> {
    caller.require(Permission::Read)?;
    let page = query.page()?;
    let channel = find_channel(&state, &caller, &channel_id).await?;
    let paged = deliveries::outbound_of_channel(&state.db, channel.id, page).await?;
    Ok(PageResponse::new(
        "Outbox retrieved successfully",
        page,
        paged,
        OutboxRecord::from,
    ))
}

/// The multipart form of a person's file on a sandbox channel.
#[derive(utoipa::ToSchema)]
#[allow(dead_code)] // The schema of the form; the body is read field by field.
struct SandboxMediaForm {
    /// The person's phone number (E.164 recommended); give it before `file`.
    from: String,
    /// Their profile name.
    name: Option<String>,
    /// The caption they wrote (images, videos and documents).
    caption: Option<String>,
    /// Whether an audio is a voice note (`true`).
    voice: Option<String>,
    /// The file, with its `Content-Type` (as `POST /channels/{channel_id}/waba/media` takes).
    #[schema(value_type = String, format = Binary)]
    file: Vec<u8>,
}

/// Make a person send a file on a sandbox channel.
///
/// As if WhatsApp had delivered a picture, voice note, video, document or sticker: the file is
/// kept at once, the message goes through the pipeline like any other, and the synced worker's
/// assistant answers. The fields before `file` say who sent it.
#[utoipa::path(
    post,
    path = "/channels/{channel_id}/sandbox/inbound/media",
    tag = "sandbox",
    params(("channel_id" = String, Path, format = Uuid, description = "Channel id")),
    request_body(content = SandboxMediaForm, content_type = "multipart/form-data"),
    responses(
        (status = 201, body = Envelope<InboundAccepted>),
        (status = 400, body = Refusal), (status = 413, body = Refusal), (status = 409, body = Refusal),
    ),
)]
#[tracing::instrument(skip_all, fields(workspace_id = caller.workspace_id, channel_id = %channel_id))]
async fn inject_media(
    caller: Caller,
    State(state): State<AppState>,
    Path(channel_id): Path<String>,
    mut form: Multipart,
) -> Result<Envelope<InboundAccepted>> {
    caller.require(Permission::Write)?;
    let channel = find_channel(&state, &caller, &channel_id).await?;
    if channel.integration != parley_persistence::Integration::Sandbox {
        return Err(ApiError::Conflict(
            "Messages can be injected only into sandbox channels".to_owned(),
        ));
    }
    let mut said = std::collections::HashMap::new();
    loop {
        let field = next_field(&mut form).await?;
        let Some(name) = field.name().map(str::to_owned) else {
            continue;
        };
        if name != "file" {
            said.insert(
                name,
                field.text().await.unwrap_or_default().trim().to_owned(),
            );
            continue;
        }
        let from = said.remove("from").unwrap_or_default();
        let from = crate::domain::Phone::try_from(from.as_str())
            .map_err(|e| ApiError::invalid_field(["from"], e.to_string()))?;
        let checked = CheckedFile::of(said.get("type").map(String::as_str), &field)?;
        let staged = stage_file(&state, field, &checked).await?;
        let sha256 = staged.sha256.clone();
        let key = MediaStore::key(channel.workspace_id, &sha256);
        state
            .actors
            .media()
            .keep(staged, &key)
            .await
            .map_err(|e| ApiError::Internal(e.into()))?;
        let media = InboundMedia {
            kind: checked.kind.as_str().to_owned(),
            caption: said.remove("caption").filter(|c| !c.is_empty()),
            media_id: Some(format!("{SANDBOX_MEDIA_PREFIX}{sha256}")),
            mime_type: Some(checked.mime_type),
            sha256: Some(sha256),
            file_name: (checked.kind == MediaKind::Document).then_some(checked.file_name),
            voice: said.get("voice").is_some_and(|v| v == "true"),
        };
        let name = said.remove("name").filter(|n| !n.is_empty());
        let content = InboundContent::Media(media);
        let accepted = inject(&state, &channel, from, name, content).await?;
        return Ok(Envelope::created(
            "File accepted; the assistant's reply will appear in the outbox",
            accepted,
        ));
    }
}
