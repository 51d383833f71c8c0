//! How a SQLite connection waits for the writer lock. SQLite has one writer at a time; a
//! connection that finds the lock taken calls its busy handler and tries again. The handler
//! `busy_timeout` installs sleeps 1, 2, 5, 10, 15, 20, 25, 25, 25, 50, 50 and then 100 ms
//! between tries, while the holder of the lock commits in tens of microseconds: under a burst
//! of concurrent writes (a webhook burst: events, messages, send results) the waiting
//! connections slept through most of the time the lock was free. `strace` of
//! `webhook_throughput 2000` counted 25,617 such sleeps, 4 ms each on average.
//!
//! This handler tries again after 25 µs, doubling to at most 1 ms, and gives up after
//! [`SQLITE_BUSY_TIMEOUT`] in all, as `busy_timeout` did. It runs on the connection's own
//! worker thread (sqlx gives each SQLite connection one), so its sleep holds up only that
//! connection.

// The one place Parley calls C: SQLite's busy handler can only be installed through its API.
#![allow(unsafe_code)]

use std::ffi::{c_int, c_void};
use std::time::Duration;

use libsqlite3_sys::{SQLITE_OK, sqlite3_busy_handler};
use sea_orm::sqlx::SqliteConnection;

use super::SQLITE_BUSY_TIMEOUT;

/// First wait after the lock was found taken.
const FIRST_WAIT: Duration = Duration::from_micros(25);

/// Longest wait between two tries.
const LONGEST_WAIT: Duration = Duration::from_millis(1);

/// Installs the handler on a newly opened connection (replacing `busy_timeout`'s).
///
/// # Errors
/// Fails when the connection's worker thread is gone or SQLite refuses the handler.
pub(super) async fn install(connection: &mut SqliteConnection) -> Result<(), sea_orm::sqlx::Error> {
    let mut handle = connection.lock_handle().await?;
    // SAFETY: `lock_handle` gives exclusive use of the open `sqlite3` handle while `handle`
    // lives (sqlx's worker thread makes no call on it meanwhile). `wait_for_lock` is a plain
    // function that touches no memory through its first argument, so a null pointer is fine,
    // and it stays valid for the life of the program, hence of the connection.
    let code = unsafe {
        sqlite3_busy_handler(
            handle.as_raw_handle().as_ptr(),
            Some(wait_for_lock),
            std::ptr::null_mut(),
        )
    };
    if code == SQLITE_OK {
        Ok(())
    } else {
        Err(sea_orm::sqlx::Error::Protocol(format!(
            "SQLite refused the busy handler (code {code})"
        )))
    }
}

/// SQLite's busy handler: sleeps before try `tries + 1` and answers non-zero to try again,
/// zero to give up (the statement then fails with `SQLITE_BUSY`, "database is locked").
extern "C" fn wait_for_lock(_: *mut c_void, tries: c_int) -> c_int {
    match wait_before(u32::try_from(tries).unwrap_or(0)) {
        Some(wait) => {
            std::thread::sleep(wait);
            1
        }
        None => 0,
    }
}

/// The wait before try `tries + 1`, or `None` once the waits so far reach the timeout.
fn wait_before(tries: u32) -> Option<Duration> {
    let wait = |n: u32| FIRST_WAIT.saturating_mul(1 << n.min(16)).min(LONGEST_WAIT);
    // The waits double until they reach the longest, then stay there: their sum is short to
    // compute without walking every try.
    let doubling = (0..=16).take_while(|n| wait(*n) < LONGEST_WAIT).count() as u32;
    let waited = if tries <= doubling {
        (0..tries).map(wait).sum::<Duration>()
    } else {
        (0..doubling).map(wait).sum::<Duration>() + LONGEST_WAIT * (tries - doubling)
    };
    (waited < SQLITE_BUSY_TIMEOUT).then(|| wait(tries))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_double_from_25_microseconds_to_one_millisecond() {
        let waits: Vec<u128> = (0..8)
            .map(|n| wait_before(n).expect("within the timeout").as_micros())
            .collect();
        assert_eq!(waits, [25, 50, 100, 200, 400, 800, 1000, 1000]);
    }

    #[test]
    fn it_gives_up_once_the_waits_reach_the_busy_timeout() {
        let mut waited = Duration::ZERO;
        let mut tries = 0;
        while let Some(wait) = wait_before(tries) {
            waited += wait;
            tries += 1;
        }
        assert!(waited >= SQLITE_BUSY_TIMEOUT, "gave up early: {waited:?}");
        assert!(
            waited < SQLITE_BUSY_TIMEOUT + LONGEST_WAIT * 2,
            "waited too long: {waited:?}"
        );
    }
}
