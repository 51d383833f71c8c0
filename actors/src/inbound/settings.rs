//! How the inbound worker paces itself and backs off after a transient failure.

use std::time::Duration;

/// How the worker paces itself; from configuration.
#[derive(Clone, Debug)]
pub struct InboundSettings {
    /// Events answered at the same time. A turn mostly waits (for the model, for commits), so
    /// the pipeline answers at most this many messages per turn's time: with the default 128
    /// and a model taking 2 s, 64 a second.
    pub concurrency: usize,
    /// Events held in memory beyond those being answered; the rest wait in the database.
    pub queue: usize,
    /// First retry delay after a transient failure; doubles per attempt.
    pub retry_base: Duration,
    /// Longest retry delay.
    pub retry_max: Duration,
    /// How often the events table is swept for due retries and leftovers.
    pub sweep_every: Duration,
    /// Messages that opt the person out of campaign templates (compared ignoring case).
    pub stop_words: Vec<String>,
}

impl Default for InboundSettings {
    fn default() -> Self {
        Self {
            concurrency: 128,
            queue: 1024,
            retry_base: Duration::from_secs(2),
            retry_max: Duration::from_secs(300),
            sweep_every: Duration::from_secs(2),
            stop_words: ["STOP", "UNSUBSCRIBE", "PARAR", "SAIR", "CANCELAR"]
                .map(str::to_owned)
                .to_vec(),
        }
    }
}

impl InboundSettings {
    /// The wait before attempt `attempts + 1`.
    pub(super) fn backoff(&self, attempts: i32) -> Duration {
        let doublings = u32::try_from(attempts.clamp(0, 30)).unwrap_or(30);
        self.retry_base
            .saturating_mul(2u32.saturating_pow(doublings))
            .min(self.retry_max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_retry_backoff_doubles_and_is_capped() {
        let settings = InboundSettings {
            retry_base: Duration::from_secs(1),
            retry_max: Duration::from_secs(10),
            ..InboundSettings::default()
        };
        assert_eq!(settings.backoff(0), Duration::from_secs(1));
        assert_eq!(settings.backoff(2), Duration::from_secs(4));
        assert_eq!(settings.backoff(10), Duration::from_secs(10));
        assert_eq!(settings.backoff(i32::MAX), Duration::from_secs(10));
    }
}
