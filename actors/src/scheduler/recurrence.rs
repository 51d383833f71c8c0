//! A task's recurrence: a cron expression (5 fields, or 6 with leading seconds, through
//! croner) read in an IANA timezone, so that "every day at 09:00" stays at 09:00 local time
//! across daylight-saving changes.

use std::str::FromStr;

use chrono::{DateTime, Timelike, Utc};
use chrono_tz::Tz;
use croner::Cron;
use croner::parser::{CronParser, Seconds, Year};

/// A parsed recurrence.
#[derive(Clone, Debug)]
pub struct Recurrence {
    cron: Cron,
    timezone: Tz,
}

/// Why a recurrence or timezone was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RecurrenceError {
    /// Not a cron expression of 5 or 6 fields.
    #[error("must be a cron expression of 5 fields, or 6 with leading seconds: {0}")]
    Cron(String),
    /// Not an IANA timezone.
    #[error("must be an IANA timezone such as Europe/Lisbon")]
    Timezone,
}

/// The timezone named `name`.
///
/// # Errors
/// [`RecurrenceError::Timezone`] for a name that is not one.
pub fn timezone(name: &str) -> Result<Tz, RecurrenceError> {
    Tz::from_str(name).map_err(|_| RecurrenceError::Timezone)
}

impl Recurrence {
    /// Parses `expression` to be read in `timezone`.
    ///
    /// # Errors
    /// [`RecurrenceError`] naming what is wrong.
    pub fn parse(expression: &str, timezone_name: &str) -> Result<Self, RecurrenceError> {
        let fields = expression.split_whitespace().count();
        if !(5..=6).contains(&fields) {
            return Err(RecurrenceError::Cron(format!("{fields} fields")));
        }
        let cron = CronParser::builder()
            .seconds(Seconds::Optional)
            .year(Year::Disallowed)
            .build()
            .parse(expression)
            .map_err(|e| RecurrenceError::Cron(e.to_string()))?;
        Ok(Self {
            cron,
            timezone: timezone(timezone_name)?,
        })
    }

    /// The shortest time between two of the next `occurrences` runs after `after`; `None`
    /// when fewer than two come.
    pub fn shortest_gap(
        &self,
        after: DateTime<Utc>,
        occurrences: usize,
    ) -> Option<chrono::Duration> {
        let mut at = self.next_after(after)?;
        let mut shortest: Option<chrono::Duration> = None;
        for _ in 1..occurrences {
            let Some(next) = self.next_after(at) else {
                break;
            };
            let gap = next - at;
            shortest = Some(shortest.map_or(gap, |s| s.min(gap)));
            at = next;
        }
        shortest
    }

    /// The first occurrence strictly after `after`, on a whole second; `None` when the
    /// expression never fires again.
    pub fn next_after(&self, after: DateTime<Utc>) -> Option<DateTime<Utc>> {
        // croner keeps the start's fraction of a second; occurrences are on whole seconds.
        let whole = after.with_nanosecond(0).unwrap_or(after);
        let local = whole.with_timezone(&self.timezone);
        self.cron
            .find_next_occurrence(&local, false)
            .ok()
            .map(|next| next.with_timezone(&Utc))
    }
}

#[cfg(test)]
mod tests {
    use chrono::TimeZone;
    use proptest::prelude::*;

    use super::*;

    fn utc(y: i32, m: u32, d: u32, h: u32, min: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(y, m, d, h, min, 0)
            .single()
            .expect("a time")
    }

    #[test]
    fn occurrences_fall_on_whole_seconds_whatever_the_start() {
        let weekly = Recurrence::parse("0 10 * * MON", "Europe/Lisbon").expect("parses");
        let after = utc(2026, 11, 23, 7, 0) + chrono::Duration::microseconds(354_290);
        assert_eq!(weekly.next_after(after), Some(utc(2026, 11, 23, 10, 0)));
        let at_ten = utc(2026, 11, 23, 10, 0) + chrono::Duration::milliseconds(500);
        assert_eq!(weekly.next_after(at_ten), Some(utc(2026, 11, 30, 10, 0)));
    }

    #[test]
    fn five_or_six_fields_and_real_timezones_only() {
        assert!(Recurrence::parse("0 9 * * *", "Europe/Lisbon").is_ok());
        assert!(Recurrence::parse("*/5 0 9 * * *", "UTC").is_ok());
        assert!(matches!(
            Recurrence::parse("0 9 * *", "UTC"),
            Err(RecurrenceError::Cron(_))
        ));
        assert!(matches!(
            Recurrence::parse("0 0 9 * * * 2030", "UTC"),
            Err(RecurrenceError::Cron(_))
        ));
        assert!(matches!(
            Recurrence::parse("61 9 * * *", "UTC"),
            Err(RecurrenceError::Cron(_))
        ));
        assert_eq!(
            Recurrence::parse("0 9 * * *", "Mars/Olympus").err(),
            Some(RecurrenceError::Timezone)
        );
    }

    #[test]
    fn nine_in_the_morning_stays_nine_across_daylight_saving() {
        let daily = Recurrence::parse("0 9 * * *", "Europe/Lisbon").expect("parses");
        // Lisbon is UTC+0 in winter, UTC+1 from 29 March 2026.
        assert_eq!(
            daily.next_after(utc(2026, 3, 28, 12, 0)),
            Some(utc(2026, 3, 29, 8, 0))
        );
        assert_eq!(
            daily.next_after(utc(2026, 3, 27, 12, 0)),
            Some(utc(2026, 3, 28, 9, 0))
        );
        // Back to UTC+0 on 25 October 2026.
        assert_eq!(
            daily.next_after(utc(2026, 10, 24, 12, 0)),
            Some(utc(2026, 10, 25, 9, 0))
        );
    }

    #[test]
    fn a_time_skipped_by_the_spring_change_is_not_invented_twice() {
        // 01:30 does not exist in Lisbon on 29 March 2026 (01:00 jumps to 02:00).
        let nightly = Recurrence::parse("30 1 * * *", "Europe/Lisbon").expect("parses");
        let after = utc(2026, 3, 28, 12, 0);
        let first = nightly.next_after(after).expect("a next run");
        let second = nightly.next_after(first).expect("a run after it");
        assert!(first > after && second > first);
        assert!(
            second - first >= chrono::Duration::hours(23),
            "{first} then {second}"
        );
    }

    proptest! {
        #[test]
        fn the_next_run_is_always_later_and_on_the_minute(
            minute in 0u32..60, hour in 0u32..24, offset in 0i64..(400 * 24 * 3600),
            zone in prop::sample::select(vec!["UTC", "Europe/Lisbon", "America/New_York", "Asia/Kolkata", "Australia/Lord_Howe"]),
        ) {
            let recurrence = Recurrence::parse(&format!("{minute} {hour} * * *"), zone).expect("parses");
            let after = utc(2026, 1, 1, 0, 0) + chrono::Duration::seconds(offset);
            let next = recurrence.next_after(after).expect("a next run");
            prop_assert!(next > after);
            prop_assert!(next - after <= chrono::Duration::hours(26));
            prop_assert_eq!(next.timestamp() % 60, 0);
            prop_assert_eq!(next.timestamp_subsec_nanos(), 0);
            let tz = timezone(zone).expect("a zone");
            let local = next.with_timezone(&tz);
            // A time the spring change skips runs at the change (cron's convention): on that
            // day the wall clock never shows `hour:minute`.
            let skipped = local
                .date_naive()
                .and_hms_opt(hour, minute, 0)
                .is_some_and(|wall| tz.from_local_datetime(&wall) == chrono::LocalResult::None);
            prop_assert!(
                skipped || chrono::Timelike::minute(&local) == minute,
                "{next} is {local} in {zone}"
            );
        }
    }
}
