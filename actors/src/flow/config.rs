//! A flow's configuration: pacing, concurrency, retries and the delivery timeout, with
//! DESIGN's defaults and bounds.

use std::time::Duration;

use serde_json::{Value, json};

/// Longest pause, retry delay or timeout a flow may ask for (a day).
const MAX_MS: u64 = 86_400_000;

/// How a flow sends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlowConfig {
    /// Base pause between two recipients.
    pub pause_ms: u64,
    /// The pause varies by up to this much either way.
    pub salt_ms: u64,
    /// Sends in flight at once (1–10).
    pub max_concurrent: usize,
    /// Tries after the first, per recipient.
    pub max_retries: u32,
    /// Wait before a retry.
    pub retry_delay_ms: u64,
    /// Longest wait for delivery confirmations after the last send.
    pub timeout_ms: u64,
}

impl Default for FlowConfig {
    fn default() -> Self {
        Self {
            pause_ms: 1_000,
            salt_ms: 0,
            max_concurrent: 1,
            max_retries: 3,
            retry_delay_ms: 5_000,
            timeout_ms: 600_000,
        }
    }
}

impl FlowConfig {
    /// Reads a create body's `configuration` (absent fields take their defaults).
    ///
    /// # Errors
    /// Each field that is not a whole number in its bounds, with what is wrong.
    pub fn parse(raw: Option<&Value>) -> Result<Self, Vec<(&'static str, String)>> {
        let mut config = Self::default();
        let Some(raw) = raw.filter(|v| !v.is_null()) else {
            return Ok(config);
        };
        let Some(object) = raw.as_object() else {
            return Err(vec![("configuration", "must be an object".to_owned())]);
        };
        let mut problems = Vec::new();
        let mut read =
            |field: &'static str, low: u64, high: u64, target: &mut u64| match object.get(field) {
                None | Some(Value::Null) => {}
                Some(value) => match value.as_u64().filter(|n| (low..=high).contains(n)) {
                    Some(n) => *target = n,
                    None => problems.push((
                        field,
                        format!("must be a whole number from {low} to {high}"),
                    )),
                },
            };
        let mut concurrent = config.max_concurrent as u64;
        let mut retries = u64::from(config.max_retries);
        read("pauseBetweenContactsMs", 0, MAX_MS, &mut config.pause_ms);
        read("pauseBetweenContactsSaltMs", 0, MAX_MS, &mut config.salt_ms);
        read("maxConcurrentMessages", 1, 10, &mut concurrent);
        read("maxRetries", 0, 10, &mut retries);
        read("retryDelayMs", 0, MAX_MS, &mut config.retry_delay_ms);
        read("timeoutMs", 0, MAX_MS, &mut config.timeout_ms);
        // Unknown fields are ignored, as everywhere in the API (DESIGN §4).
        if !problems.is_empty() {
            return Err(problems);
        }
        config.max_concurrent = usize::try_from(concurrent).unwrap_or(1);
        config.max_retries = u32::try_from(retries).unwrap_or(0);
        Ok(config)
    }

    /// The stored (and shown) form, every field present.
    pub fn to_json(self) -> Value {
        json!({
            "pauseBetweenContactsMs": self.pause_ms,
            "pauseBetweenContactsSaltMs": self.salt_ms,
            "maxConcurrentMessages": self.max_concurrent,
            "maxRetries": self.max_retries,
            "retryDelayMs": self.retry_delay_ms,
            "timeoutMs": self.timeout_ms,
        })
    }

    /// Reads the stored form; what cannot be read takes its default.
    pub fn from_stored(stored: &Value) -> Self {
        Self::parse(Some(stored)).unwrap_or_default()
    }

    /// Whether recipients are paced: a pause (or its salt) between two of them. An unpaced flow
    /// claims every free slot at once.
    pub fn paced(self) -> bool {
        self.pause_ms > 0 || self.salt_ms > 0
    }

    /// The pause before the next recipient: the base ± a random amount up to the salt.
    pub fn pause(self) -> Duration {
        let salt = if self.salt_ms == 0 {
            0
        } else {
            fastrand::u64(0..=2 * self.salt_ms)
        };
        Duration::from_millis((self.pause_ms + salt).saturating_sub(self.salt_ms))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn absent_fields_take_their_defaults() {
        let config = FlowConfig::parse(Some(&json!({"maxConcurrentMessages": 4}))).expect("valid");
        assert_eq!(config.max_concurrent, 4);
        assert_eq!(config.pause_ms, 1_000);
        assert_eq!(
            FlowConfig::parse(None).expect("valid"),
            FlowConfig::default()
        );
        assert_eq!(FlowConfig::from_stored(&config.to_json()), config);
    }

    #[test]
    fn out_of_bounds_fields_are_named_and_unknown_ones_ignored() {
        let problems = FlowConfig::parse(Some(&json!({
            "maxConcurrentMessages": 11, "retryDelayMs": -1, "speed": 3
        })))
        .expect_err("refused");
        let fields: Vec<_> = problems.iter().map(|(f, _)| *f).collect();
        assert_eq!(fields, ["maxConcurrentMessages", "retryDelayMs"]);
        let config = FlowConfig::parse(Some(&json!({"maxRetries": 2, "speed": 3}))).expect("read");
        assert_eq!(config.max_retries, 2);
        assert!(FlowConfig::parse(Some(&json!({"maxConcurrentMessages": 0}))).is_err());
        assert!(FlowConfig::parse(Some(&json!([]))).is_err());
    }

    #[test]
    fn the_pause_stays_within_the_salt() {
        let config = FlowConfig {
            pause_ms: 100,
            salt_ms: 30,
            ..FlowConfig::default()
        };
        for _ in 0..200 {
            let pause = config.pause().as_millis();
            assert!((70..=130).contains(&pause), "{pause}");
        }
        let bare = FlowConfig {
            pause_ms: 0,
            salt_ms: 50,
            ..FlowConfig::default()
        };
        assert!(bare.pause().as_millis() <= 50);
    }
}
