//! Assistant instructions: a handlebars template, stored as written and checked to parse.

/// Instructions whose template compiles.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Instructions(String);

/// Why instructions were refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum InvalidInstructions {
    /// Blank.
    #[error("must not be empty")]
    Empty,
    /// Over the size limit.
    #[error("must be at most {} characters", Instructions::MAX_CHARS)]
    TooLong,
    /// The template does not compile; carries handlebars' explanation.
    #[error("is not a valid template: {0}")]
    Template(String),
}

impl Instructions {
    /// Longest accepted instructions.
    pub const MAX_CHARS: usize = 32_768;

    /// The template text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The template text, owned.
    pub fn into_inner(self) -> String {
        self.0
    }
}

impl TryFrom<&str> for Instructions {
    type Error = InvalidInstructions;

    fn try_from(raw: &str) -> Result<Self, Self::Error> {
        if raw.trim().is_empty() {
            return Err(InvalidInstructions::Empty);
        }
        if raw.chars().count() > Self::MAX_CHARS {
            return Err(InvalidInstructions::TooLong);
        }
        handlebars::Template::compile(raw)
            .map_err(|e| InvalidInstructions::Template(e.reason().to_string()))?;
        Ok(Self(raw.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_documented_expressions_compile() {
        let text = "You help {{identity.name}} at stage {{identity.stage}}. \
                    {{#if memory.profile.name}}Call them {{memory.profile.name}}.{{/if}}";
        assert_eq!(
            Instructions::try_from(text).map(Instructions::into_inner),
            Ok(text.to_owned())
        );
    }

    #[test]
    fn an_unclosed_block_is_rejected() {
        assert!(matches!(
            Instructions::try_from("{{#if memory.x}}hello"),
            Err(InvalidInstructions::Template(_))
        ));
    }

    #[test]
    fn blank_instructions_are_rejected() {
        assert_eq!(
            Instructions::try_from("  \n"),
            Err(InvalidInstructions::Empty)
        );
    }
}
