//! Collecting every problem of a request before answering, so that one 400 names them all.

use std::fmt::Display;

use serde::{Deserialize, Deserializer};
use serde_json::Value;
use uuid::Uuid;

use crate::domain::{TEXT_LIMIT, free_form_limit, within_free_form_limit};
use crate::http::error::{ApiError, FieldError, PathSegment};

mod media;
mod operator;

pub(crate) use self::media::{egress_allows, outgoing_media};
pub(crate) use self::operator::{invitation_refused, new_operator, operator_role};

/// What a free-form value over the limit is told (the value is never echoed).
pub(crate) fn too_large() -> String {
    format!("must be at most {} bytes of JSON", free_form_limit())
}

/// Field problems found so far.
#[derive(Debug, Default)]
pub(crate) struct Problems(Vec<FieldError>);

impl Problems {
    /// Keeps the parsed value, or records the parse error at `path`.
    pub(crate) fn parse<T, E: Display>(
        &mut self,
        path: impl IntoIterator<Item = impl Into<PathSegment>>,
        result: Result<T, E>,
    ) -> Option<T> {
        result
            .map_err(|e| self.0.push(FieldError::new(path, e.to_string())))
            .ok()
    }

    /// The value of a field checked on its own, its problems recorded.
    pub(crate) fn checked<T>(&mut self, checked: Checked<T>) -> Option<T> {
        checked.map_err(|problems| self.0.extend(problems)).ok()
    }

    /// Records a problem at `path`.
    pub(crate) fn add(
        &mut self,
        path: impl IntoIterator<Item = impl Into<PathSegment>>,
        message: impl Into<String>,
    ) {
        self.0.push(FieldError::new(path, message));
    }

    /// How many problems are recorded.
    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }

    /// The recorded problems as one checked field: none, or all of them.
    pub(crate) fn into_checked(self) -> Checked<()> {
        if self.0.is_empty() {
            Ok(())
        } else {
            Err(self.0)
        }
    }

    /// 400 naming every recorded problem, if any.
    pub(crate) fn finish(self) -> Result<(), ApiError> {
        if self.0.is_empty() {
            Ok(())
        } else {
            Err(ApiError::invalid(self.0))
        }
    }
}

/// Distinguishes an explicit `null` (clear the field) from an absent field (leave it); use with
/// `#[serde(default, deserialize_with = "present")]`.
pub(crate) fn present<'de, D, T>(deserializer: D) -> Result<Option<Option<T>>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(deserializer).map(Some)
}

/// A UUID, or the sentence a refusal says of anything else.
pub(crate) fn uuid_of(raw: &str) -> Result<Uuid, &'static str> {
    Uuid::parse_str(raw.trim())
        .map_err(|_| "must be a UUID, e.g. 01968f2a-7c3e-7d4b-9a1e-3f5c2b8d9e01")
}

/// Parses a UUID from a path or query parameter named `field` (400 otherwise).
pub(crate) fn parse_uuid(raw: &str, field: &str) -> Result<Uuid, ApiError> {
    uuid_of(raw).map_err(|sentence| ApiError::invalid_field([field], sentence))
}

/// A JSON object given for `field`, or `{}` when absent; anything else is a problem.
pub(crate) fn object_or_empty(problems: &mut Problems, field: &str, value: Option<Value>) -> Value {
    match value {
        None | Some(Value::Null) => Value::Object(serde_json::Map::new()),
        Some(object @ Value::Object(_)) if !within_free_form_limit(&object) => {
            problems.add([field], too_large());
            Value::Object(serde_json::Map::new())
        }
        Some(object @ Value::Object(_)) => object,
        Some(_) => {
            problems.add([field], "must be an object");
            Value::Object(serde_json::Map::new())
        }
    }
}

/// A message's required text: a string, not blank, at most [`TEXT_LIMIT`] characters.
pub(crate) fn text_field(problems: &mut Problems, field: &str, value: Option<&Value>) -> String {
    match value {
        Some(Value::String(text)) if text.trim().is_empty() => {
            problems.add([field], "must not be empty");
        }
        Some(Value::String(text)) if text.chars().count() > TEXT_LIMIT => {
            problems.add([field], format!("must be at most {TEXT_LIMIT} characters"));
        }
        Some(Value::String(text)) => return text.clone(),
        Some(_) => problems.add([field], "must be a string"),
        None => problems.add([field], "is required"),
    }
    String::new()
}

/// Longest URL a tenant may give.
const MAX_URL: usize = 2048;

/// A URL a tenant gives (an MCP server, an event webhook endpoint): http or https, at most
/// 2048 characters, without credentials, and not a literal inside address (a name's addresses
/// are checked at every connection, DESIGN §11).
pub(crate) fn tenant_url(egress: &parley_actors::egress::Egress, url: String) -> Checked<String> {
    let lower = url.to_ascii_lowercase();
    let rest = lower
        .strip_prefix("https://")
        .or_else(|| lower.strip_prefix("http://"));
    let parsed = reqwest::Url::parse(&url).ok();
    let shaped = url.len() <= MAX_URL && rest.is_some_and(|r| !r.is_empty() && !r.starts_with('/'));
    match parsed {
        Some(_) if !shaped => problem(["url"], "must be an http or https URL"),
        None => problem(["url"], "must be an http or https URL"),
        Some(parsed) if !parsed.username().is_empty() || parsed.password().is_some() => problem(
            ["url"],
            "must not carry credentials (a user or password before the host)",
        ),
        Some(parsed) if egress.check_url(&parsed).is_err() => problem(
            ["url"],
            "must not lead to a loopback, private, link-local or other inside address",
        ),
        Some(_) => Ok(url),
    }
}

/// Optional free text of at most `max` characters; blank text counts as absent.
pub(crate) fn optional_text(
    problems: &mut Problems,
    field: &str,
    value: Option<String>,
    max: usize,
) -> Option<String> {
    let text = value?.trim().to_owned();
    if text.is_empty() {
        return None;
    }
    if text.chars().count() > max {
        problems.add([field], format!("must be at most {max} characters"));
    }
    Some(text)
}

pub(crate) use parley_actors::domain::is_template_language;

/// A field's value as a request gives it, checked once: the value, or every problem found
/// with it.
pub(crate) type Checked<T> = std::result::Result<T, Vec<FieldError>>;

/// A field that failed its check with one problem at `path`.
pub(crate) fn problem<T>(
    path: impl IntoIterator<Item = impl Into<PathSegment>>,
    message: impl Into<String>,
) -> Checked<T> {
    Err(vec![FieldError::new(path, message)])
}

/// A field the request must give.
pub(crate) fn required<T>(path: &str, value: Option<T>) -> Checked<T> {
    value.map_or_else(|| problem([path], "is required"), Ok)
}

/// Binds each checked field (a [`Checked`] variable) to its value, or returns one 400 naming
/// the problems of every field that failed: all the checks run before the answer, and no value
/// is looked at again.
macro_rules! checked {
    ($($field:ident),+ $(,)?) => {
        let ($($field),+) = match ($($field),+) {
            ($(Ok($field)),+) => ($($field),+),
            ($($field),+) => {
                let mut details = Vec::new();
                $(if let Err(mut found) = $field {
                    details.append(&mut found);
                })+
                return Err($crate::http::error::ApiError::invalid(details));
            }
        };
    };
}
pub(crate) use checked;
