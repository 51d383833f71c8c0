//! Human-given names: trimmed, with a length in characters between two bounds.

/// A trimmed name of `MIN` to `MAX` characters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BoundedName<const MIN: usize, const MAX: usize>(String);

/// Names of workspaces, keys, workers and assistants: 1 to 100 characters.
pub type Name = BoundedName<1, 100>;
/// Names of stages and channels: 3 to 100 characters, as the specification sets.
pub type LongName = BoundedName<3, 100>;

/// Why a name was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum NameError {
    /// Nothing but whitespace.
    #[error("must not be empty")]
    Empty,
    /// Shorter than the bound.
    #[error("must be at least {0} characters")]
    TooShort(usize),
    /// Longer than the bound.
    #[error("must be at most {0} characters")]
    TooLong(usize),
}

impl<const MIN: usize, const MAX: usize> BoundedName<MIN, MAX> {
    /// The name as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The name as an owned string.
    pub fn into_inner(self) -> String {
        self.0
    }
}

impl<const MIN: usize, const MAX: usize> TryFrom<&str> for BoundedName<MIN, MAX> {
    type Error = NameError;

    fn try_from(value: &str) -> Result<Self, Self::Error> {
        let trimmed = value.trim();
        let chars = trimmed.chars().count();
        if trimmed.is_empty() {
            Err(NameError::Empty)
        } else if chars < MIN {
            Err(NameError::TooShort(MIN))
        } else if chars > MAX {
            Err(NameError::TooLong(MAX))
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
            Err(NameError::TooLong(100))
        );
    }

    #[test]
    fn a_stage_name_needs_three_characters() {
        assert_eq!(LongName::try_from("ab"), Err(NameError::TooShort(3)));
        assert!(LongName::try_from("abc").is_ok());
    }
}
