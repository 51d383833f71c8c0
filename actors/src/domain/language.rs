//! Language tags of assistants: an ISO 639-1 language with an optional region (`pt`, `pt-BR`);
//! and Meta's template language codes (`en`, `en_US`, `pt_BR`).

/// A tag matching `^[a-z]{2}(-[A-Z]{2})?$`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LanguageTag(String);

/// Why a tag was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("must match xx or xx-XX (ISO 639-1 language, optional region), e.g. en or pt-BR")]
pub struct InvalidLanguageTag;

impl LanguageTag {
    /// The tag.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The language part (`pt` of `pt-BR`).
    pub fn language(&self) -> &str {
        &self.0[..2]
    }
}

impl TryFrom<&str> for LanguageTag {
    type Error = InvalidLanguageTag;

    fn try_from(raw: &str) -> Result<Self, Self::Error> {
        let bytes = raw.as_bytes();
        let language = bytes.len() >= 2 && bytes[..2].iter().all(u8::is_ascii_lowercase);
        let region = match bytes.len() {
            2 => true,
            5 => bytes[2] == b'-' && bytes[3..].iter().all(u8::is_ascii_uppercase),
            _ => false,
        };
        if language && region {
            Ok(Self(raw.to_owned()))
        } else {
            Err(InvalidLanguageTag)
        }
    }
}

/// Whether `code` is a template language code as Meta writes them: a lower-case language of 2
/// or 3 letters with an optional upper-case region after an underscore (`en`, `en_US`, `fil`).
pub fn is_template_language(code: &str) -> bool {
    let (language, region) = code
        .split_once('_')
        .map_or((code, None), |(l, r)| (l, Some(r)));
    (2..=3).contains(&language.len())
        && language.bytes().all(|b| b.is_ascii_lowercase())
        && region.is_none_or(|r| r.len() == 2 && r.bytes().all(|b| b.is_ascii_uppercase()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_language_with_or_without_region_is_accepted() {
        assert_eq!(
            LanguageTag::try_from("en").map(|t| t.language().to_owned()),
            Ok("en".to_owned())
        );
        assert_eq!(
            LanguageTag::try_from("pt-BR").map(|t| t.language().to_owned()),
            Ok("pt".to_owned())
        );
    }

    #[test]
    fn a_language_with_underscore_is_rejected() {
        assert_eq!(LanguageTag::try_from("pt_BR"), Err(InvalidLanguageTag));
    }

    #[test]
    fn wrong_case_and_length_are_rejected() {
        for bad in ["EN", "en-br", "eng", "e", "", "en-BRA", "pt-B1"] {
            assert_eq!(LanguageTag::try_from(bad), Err(InvalidLanguageTag), "{bad}");
        }
    }
}
