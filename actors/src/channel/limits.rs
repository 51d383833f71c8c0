//! The pace of one WhatsApp number: its throughput (Meta's default is 80 messages per second)
//! and the spacing per recipient (Meta's pair limit, about one message per 6 s with bursts).
//! Shared by every send job of the channel, so the limits hold across conversations, flows
//! and tasks.

use std::num::NonZeroU32;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

use governor::{DefaultDirectRateLimiter, DefaultKeyedRateLimiter, Quota, RateLimiter};

use super::ChannelSettings;

/// Recipients the pair limiter holds before it first forgets those whose limit has refilled.
const PAIRS_KEPT: usize = 1_024;

/// The limiters of one number; cheap to clone.
#[derive(Clone)]
pub(super) struct Limits {
    number: Arc<DefaultDirectRateLimiter>,
    /// One state per recipient written to lately. A recipient whose limit has refilled has
    /// nothing to remember and is forgotten once the map doubles since the last sweep, so a
    /// channel's memory follows the people it writes to now, not every person it ever wrote to.
    pairs: Arc<DefaultKeyedRateLimiter<String>>,
    /// The pair limiter's size after its last sweep.
    pairs_after_sweep: Arc<AtomicUsize>,
    /// Until when the whole number waits after Meta said it is over its throughput (130429).
    slowed_until: Arc<Mutex<Option<Instant>>>,
}

impl Limits {
    /// Limiters for `settings`; zero values count as one.
    pub(super) fn new(settings: &ChannelSettings) -> Self {
        let per_second = NonZeroU32::new(settings.per_second).unwrap_or(NonZeroU32::MIN);
        let pair_burst = NonZeroU32::new(settings.pair_burst).unwrap_or(NonZeroU32::MIN);
        let pair_quota = Quota::with_period(settings.pair_period.max(Duration::from_millis(1)))
            .unwrap_or_else(|| Quota::per_second(NonZeroU32::MIN))
            .allow_burst(pair_burst);
        Self {
            number: Arc::new(RateLimiter::direct(number_quota(per_second))),
            pairs: Arc::new(RateLimiter::keyed(pair_quota)),
            pairs_after_sweep: Arc::new(AtomicUsize::new(0)),
            slowed_until: Arc::new(Mutex::new(None)),
        }
    }

    /// Waits until one more message may go to `recipient`, and one more from the number.
    pub(super) async fn until_ready(&self, recipient: &String) {
        let slowed = *self
            .slowed_until
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(until) = slowed {
            tokio::time::sleep_until(until).await;
        }
        self.pairs.until_key_ready(recipient).await;
        self.forget_refilled_pairs();
        self.number.until_ready().await;
    }

    /// Forgets recipients whose pair limit has refilled, once the map has doubled since the
    /// last sweep (and holds more than `PAIRS_KEPT`): each sweep costs the map's size, and the
    /// doubling spreads that over as many sends.
    fn forget_refilled_pairs(&self) {
        let kept = self.pairs_after_sweep.load(Ordering::Relaxed);
        if self.pairs.len() > PAIRS_KEPT.max(kept.saturating_mul(2)) {
            self.pairs.retain_recent();
            self.pairs.shrink_to_fit();
            self.pairs_after_sweep
                .store(self.pairs.len(), Ordering::Relaxed);
        }
    }

    /// Meta said the number is over its throughput: every sender of the number waits `wait`.
    pub(super) fn slow_down(&self, wait: Duration) {
        let until = Instant::now() + wait;
        let mut slowed = self
            .slowed_until
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if slowed.is_none_or(|current| current < until) {
            *slowed = Some(until);
        }
    }
}

/// A number's messages evenly spaced, without bursts, 1% under `per_second`: Meta counts
/// messages per second, and a burst at the start of a second (what a plain per-second quota
/// allows) plus a full second's pace after it would be twice the rate within one of Meta's
/// seconds; the margin absorbs jitter on the way.
fn number_quota(per_second: NonZeroU32) -> Quota {
    let spacing = Duration::from_secs(1).mul_f64(1.01) / per_second.get();
    Quota::with_period(spacing.max(Duration::from_micros(1)))
        .unwrap_or_else(|| Quota::per_second(per_second))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Limits of a number that is never the bottleneck, one message per recipient per `period`.
    fn one_per_recipient_every(period: Duration) -> Limits {
        Limits::new(&ChannelSettings {
            per_second: 1_000_000,
            pair_burst: 1,
            pair_period: period,
            max_retries: 0,
            retry_backoff: Duration::from_millis(1),
            public_url: None,
        })
    }

    #[tokio::test]
    async fn recipients_whose_pair_limit_refilled_are_forgotten() {
        let limits = one_per_recipient_every(Duration::from_millis(1));
        for round in 0..4 {
            for person in 0..3_000 {
                limits.until_ready(&format!("{round}-{person}")).await;
            }
            // Every limit refills in a millisecond.
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        // 12,000 recipients were written to; the limiter holds at most about two rounds'.
        let held = limits.pairs.len();
        assert!(held <= 6_000, "{held} recipients held");
    }

    #[test]
    fn a_recipient_within_its_limit_is_not_forgotten() {
        let limits = one_per_recipient_every(Duration::from_secs(60));
        for person in 0..3_000 {
            assert!(limits.pairs.check_key(&format!("{person}")).is_ok());
            limits.forget_refilled_pairs();
        }
        // None has refilled: all are held, and each one's next message must wait.
        assert_eq!(limits.pairs.len(), 3_000);
        assert!(limits.pairs.check_key(&"0".to_owned()).is_err());
    }

    #[test]
    fn a_numbers_messages_never_burst_beyond_its_rate() {
        let quota = number_quota(NonZeroU32::new(80).expect("80"));
        assert_eq!(quota.burst_size().get(), 1);
        let per_second = 1.0 / quota.replenish_interval().as_secs_f64();
        assert!((79.0..80.0).contains(&per_second), "{per_second}");
    }
}
