//! Text as Meta sends it, made safe to keep: PostgreSQL refuses NUL characters in text, and
//! one such message must not fail a whole delivery.

use serde_json::Value;

/// A non-empty string value, with NUL characters replaced.
pub(super) fn text(value: &Value) -> Option<String> {
    value.as_str().filter(|s| !s.is_empty()).map(clean)
}

/// `raw` with every NUL character replaced by U+FFFD.
pub(super) fn clean(raw: &str) -> String {
    raw.replace('\0', "\u{FFFD}")
}
