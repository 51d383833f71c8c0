//! Parley's load harness. Every benchmark reports its result next to a baseline measured in
//! the same run, because shared machines are noisy: read the ratios and differences, not the
//! absolute numbers.
//!
//! - `chat_latency`: the latency a chat turn adds over the fake model's own time.
//! - `webhook_throughput`: webhook-to-reply messages per second against a bare axum handler
//!   doing the same database writes.

use std::time::Duration;

/// Latency percentiles of a sample.
#[derive(Clone, Copy, Debug)]
pub struct Percentiles {
    /// Median.
    pub p50: Duration,
    /// 99th percentile.
    pub p99: Duration,
    /// Mean.
    pub mean: Duration,
}

impl Percentiles {
    /// Percentiles of `samples` (nearest rank); `None` when empty.
    pub fn of(samples: &[Duration]) -> Option<Self> {
        if samples.is_empty() {
            return None;
        }
        let mut sorted = samples.to_vec();
        sorted.sort();
        let rank = |p: f64| {
            let index = ((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len()) - 1;
            sorted[index]
        };
        let total: Duration = sorted.iter().sum();
        Some(Self {
            p50: rank(0.50),
            p99: rank(0.99),
            mean: total / u32::try_from(sorted.len()).unwrap_or(u32::MAX),
        })
    }
}

/// Milliseconds with two decimals, for reports.
pub fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1000.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_use_the_nearest_rank() {
        let samples: Vec<Duration> = (1..=100).map(Duration::from_millis).collect();
        let p = Percentiles::of(&samples).expect("some");
        assert_eq!(p.p50, Duration::from_millis(50));
        assert_eq!(p.p99, Duration::from_millis(99));
        assert!(Percentiles::of(&[]).is_none());
    }
}
