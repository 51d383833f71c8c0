//! A template's media header: a template whose HEADER is an IMAGE, a VIDEO or a DOCUMENT is
//! sent with that file as the header's one parameter, `{"type": "image", "image": {"id": …}}`
//! (or `{"link": …}`); Meta refuses a send without it.

use serde_json::{Value, json};

use super::{ParameterMismatch, TemplateParameters};
use crate::whatsapp::media_request::is_media_id;

/// The kind of file `template`'s header shows (`image`, `video` or `document`), if any.
pub fn media_header(template: &Value) -> Option<&'static str> {
    let header = template["components"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| {
            c["type"]
                .as_str()
                .is_some_and(|t| t.eq_ignore_ascii_case("header"))
        })?;
    match header["format"].as_str()?.to_ascii_uppercase().as_str() {
        "IMAGE" => Some("image"),
        "VIDEO" => Some("video"),
        "DOCUMENT" => Some("document"),
        _ => None,
    }
}

/// Where a header's file comes from: an upload's media id, or an `https` link.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HeaderFile {
    /// Meta's id of an uploaded file.
    Id(String),
    /// A public `https` link Meta fetches.
    Link(String),
}

impl HeaderFile {
    /// Reads `{"media_id": …}` or `{"link": …}` (exactly one).
    ///
    /// # Errors
    /// What is wrong with it.
    pub fn parse(value: &Value) -> Result<Self, String> {
        let text = |name| value.get(name).and_then(Value::as_str).map(str::trim);
        match (text("media_id"), text("link")) {
            (Some(id), None) if is_media_id(id) => Ok(Self::Id(id.to_owned())),
            (None, Some(link)) if link.to_ascii_lowercase().starts_with("https://") => {
                Ok(Self::Link(link.to_owned()))
            }
            _ => Err(
                "must be {\"media_id\": an upload's id} or {\"link\": an https link}".to_owned(),
            ),
        }
    }

    /// The header's send parameter for a file of `kind`.
    pub fn parameter(&self, kind: &str) -> Value {
        let file = match self {
            Self::Id(id) => json!({"id": id}),
            Self::Link(link) => json!({"link": link}),
        };
        json!({"type": kind, kind: file})
    }

    /// The link, if the file is at one.
    pub fn link(&self) -> Option<&str> {
        match self {
            Self::Link(link) => Some(link),
            Self::Id(_) => None,
        }
    }
}

/// The links of the files a send's header parameters name (Meta fetches them; the egress
/// policy says whether a tenant may point it there).
pub fn header_links(parameters: &TemplateParameters) -> Vec<&str> {
    let header = parameters.get("header").and_then(Value::as_array);
    header
        .into_iter()
        .flatten()
        .filter_map(|p| p[p["type"].as_str()?]["link"].as_str())
        .collect()
}

/// The header's file of a send's `parameters` for a header showing `kind`: exactly one
/// parameter of that type, with an id or a link.
///
/// # Errors
/// A mismatch saying what the header needs.
pub(super) fn header_file(
    kind: &'static str,
    parameters: &TemplateParameters,
) -> Result<HeaderFile, ParameterMismatch> {
    let given = parameters.get("header").and_then(Value::as_array);
    let file = match given.map(Vec::as_slice) {
        Some([one]) if one["type"] == kind => {
            let file = &one[kind];
            match (file["id"].as_str(), file["link"].as_str()) {
                (Some(id), None) => HeaderFile::parse(&json!({"media_id": id})).ok(),
                (None, Some(link)) => HeaderFile::parse(&json!({"link": link})).ok(),
                _ => None,
            }
        }
        _ => None,
    };
    file.ok_or_else(|| ParameterMismatch {
        component: "header",
        problem: format!(
            "needs the file its {} header shows: one parameter \
             {{\"type\": \"{kind}\", \"{kind}\": {{\"id\": an upload's media id}}}} \
             (or {{\"link\": an https link}})",
            kind.to_ascii_uppercase()
        ),
    })
}

#[cfg(test)]
mod tests {
    use serde_json::Map;

    use super::*;

    fn template() -> Value {
        json!({"components": [{"type": "HEADER", "format": "IMAGE",
                               "example": {"header_handle": ["https://x"]}},
                              {"type": "BODY", "text": "Your receipt"}]})
    }

    #[test]
    fn a_media_header_takes_exactly_one_file_of_its_kind() {
        assert_eq!(media_header(&template()), Some("image"));
        assert_eq!(
            media_header(&json!({"components": [{"type": "BODY"}]})),
            None
        );
        let mut parameters = Map::new();
        parameters.insert(
            "header".to_owned(),
            json!([HeaderFile::Id("42".into()).parameter("image")]),
        );
        assert_eq!(
            header_file("image", &parameters),
            Ok(HeaderFile::Id("42".into()))
        );
        for wrong in [
            json!([]),
            json!([{"type": "video", "video": {"id": "42"}}]),
            json!([{"type": "image", "image": {"link": "http://x"}}]),
            json!([{"type": "image", "image": {"id": "42", "link": "https://x"}}]),
            json!([{"type": "text", "text": "Hi"}]),
        ] {
            parameters.insert("header".to_owned(), wrong.clone());
            assert!(header_file("image", &parameters).is_err(), "{wrong}");
        }
    }
}
