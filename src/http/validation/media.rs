//! A file to send, as requests give it: `media: {kind, media_id | link, caption, file_name}`.

use parley_actors::egress::Egress;
use parley_actors::whatsapp::OutgoingMedia;
use serde_json::Value;

use super::{Problems, tenant_url};

/// The file `value` (at `field`) describes, or its problems: the object's own
/// ([`OutgoingMedia::parse`]) and a link the egress policy refuses.
pub(crate) fn outgoing_media(
    problems: &mut Problems,
    egress: &Egress,
    field: &str,
    value: &Value,
) -> Option<OutgoingMedia> {
    let media = match OutgoingMedia::parse(value) {
        Ok(media) => media,
        Err(found) => {
            for (name, message) in found {
                if name.is_empty() {
                    problems.add([field], message);
                } else {
                    problems.add([field, name], message);
                }
            }
            return None;
        }
    };
    let before = problems.len();
    if let Some(link) = &media.link {
        egress_allows(problems, egress, [field, "link"], link);
    }
    (problems.len() == before).then_some(media)
}

/// Adds the egress policy's refusal of `link` (at `path`), if any.
pub(crate) fn egress_allows<const N: usize>(
    problems: &mut Problems,
    egress: &Egress,
    path: [&str; N],
    link: &str,
) {
    if let Err(found) = tenant_url(egress, link.to_owned()) {
        for problem in found {
            problems.add(path, problem.message);
        }
    }
}
