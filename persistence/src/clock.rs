//! Time as the database keeps it. PostgreSQL stores microseconds and SQLite would keep the
//! nanoseconds it is given; truncating before every write makes both answer the same instant.

use chrono::{DateTime, SubsecRound, Utc};

/// The current instant at storage precision (microseconds).
pub fn now() -> DateTime<Utc> {
    at_storage_precision(Utc::now())
}

/// `instant` truncated to storage precision (microseconds).
pub fn at_storage_precision(instant: DateTime<Utc>) -> DateTime<Utc> {
    instant.trunc_subsecs(6)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instants_are_truncated_to_microseconds() {
        let precise = DateTime::parse_from_rfc3339("2026-11-22T01:59:35.253364710Z")
            .expect("valid")
            .with_timezone(&Utc);
        assert_eq!(
            at_storage_precision(precise).to_rfc3339(),
            "2026-11-22T01:59:35.253364+00:00"
        );
    }
}
