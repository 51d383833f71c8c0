//! IANA time zone names, checked against the tz database compiled into `chrono-tz`.

use std::str::FromStr;

/// A valid IANA zone name such as `Europe/Lisbon`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Timezone(chrono_tz::Tz);

/// Why a zone was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("must be an IANA time zone name such as Europe/Lisbon")]
pub struct InvalidTimezone;

impl Timezone {
    /// The zone's canonical name.
    pub fn name(&self) -> &'static str {
        self.0.name()
    }
}

impl TryFrom<&str> for Timezone {
    type Error = InvalidTimezone;

    fn try_from(raw: &str) -> Result<Self, Self::Error> {
        chrono_tz::Tz::from_str(raw.trim())
            .map(Self)
            .map_err(|_| InvalidTimezone)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_real_zone_is_accepted() {
        assert_eq!(
            Timezone::try_from("America/Sao_Paulo").map(|t| t.name()),
            Ok("America/Sao_Paulo")
        );
    }

    #[test]
    fn an_invented_zone_or_an_offset_is_rejected() {
        for bad in ["Mars/Olympus", "GMT+25", "", "+01:00"] {
            assert_eq!(Timezone::try_from(bad), Err(InvalidTimezone), "{bad}");
        }
    }
}
