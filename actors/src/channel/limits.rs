//! The pace of one WhatsApp number: its throughput (Meta's default is 80 messages per second)
//! and the spacing per recipient (Meta's pair limit, about one message per 6 s with bursts).
//! Shared by every send job of the channel, so the limits hold across conversations, flows
//! and tasks.

use std::num::NonZeroU32;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

use governor::{DefaultDirectRateLimiter, DefaultKeyedRateLimiter, Quota, RateLimiter};

use super::ChannelSettings;

/// The limiters of one number; cheap to clone.
#[derive(Clone)]
pub(super) struct Limits {
    number: Arc<DefaultDirectRateLimiter>,
    pairs: Arc<DefaultKeyedRateLimiter<String>>,
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
        self.number.until_ready().await;
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

    #[test]
    fn a_numbers_messages_never_burst_beyond_its_rate() {
        let quota = number_quota(NonZeroU32::new(80).expect("80"));
        assert_eq!(quota.burst_size().get(), 1);
        let per_second = 1.0 / quota.replenish_interval().as_secs_f64();
        assert!((79.0..80.0).contains(&per_second), "{per_second}");
    }
}
