//! The pace of one WhatsApp number: its throughput (Meta's default is 80 messages per second)
//! and the spacing per recipient (Meta's pair limit, about one message per 6 s with bursts).
//! Shared by every send job of the channel, so the limits hold across conversations, flows
//! and tasks.

use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::Duration;

use governor::{DefaultDirectRateLimiter, DefaultKeyedRateLimiter, Quota, RateLimiter};

use super::ChannelSettings;

/// The limiters of one number; cheap to clone.
#[derive(Clone)]
pub(super) struct Limits {
    number: Arc<DefaultDirectRateLimiter>,
    pairs: Arc<DefaultKeyedRateLimiter<String>>,
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
            number: Arc::new(RateLimiter::direct(Quota::per_second(per_second))),
            pairs: Arc::new(RateLimiter::keyed(pair_quota)),
        }
    }

    /// Waits until one more message may go to `recipient`, and one more from the number.
    pub(super) async fn until_ready(&self, recipient: &String) {
        self.pairs.until_key_ready(recipient).await;
        self.number.until_ready().await;
    }
}
