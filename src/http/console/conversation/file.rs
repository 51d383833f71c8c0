//! `POST /console/conversations/{id}/reply/file`: a file an operator sends the person, with a
//! caption. The form is multipart (its CSRF token and caption before the file); the file is
//! checked as an upload is, streamed to Meta for the channel's number, and sent by its media id
//! inside the 24-hour window, as `POST /conversation/{identity}/reply/{channel}` sends one.

use std::time::Duration;

use axum::extract::{Multipart, Path, State};
use axum::response::Response;
use parley_actors::outbound::{FreeForm, Sent};
use parley_actors::thread::Thread;
use parley_actors::whatsapp::OutgoingMedia;
use parley_persistence::entities::conversation;
use serde_json::json;

use super::super::Failure;
use super::super::session::Console;
use super::{find, settle};
use crate::http::AppState;
use crate::http::error::ApiError;
use crate::http::extract::upload::{CheckedFile, next_field, upload_to_meta};
use crate::http::lookup::channel_of;

pub(super) async fn reply_with_file(
    State(state): State<AppState>,
    console: Console,
    Path(id): Path<String>,
    form: Multipart,
) -> Result<Response, Failure> {
    let found = find(&state, &console, &id).await?;
    let sent = send_file(&state, &console, &found, form).await;
    settle(
        &state,
        &console,
        found,
        sent.map(|s| (s.conversation_id, "sent")),
    )
    .await
}

async fn send_file(
    state: &AppState,
    console: &Console,
    found: &conversation::Model,
    mut form: Multipart,
) -> Result<Sent, ApiError> {
    let (mut csrf, mut caption) = (String::new(), String::new());
    loop {
        let field = next_field(&mut form).await?;
        match field.name() {
            Some("csrf") => csrf = field.text().await.unwrap_or_default(),
            Some("caption") => caption = field.text().await.unwrap_or_default(),
            Some("file") => {
                if !console.csrf_matches(&csrf) {
                    return Err(ApiError::Forbidden(
                        "This form is not from your current session; reload the page and try \
                         again"
                            .to_owned(),
                    ));
                }
                if !console.may_act() {
                    return Err(ApiError::lacking(crate::domain::Permission::Write));
                }
                let checked = CheckedFile::of(None, &field)?;
                let channel = channel_of(state, &console.caller, found.channel_id).await?;
                let kind = checked.kind.as_str();
                let described = json!({
                    "kind": kind,
                    "media_id": "pending",
                    "caption": (!matches!(kind, "audio" | "sticker")).then_some(caption.trim()),
                    "file_name": (kind == "document").then_some(&checked.file_name),
                });
                let mut media = OutgoingMedia::parse(&described).map_err(|problems| {
                    let (field, problem) = problems.into_iter().next().unwrap_or_default();
                    ApiError::invalid_field([field], problem)
                })?;
                let (media_id, _) = upload_to_meta(state, &channel, field, &checked).await?;
                media.media_id = Some(media_id);
                let thread = Thread {
                    workspace_id: found.workspace_id,
                    identity_id: found.identity_id,
                    channel_id: found.channel_id,
                };
                let patience = Duration::from_secs(state.settings.server.send_timeout_secs);
                let outbox = state.actors.outbox();
                return Ok(outbox
                    .reply_as_operator(
                        &channel,
                        thread,
                        FreeForm::Media(media),
                        console.author(),
                        patience,
                    )
                    .await?);
            }
            _ => {}
        }
    }
}
