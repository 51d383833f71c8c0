//! Phone numbers, normalised to E.164 with libphonenumber's metadata (the `phonenumber` crate).
//! The API, the WhatsApp webhook and the outbound path all read them.

use std::fmt;

use phonenumber::Mode;

/// A valid phone number in E.164 form (`+351912345678`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Phone(String);

/// Why a phone number was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("must be a valid phone number with its country code, e.g. +351912345678")]
pub struct InvalidPhone;

impl Phone {
    /// The E.164 form.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The digits without `+`, as WhatsApp's `wa_id` and send API use them.
    pub fn digits(&self) -> &str {
        self.0.trim_start_matches('+')
    }

    /// Loads libphonenumber's metadata, which the first number parsed would otherwise load:
    /// about 100 ms of CPU (every pattern of every region is checked), during which that
    /// thread, and any other that parses a number meanwhile, waits. The server calls it at
    /// start, off the runtime; on a runtime worker it stalled the tasks behind it, the first
    /// messages' replies by 90–190 ms (benches/README.md, the fourteenth session).
    pub fn load_metadata() {
        std::hint::black_box(&*phonenumber::metadata::DATABASE);
    }
}

impl TryFrom<&str> for Phone {
    type Error = InvalidPhone;

    /// Accepts `+<country><number>`, the same digits without `+` (WhatsApp's form), or with
    /// the international `00` prefix instead of `+` (`00351…`), with spaces, dashes, dots or
    /// parentheses in between.
    fn try_from(raw: &str) -> Result<Self, Self::Error> {
        let trimmed = raw.trim();
        if trimmed.is_empty()
            || !trimmed
                .chars()
                .all(|c| c.is_ascii_digit() || " +-.()".contains(c))
        {
            return Err(InvalidPhone);
        }
        let international = if trimmed.starts_with('+') {
            trimmed.to_owned()
        } else {
            let digits: String = trimmed.chars().filter(char::is_ascii_digit).collect();
            match digits.strip_prefix("00") {
                Some(after) => format!("+{after}"),
                None => format!("+{digits}"),
            }
        };
        let parsed = phonenumber::parse(None, &international).map_err(|_| InvalidPhone)?;
        if !phonenumber::is_valid(&parsed) {
            return Err(InvalidPhone);
        }
        Ok(Self(parsed.format().mode(Mode::E164).to_string()))
    }
}

impl serde::Serialize for Phone {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.0)
    }
}

impl<'de> serde::Deserialize<'de> for Phone {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let raw = String::deserialize(deserializer)?;
        Self::try_from(raw.as_str()).map_err(serde::de::Error::custom)
    }
}

impl fmt::Display for Phone {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_formatted_number_is_normalised_to_e164() {
        let phone = Phone::try_from("+351 912-345-678").expect("valid");
        assert_eq!(phone.as_str(), "+351912345678");
        assert_eq!(phone.digits(), "351912345678");
    }

    #[test]
    fn whatsapp_digits_without_plus_are_accepted() {
        assert_eq!(
            Phone::try_from("14155552671").map(|p| p.as_str().to_owned()),
            Ok("+14155552671".to_owned())
        );
    }

    #[test]
    fn the_international_00_prefix_reads_as_a_plus() {
        for written in [
            "00351912345678",
            "00 351 912 345 678",
            "(00351) 912-345-678",
        ] {
            assert_eq!(
                Phone::try_from(written).map(|p| p.as_str().to_owned()),
                Ok("+351912345678".to_owned()),
                "{written}"
            );
        }
    }

    #[test]
    fn a_number_too_short_for_its_country_is_rejected() {
        assert_eq!(Phone::try_from("+35191"), Err(InvalidPhone));
    }

    #[test]
    fn letters_are_rejected() {
        assert_eq!(Phone::try_from("call me"), Err(InvalidPhone));
        assert_eq!(Phone::try_from(""), Err(InvalidPhone));
    }
}
