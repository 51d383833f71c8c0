//! Memory keys: dotted lower-case segments such as `profile.name` or `preferences.language`.
//! Both the API and the assistant's `remember` tool write them, so the type lives here.

/// A key of one or more `[a-z0-9_]+` segments joined by dots, at most
/// [`MemoryKey::MAX_LEN`] characters and [`MemoryKey::MAX_SEGMENTS`] segments.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MemoryKey(String);

/// Why a key was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error(
    "must be dotted lower-case segments of letters, digits and underscores, e.g. profile.name \
     (at most 200 characters and 8 segments)"
)]
pub struct InvalidMemoryKey;

impl MemoryKey {
    /// Longest key.
    pub const MAX_LEN: usize = 200;
    /// Deepest nesting; templates address keys as nested objects.
    pub const MAX_SEGMENTS: usize = 8;

    /// The key.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<&str> for MemoryKey {
    type Error = InvalidMemoryKey;

    fn try_from(raw: &str) -> Result<Self, Self::Error> {
        let segments: Vec<&str> = raw.split('.').collect();
        let valid = raw.len() <= Self::MAX_LEN
            && segments.len() <= Self::MAX_SEGMENTS
            && segments.iter().all(|s| {
                !s.is_empty()
                    && s.bytes()
                        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
            });
        if valid {
            Ok(Self(raw.to_owned()))
        } else {
            Err(InvalidMemoryKey)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dotted_lower_case_keys_are_accepted() {
        for good in [
            "profile.name",
            "preferences.language",
            "custom.order_2024",
            "x",
        ] {
            assert!(MemoryKey::try_from(good).is_ok(), "{good}");
        }
    }

    #[test]
    fn upper_case_empty_segments_and_spaces_are_rejected() {
        for bad in [
            "Profile.name",
            "profile..name",
            ".profile",
            "profile.",
            "my key",
            "",
            "a-b",
        ] {
            assert_eq!(MemoryKey::try_from(bad), Err(InvalidMemoryKey), "{bad}");
        }
    }

    #[test]
    fn a_key_nested_too_deep_is_rejected() {
        assert!(MemoryKey::try_from("a.b.c.d.e.f.g.h").is_ok());
        assert_eq!(
            MemoryKey::try_from("a.b.c.d.e.f.g.h.i"),
            Err(InvalidMemoryKey)
        );
    }
}
