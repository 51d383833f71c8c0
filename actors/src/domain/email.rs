//! E-mail addresses as contact points: trimmed and lower-cased so that one address is one key.

use std::fmt;

/// A lower-cased e-mail address of plausible shape.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Email(String);

/// Why an e-mail address was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("must be an e-mail address such as ana@example.com")]
pub struct InvalidEmail;

impl Email {
    /// Longest accepted address (RFC 5321's path limit).
    pub const MAX_LEN: usize = 254;

    /// The normalised address.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<&str> for Email {
    type Error = InvalidEmail;

    fn try_from(raw: &str) -> Result<Self, Self::Error> {
        let email = raw.trim().to_lowercase();
        let Some((local, domain)) = email.split_once('@') else {
            return Err(InvalidEmail);
        };
        let shaped = !local.is_empty()
            && !domain.contains('@')
            && domain.contains('.')
            && !domain.starts_with('.')
            && !domain.ends_with('.')
            && !email.chars().any(char::is_whitespace)
            && email.len() <= Self::MAX_LEN;
        if shaped {
            Ok(Self(email))
        } else {
            Err(InvalidEmail)
        }
    }
}

impl fmt::Display for Email {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_address_is_trimmed_and_lower_cased() {
        assert_eq!(
            Email::try_from(" Ana@Example.COM ").map(|e| e.as_str().to_owned()),
            Ok("ana@example.com".to_owned())
        );
    }

    #[test]
    fn an_address_without_a_dotted_domain_is_rejected() {
        for bad in [
            "ana",
            "ana@",
            "@example.com",
            "ana@localhost",
            "a b@example.com",
            "a@b@c.com",
        ] {
            assert_eq!(Email::try_from(bad), Err(InvalidEmail), "{bad}");
        }
    }
}
