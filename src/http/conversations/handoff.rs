//! Human handoff: `POST /conversation/{identity_id}/handoff/{channel_id}` hands an identity's
//! conversation on a channel to a person, `…/resume/{channel_id}` gives it back to the
//! assistant, and `…/reply/{channel_id}` sends an operator's message through the channel. The
//! mode changes inside the identity's conversation actor (so that a message racing a handoff
//! is answered before it or not at all); the reply goes the one way every message goes.

use std::time::Duration;

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use parley_actors::outbound::{FreeForm, Sent};
use parley_actors::thread::Thread;
use parley_persistence::clock;
use serde::Deserialize;
use serde_json::Value;

use crate::domain::Permission;
use crate::http::AppState;
use crate::http::auth::Caller;
use crate::http::envelope::Envelope;
use crate::http::error::{ApiError, Refusal, Result};
use crate::http::extract::{Json, Path};
use crate::http::lookup::{find_channel, identity_id_of};
use crate::http::validation::{Problems, optional_text, outgoing_media, parse_uuid, text_field};

use super::ConversationRecord;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

/// Longest `reason` of a handoff, in characters.
const REASON_LIMIT: usize = 1024;

pub(crate) fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(hand_over))
        .routes(routes!(resume))
        .routes(routes!(reply))
}

#[derive(Debug, Default, Deserialize, utoipa::ToSchema)]
struct HandoffBody {
    /// Why a person takes the conversation over (at most 1024 characters).
    #[schema(max_length = 1024)]
    reason: Option<String>,
}

/// Hand a conversation to a person.
///
/// The assistant stops answering the identity on this channel: messages that arrive are stored
/// for the person, and chat and streaming calls answer 409 `conversation_in_human_mode`, until
/// the conversation is resumed or its person has been quiet for the assistant's
/// `handoff_timeout_minutes`. Starts the conversation when none is open; handing over a
/// conversation a person already has changes nothing.
#[utoipa::path(
    post,
    path = "/conversation/{identity_id}/handoff/{channel_id}",
    tag = "conversation",
    params(("identity_id" = String, Path, description = "Identity: its id, or a path resolving to one (`external_id`, phone, e-mail)"), ("channel_id" = String, Path, format = Uuid, description = "Channel id")),
    request_body(content = HandoffBody, description = "Optional; `{}` or no body at all is a handoff without a reason"),
    responses((status = 200, body = Envelope<ConversationRecord>), (status = 404, body = Refusal)),
)]
#[tracing::instrument(skip_all, fields(workspace_id = caller.workspace_id, channel_id = %channel_id))]
async fn hand_over(
    caller: Caller,
    State(state): State<AppState>,
    Path((identity_id, channel_id)): Path<(String, String)>,
    body: Option<Json<HandoffBody>>,
) -> Result<Response> {
    caller.require(Permission::Write)?;
    let body = body.map(|Json(body)| body).unwrap_or_default();
    let mut problems = Problems::default();
    let reason = optional_text(&mut problems, "reason", body.reason, REASON_LIMIT);
    problems.finish()?;
    let channel_id = parse_uuid(&channel_id, "channel_id")?;
    let identity_id = identity_id_of(&state, &caller, &identity_id).await?;
    let conversations = state.actors.conversations();
    let handed = conversations.hand_over(caller.workspace_id, identity_id, channel_id, reason);
    let conversation = record(&state, handed.await?);
    Ok(Envelope::ok("Conversation handed to a person", conversation).into_response())
}

/// Give a conversation back to the assistant.
///
/// The assistant answers the identity's next message on this channel, and its history says
/// that a person handled the conversation in between. Resuming a conversation the assistant
/// already has changes nothing; 404 when the identity has no open conversation on the channel.
#[utoipa::path(
    post,
    path = "/conversation/{identity_id}/resume/{channel_id}",
    tag = "conversation",
    params(("identity_id" = String, Path, description = "Identity: its id, or a path resolving to one (`external_id`, phone, e-mail)"), ("channel_id" = String, Path, format = Uuid, description = "Channel id")),
    responses((status = 200, body = Envelope<ConversationRecord>), (status = 404, body = Refusal)),
)]
#[tracing::instrument(skip_all, fields(workspace_id = caller.workspace_id, channel_id = %channel_id))]
async fn resume(
    caller: Caller,
    State(state): State<AppState>,
    Path((identity_id, channel_id)): Path<(String, String)>,
) -> Result<Response> {
    caller.require(Permission::Write)?;
    let channel_id = parse_uuid(&channel_id, "channel_id")?;
    let identity_id = identity_id_of(&state, &caller, &identity_id).await?;
    let conversations = state.actors.conversations();
    let given = conversations.give_back(caller.workspace_id, identity_id, channel_id);
    let conversation = record(&state, given.await?);
    Ok(Envelope::ok("Conversation given back to the assistant", conversation).into_response())
}

/// The record of a conversation as it is now.
fn record(
    state: &AppState,
    conversation: parley_persistence::entities::conversation::Model,
) -> ConversationRecord {
    let idle_after = state.settings.actors.conversation_idle();
    ConversationRecord::new(conversation, idle_after, clock::now())
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
struct ReplyBody {
    /// What the operator says: not blank, at most 4096 characters. Required without `media`;
    /// with it, the file's caption when `media` has none.
    #[schema(value_type = Option<String>, min_length = 1, max_length = 4096)]
    text: Option<Value>,
    /// A file to send instead of text: an upload's `media_id`
    /// (`POST /channels/{channel_id}/waba/media`) or a public `https` `link`.
    #[schema(value_type = Option<OutgoingMediaBody>)]
    media: Option<Value>,
}

/// A file to send.
#[derive(Debug, utoipa::ToSchema)]
#[allow(dead_code)] // The schema of `media`; the body is read as JSON and checked by hand.
struct OutgoingMediaBody {
    /// `image`, `audio`, `video`, `document` or `sticker`.
    kind: String,
    /// Meta's id of an uploaded file (give this or `link`).
    media_id: Option<String>,
    /// A public `https` link to the file (give this or `media_id`).
    link: Option<String>,
    /// At most 1,024 characters; not on an audio or a sticker.
    caption: Option<String>,
    /// A document's name, as the person will see it.
    file_name: Option<String>,
}

/// Send an operator's message.
///
/// Free text from a person of the business to the identity through the channel, stored in the
/// conversation with role `operator` and tracked like every message. WhatsApp takes free text
/// only within 24 hours of the person's last message: outside it, a 409
/// `outside_service_window` (send a template instead) and nothing is stored. In a conversation
/// handed to a person, it puts off the automatic return to the assistant.
#[utoipa::path(
    post,
    path = "/conversation/{identity_id}/reply/{channel_id}",
    tag = "conversation",
    params(("identity_id" = String, Path, description = "Identity: its id, or a path resolving to one (`external_id`, phone, e-mail)"), ("channel_id" = String, Path, format = Uuid, description = "Channel id")),
    request_body = ReplyBody,
    responses((status = 200, body = Envelope<Sent>), (status = 404, body = Refusal), (status = 409, body = Refusal), (status = 502, body = Refusal), (status = 504, body = Refusal)),
)]
#[tracing::instrument(skip_all, fields(workspace_id = caller.workspace_id, channel_id = %channel_id))]
async fn reply(
    caller: Caller,
    State(state): State<AppState>,
    Path((identity_id, channel_id)): Path<(String, String)>,
    Json(body): Json<ReplyBody>,
) -> Result<Envelope<Sent>> {
    caller.require(Permission::Write)?;
    let mut problems = Problems::default();
    let reply = match &body.media {
        Some(media) => {
            let hub = state.actors.mcp();
            let media = outgoing_media(&mut problems, hub.egress(), "media", media);
            let caption = body
                .text
                .as_ref()
                .map(|_| text_field(&mut problems, "text", body.text.as_ref()));
            media.map(|mut media| {
                if media.caption.is_none() {
                    media.caption = caption;
                }
                FreeForm::Media(media)
            })
        }
        None => Some(FreeForm::Text(text_field(
            &mut problems,
            "text",
            body.text.as_ref(),
        ))),
    };
    problems.finish()?;
    let reply = reply.ok_or_else(|| ApiError::invalid_field(["media"], "is not a file to send"))?;
    let channel = find_channel(&state, &caller, &channel_id).await?;
    let identity_id = identity_id_of(&state, &caller, &identity_id).await?;
    let thread = Thread {
        workspace_id: caller.workspace_id,
        identity_id,
        channel_id: channel.id,
    };
    let patience = Duration::from_secs(state.settings.server.send_timeout_secs);
    let outbox = state.actors.outbox();
    let sent = outbox
        .reply_as_operator(&channel, thread, reply, None, patience)
        .await?;
    Ok(Envelope::ok("Operator message sent", sent))
}
