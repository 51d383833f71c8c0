//! The fields of a channel body that need more than a type: credentials, Meta's ids,
//! settings, and the verify token Parley makes.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::Value;

use crate::http::validation::Problems;

pub(super) fn settings_object(problems: &mut Problems, value: Option<Value>) -> Value {
    crate::http::validation::object_or_empty(problems, "settings", value)
}

/// A secret credential: non-empty, bounded, no surrounding whitespace kept.
pub(super) fn credential(
    problems: &mut Problems,
    field: &str,
    value: Option<String>,
    max: usize,
) -> Option<String> {
    let value = value?.trim().to_owned();
    if value.is_empty() || value.len() > max {
        problems.add([field], format!("must be 1 to {max} characters"));
        return None;
    }
    Some(value)
}

/// One of Meta's object ids: 1 to 64 letters, digits, `_` or `-`.
pub(super) fn platform_id(
    problems: &mut Problems,
    field: &str,
    value: Option<String>,
) -> Option<String> {
    let value = value?.trim().to_owned();
    let valid = !value.is_empty()
        && value.len() <= 64
        && value
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if !valid {
        problems.add([field], "must be 1 to 64 letters, digits, '_' or '-'");
        return None;
    }
    Some(value)
}

pub(super) fn new_verify_token() -> String {
    let mut bytes = [0u8; 24];
    #[allow(clippy::expect_used)]
    getrandom::fill(&mut bytes).expect("the operating system's random source is available");
    URL_SAFE_NO_PAD.encode(bytes)
}
