//! Understanding what a person sent besides words, for an assistant whose settings ask for
//! it: pictures go to the model as images (`settings.vision`), voice notes and audio as their
//! transcript (`settings.transcribe`; the transcript is kept on the attachment and becomes what
//! the message says, so later turns and the history read it too). The turn stores the
//! person's messages first, rings the media worker and waits (at most [`WAIT`]) for their
//! files to be kept; a file that does not come in time, or cannot be read, leaves the one-line
//! description the model reads otherwise.

use std::collections::HashMap;
use std::time::Duration;

use base64::Engine;
use bytes::{Bytes, BytesMut};
use futures_util::StreamExt;
use parley_persistence::attachments;
use parley_persistence::entities::{attachment, message};
use parley_persistence::values::{AttachmentStatus, MediaKind};
use uuid::Uuid;

use super::place::{Found, store_inbound};
use crate::conversation::route::Routed;
use crate::conversation::{ConversationDeps, TurnError, TurnRequest};
use crate::domain::AssistantSettings;

/// Longest a turn waits for the files it should understand.
const WAIT: Duration = Duration::from_secs(30);
/// How often it looks whether they are kept.
const POLL: Duration = Duration::from_millis(50);
/// Most images sent with one turn.
const MAX_IMAGES: usize = 4;

/// What the turn learnt of the person's files, by message.
#[derive(Debug, Default)]
pub(crate) struct Understood {
    /// The batch's messages, stored before the prompt was built (in the batch's order).
    pub(crate) stored: Vec<Uuid>,
    /// What a message says now (its description with the transcript).
    pub(crate) said: HashMap<Uuid, String>,
    /// The images of the turn, as `data:` URLs.
    pub(crate) images: Vec<String>,
}

impl Understood {
    /// What the batch's `index`-th message of the person says now, when a transcript changed
    /// it.
    pub(crate) fn said_by(&self, index: usize) -> Option<&str> {
        let id = self.stored.get(index)?;
        self.said.get(id).map(String::as_str)
    }
}

/// What the batch's messages stored by [`store_first`] are: the id of every one, and the rows
/// stored now (as [`super::place::store_inbound`] answers them).
pub(crate) type Stored = (Vec<Uuid>, Vec<message::Model>);

/// When the assistant should see or hear a file of `batch`: stores the person's messages
/// before the prompt is built and waits for their files; answers them (their contents with
/// any transcript) and what was understood. `None` when there is nothing to understand: the
/// messages are stored while the model reads them, as always.
///
/// # Errors
/// When the messages cannot be stored.
pub(crate) async fn store_first(
    deps: &ConversationDeps,
    routed: &Routed,
    found: &Found,
    batch: &[TurnRequest],
) -> Result<Option<(Stored, Understood)>, TurnError> {
    if !wanted(&routed.settings, batch) {
        return Ok(None);
    }
    let (ids, mut stored_now) = store_inbound(deps, found, batch).await?;
    let understood = understand(deps, &routed.settings, &ids, &stored_now).await;
    for stored in &mut stored_now {
        if let Some(said) = understood.said.get(&stored.id) {
            stored.content.clone_from(said);
        }
    }
    Ok(Some(((ids, stored_now), understood)))
}

/// Whether `settings` ask to understand any file of `batch`.
fn wanted(settings: &AssistantSettings, batch: &[TurnRequest]) -> bool {
    batch
        .iter()
        .flat_map(|request| &request.attachments)
        .any(|media| wants(settings, MediaKind::parse(&media.kind)))
}

fn wants(settings: &AssistantSettings, kind: Option<MediaKind>) -> bool {
    match kind {
        Some(MediaKind::Image) => settings.vision,
        Some(MediaKind::Audio) => settings.transcribe,
        _ => false,
    }
}

/// Waits for the files of `stored` and reads what the settings ask of them.
#[tracing::instrument(name = "understand", level = "debug", skip_all)]
async fn understand(
    deps: &ConversationDeps,
    settings: &AssistantSettings,
    ids: &[Uuid],
    stored: &[message::Model],
) -> Understood {
    let mut understood = Understood {
        stored: ids.to_vec(),
        ..Understood::default()
    };
    let files = settled(deps, settings, stored).await;
    for message in stored {
        for file in files.get(&message.id).into_iter().flatten() {
            if file.status != AttachmentStatus::Stored || !wants(settings, Some(file.kind)) {
                continue;
            }
            match file.kind {
                MediaKind::Image if understood.images.len() < MAX_IMAGES => {
                    if let Some(url) = data_url(deps, file).await {
                        understood.images.push(url);
                    }
                }
                MediaKind::Audio => {
                    if let Some(said) = transcribe(deps, message, file).await {
                        understood.said.insert(message.id, said);
                    }
                }
                _ => {}
            }
        }
    }
    understood
}

/// The attachments of `stored`, once none the turn wants is pending (or [`WAIT`] passed).
async fn settled(
    deps: &ConversationDeps,
    settings: &AssistantSettings,
    stored: &[message::Model],
) -> HashMap<Uuid, Vec<attachment::Model>> {
    let ids: Vec<Uuid> = stored.iter().map(|m| m.id).collect();
    deps.media.ring();
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let files = match attachments::of_messages(&deps.db, &ids).await {
            Ok(files) => files,
            Err(error) => {
                tracing::warn!(%error, "could not read the person's files");
                return HashMap::new();
            }
        };
        let waiting = files
            .values()
            .flatten()
            .any(|f| f.status == AttachmentStatus::Pending && wants(settings, Some(f.kind)));
        if !waiting || tokio::time::Instant::now() >= deadline {
            if waiting {
                tracing::warn!(
                    "the person's files were not kept in time; the model reads their description"
                );
            }
            return files;
        }
        tokio::time::sleep(POLL).await;
    }
}

/// The kept file, whole (files the turn reads are bounded by their kind's limit).
async fn read(deps: &ConversationDeps, file: &attachment::Model) -> Option<Bytes> {
    let key = file.storage_key.as_deref()?;
    let mut read = match deps.media_store.read(key, None).await {
        Ok(read) => read,
        Err(error) => {
            tracing::warn!(attachment_id = %file.id, %error, "could not read a kept file");
            return None;
        }
    };
    let mut all = BytesMut::with_capacity(usize::try_from(read.size).unwrap_or(0));
    while let Some(chunk) = read.bytes.next().await {
        match chunk {
            Ok(chunk) => all.extend_from_slice(&chunk),
            Err(error) => {
                tracing::warn!(attachment_id = %file.id, %error, "could not read a kept file");
                return None;
            }
        }
    }
    Some(all.freeze())
}

async fn data_url(deps: &ConversationDeps, file: &attachment::Model) -> Option<String> {
    let bytes = read(deps, file).await?;
    let mime = file.mime_type.as_deref().unwrap_or("image/jpeg");
    let encoded = base64::engine::general_purpose::STANDARD.encode(&bytes);
    Some(format!("data:{mime};base64,{encoded}"))
}

/// Transcribes `file` and keeps the words; answers what `message` says now.
async fn transcribe(
    deps: &ConversationDeps,
    message: &message::Model,
    file: &attachment::Model,
) -> Option<String> {
    let bytes = read(deps, file).await?;
    let mime = file.mime_type.as_deref().unwrap_or("audio/ogg");
    let transcript = match deps.llm.transcribe(bytes, mime).await {
        Ok(transcript) if !transcript.is_empty() => transcript,
        Ok(_) => return None,
        Err(error) => {
            tracing::warn!(attachment_id = %file.id, %error, "could not transcribe an audio; the model reads its description");
            return None;
        }
    };
    let said = format!("{} {transcript}", message.content);
    if let Err(error) =
        attachments::transcribed(&deps.db, file.id, message.id, &transcript, &said).await
    {
        tracing::warn!(attachment_id = %file.id, %error, "could not keep a transcript");
    }
    Some(said)
}
