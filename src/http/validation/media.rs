//! A file to send, as requests give it: `media: {kind, media_id | link, caption, file_name}`.

use parley_actors::egress::Egress;
use parley_actors::whatsapp::OutgoingMedia;
use serde_json::Value;

use super::{Problems, tenant_url};

/// The kinds of file WhatsApp sends.
const KINDS: [&str; 5] = ["image", "audio", "video", "document", "sticker"];
/// Longest caption Meta takes.
const CAPTION_LIMIT: usize = 1024;
/// Longest document name accepted.
const FILE_NAME_LIMIT: usize = 240;

/// The file `value` (at `field`) describes, or its problems: a known `kind`, exactly one of
/// `media_id` (an upload's) and `link` (a public `https` link the egress policy allows), a
/// caption of at most 1,024 characters (not on an audio or a sticker), a document's name.
pub(crate) fn outgoing_media(
    problems: &mut Problems,
    egress: &Egress,
    field: &str,
    value: &Value,
) -> Option<OutgoingMedia> {
    let Some(object) = value.as_object() else {
        problems.add(
            [field],
            "must be an object {kind, media_id | link, caption, file_name}",
        );
        return None;
    };
    let text = |name: &str| {
        object
            .get(name)
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|v| !v.is_empty())
            .map(str::to_owned)
    };
    let before = problems.len();
    let kind = text("kind").unwrap_or_default();
    if !KINDS.contains(&kind.as_str()) {
        problems.add(
            [field, "kind"],
            "must be one of image, audio, video, document, sticker",
        );
    }
    let (media_id, link) = (text("media_id"), text("link"));
    check_source(
        problems,
        egress,
        field,
        media_id.as_deref(),
        link.as_deref(),
    );
    let (caption, file_name) = (text("caption"), text("file_name"));
    check_extras(
        problems,
        field,
        &kind,
        caption.as_deref(),
        file_name.as_deref(),
    );
    (problems.len() == before).then_some(OutgoingMedia {
        kind,
        media_id,
        link,
        caption,
        file_name,
    })
}

/// Exactly one of an upload's id and a public `https` link the egress policy allows.
fn check_source(
    problems: &mut Problems,
    egress: &Egress,
    field: &str,
    media_id: Option<&str>,
    link: Option<&str>,
) {
    match (media_id, link) {
        (Some(id), None)
            if !id
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "_-.".contains(c)) =>
        {
            problems.add(
                [field, "media_id"],
                "must be a media id as the upload answered it",
            );
        }
        (Some(_), None) => {}
        (None, Some(link)) if !link.to_ascii_lowercase().starts_with("https://") => {
            problems.add([field, "link"], "must be an https link");
        }
        (None, Some(link)) => {
            if let Err(found) = tenant_url(egress, link.to_owned()) {
                for problem in found {
                    problems.add([field, "link"], problem.message);
                }
            }
        }
        _ => problems.add([field], "must give exactly one of media_id and link"),
    }
}

/// A caption where Meta takes one, within its length; a plain file name on a document only.
fn check_extras(
    problems: &mut Problems,
    field: &str,
    kind: &str,
    caption: Option<&str>,
    file_name: Option<&str>,
) {
    if let Some(caption) = caption {
        if kind == "audio" || kind == "sticker" {
            problems.add(
                [field, "caption"],
                "is not taken with an audio or a sticker",
            );
        } else if caption.chars().count() > CAPTION_LIMIT {
            problems.add(
                [field, "caption"],
                format!("must be at most {CAPTION_LIMIT} characters"),
            );
        }
    }
    if let Some(name) = file_name {
        if kind != "document" {
            problems.add([field, "file_name"], "is taken with a document only");
        } else if name.chars().count() > FILE_NAME_LIMIT || name.contains(['/', '\\', '\0']) {
            problems.add(
                [field, "file_name"],
                format!("must be a plain file name of at most {FILE_NAME_LIMIT} characters"),
            );
        }
    }
}
