//! Human-given names of workspaces and keys: trimmed, 1 to 100 characters.

/// A trimmed, non-empty name of at most [`Name::MAX_CHARS`] characters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Name(String);

/// Why a name was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum NameError {
    /// Nothing but whitespace.
    #[error("must not be empty")]
    Empty,
    /// Longer than the limit.
    #[error("must be at most {} characters", Name::MAX_CHARS)]
    TooLong,
}

impl Name {
    /// Longest accepted name, in characters.
    pub const MAX_CHARS: usize = 100;

    /// The name as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The name as an owned string.
    pub fn into_inner(self) -> String {
        self.0
    }
}

impl TryFrom<&str> for Name {
    type Error = NameError;

    fn try_from(value: &str) -> Result<Self, Self::Error> {
        let trimmed = value.trim();
        if trimmed.is_empty() {
            Err(NameError::Empty)
        } else if trimmed.chars().count() > Self::MAX_CHARS {
            Err(NameError::TooLong)
        } else {
            Ok(Self(trimmed.to_owned()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_is_trimmed() {
        assert_eq!(
            Name::try_from("  Sales  ").map(Name::into_inner),
            Ok("Sales".to_owned())
        );
    }

    #[test]
    fn a_blank_name_is_rejected() {
        assert_eq!(Name::try_from("   "), Err(NameError::Empty));
    }

    #[test]
    fn a_name_of_a_hundred_characters_passes_and_one_more_does_not() {
        let hundred = "é".repeat(100);
        assert!(Name::try_from(hundred.as_str()).is_ok());
        assert_eq!(
            Name::try_from(format!("{hundred}x").as_str()),
            Err(NameError::TooLong)
        );
    }
}
