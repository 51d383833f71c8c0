//! A file to send, as a request or a task's payload gives it: `{kind, media_id | link, caption,
//! file_name}`, parsed into an [`OutgoingMedia`] or the problems of its fields. Whether a link
//! may be fetched is the egress policy's to say, by the caller.

use serde_json::Value;

use super::OutgoingMedia;

/// The kinds of file WhatsApp sends.
pub const KINDS: [&str; 5] = ["image", "audio", "video", "document", "sticker"];
/// Longest caption Meta takes.
const CAPTION_LIMIT: usize = 1024;
/// Longest document name accepted.
const FILE_NAME_LIMIT: usize = 240;

/// A problem of one field of the media object: the field (empty for the object itself) and
/// what is wrong.
pub type MediaProblem = (&'static str, String);

impl OutgoingMedia {
    /// Parses `value`: a known `kind`, exactly one of `media_id` (an upload's) and `link` (an
    /// `https` link), a caption of at most 1,024 characters (not on an audio or a sticker), a
    /// document's plain name.
    ///
    /// # Errors
    /// Every problem found.
    pub fn parse(value: &Value) -> Result<Self, Vec<MediaProblem>> {
        let Some(object) = value.as_object() else {
            return Err(vec![(
                "",
                "must be an object {kind, media_id | link, caption, file_name}".to_owned(),
            )]);
        };
        let text = |name: &str| {
            object
                .get(name)
                .and_then(Value::as_str)
                .map(str::trim)
                .filter(|v| !v.is_empty())
                .map(str::to_owned)
        };
        let mut problems = Vec::new();
        let kind = text("kind").unwrap_or_default();
        if !KINDS.contains(&kind.as_str()) {
            problems.push((
                "kind",
                "must be one of image, audio, video, document, sticker".to_owned(),
            ));
        }
        let media = Self {
            media_id: text("media_id"),
            link: text("link"),
            caption: text("caption"),
            file_name: text("file_name"),
            kind,
        };
        media.check_source(&mut problems);
        media.check_extras(&mut problems);
        if problems.is_empty() {
            Ok(media)
        } else {
            Err(problems)
        }
    }

    /// Exactly one of an upload's id and an `https` link.
    fn check_source(&self, problems: &mut Vec<MediaProblem>) {
        match (&self.media_id, &self.link) {
            (Some(id), None) if !is_media_id(id) => problems.push((
                "media_id",
                "must be a media id as the upload answered it".to_owned(),
            )),
            (None, Some(link)) if !link.to_ascii_lowercase().starts_with("https://") => {
                problems.push(("link", "must be an https link".to_owned()));
            }
            (Some(_), None) | (None, Some(_)) => {}
            _ => problems.push(("", "must give exactly one of media_id and link".to_owned())),
        }
    }

    /// A caption where Meta takes one, within its length; a plain file name on a document only.
    fn check_extras(&self, problems: &mut Vec<MediaProblem>) {
        let kind = self.kind.as_str();
        if let Some(caption) = &self.caption {
            if kind == "audio" || kind == "sticker" {
                problems.push((
                    "caption",
                    "is not taken with an audio or a sticker".to_owned(),
                ));
            } else if caption.chars().count() > CAPTION_LIMIT {
                problems.push((
                    "caption",
                    format!("must be at most {CAPTION_LIMIT} characters"),
                ));
            }
        }
        if let Some(name) = &self.file_name {
            if kind != "document" {
                problems.push(("file_name", "is taken with a document only".to_owned()));
            } else if name.chars().count() > FILE_NAME_LIMIT || name.contains(['/', '\\', '\0']) {
                problems.push((
                    "file_name",
                    format!("must be a plain file name of at most {FILE_NAME_LIMIT} characters"),
                ));
            }
        }
    }
}

/// Whether `id` reads as a media id an upload answers (Meta's digits, or the sandbox's).
pub fn is_media_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 200
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_-.".contains(c))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_file_names_one_source_and_what_its_kind_takes() {
        let media = OutgoingMedia::parse(&json!({"kind": "document", "media_id": "123",
                                                 "file_name": "receipt.pdf", "caption": "Yours"}))
        .expect("parses");
        assert_eq!(media.file_name.as_deref(), Some("receipt.pdf"));
        let problems = OutgoingMedia::parse(
            &json!({"kind": "audio", "media_id": "1", "link": "https://x",
                                         "caption": "no", "file_name": "a.ogg"}),
        )
        .expect_err("refused");
        let fields: Vec<&str> = problems.iter().map(|(f, _)| *f).collect();
        assert_eq!(fields, ["", "caption", "file_name"]);
        let problems =
            OutgoingMedia::parse(&json!({"kind": "gif", "link": "http://x"})).expect_err("refused");
        assert_eq!(
            problems.iter().map(|(f, _)| *f).collect::<Vec<_>>(),
            ["kind", "link"]
        );
        assert!(OutgoingMedia::parse(&json!("a picture")).is_err());
        assert!(OutgoingMedia::parse(&json!({"kind": "image", "media_id": "../etc"})).is_err());
    }
}
