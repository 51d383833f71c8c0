//! The assistant's `settings` object: model parameters and conversation behaviour. The API
//! validates it when it is written; the actors read it back with [`AssistantSettings::from_stored`],
//! so that its defaults live here and nowhere else.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::TEXT_LIMIT;

/// Settings with every default filled in, as stored and answered.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct AssistantSettings {
    /// Sampling temperature, 0 to 2; the model's default when absent.
    pub temperature: Option<f64>,
    /// Most tokens per reply, 1 to 128000; the model's default when absent.
    pub max_tokens: Option<u32>,
    /// Whole turns of history sent to the model, 0 to 200.
    pub history_turns: u32,
    /// Whether the built-in memory tools are offered.
    pub memory_enabled: bool,
    /// Window in which a burst of messages is merged into one turn, 0 to 60000 ms.
    pub debounce_ms: u64,
    /// Reply stored and returned when the model fails, at most 4096 characters.
    pub fallback_message: Option<String>,
    /// Whether the model is offered `handoff_to_human`, to hand the conversation to a person.
    pub handoff: bool,
    /// A conversation handed to a person returns to the assistant after this many minutes
    /// without a person acting in it (1 to 43200, 30 days).
    pub handoff_timeout_minutes: u32,
    /// A conversation assigned to an operator who has not answered in it for this many
    /// minutes returns to the queue, unassigned (1 to 43200).
    pub assignment_timeout_minutes: u32,
    /// Whether pictures the person sends go to the model as images (the model must take
    /// them); otherwise it reads a one-line description.
    pub vision: bool,
    /// Whether voice notes and audio are transcribed (`/audio/transcriptions`) and the model
    /// reads the words; otherwise it reads a one-line description.
    pub transcribe: bool,
}

impl Default for AssistantSettings {
    fn default() -> Self {
        Self {
            temperature: None,
            max_tokens: None,
            history_turns: 20,
            memory_enabled: true,
            debounce_ms: 0,
            fallback_message: None,
            handoff: false,
            handoff_timeout_minutes: 720,
            assignment_timeout_minutes: 30,
            vision: false,
            transcribe: false,
        }
    }
}

/// One settings field out of its range: the field name and what is wrong.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("{field} {problem}")]
pub struct InvalidSetting {
    /// Name of the field inside `settings`.
    pub field: &'static str,
    /// What is wrong.
    pub problem: &'static str,
}

impl AssistantSettings {
    /// The settings stored with an assistant (validated when written); a field missing from an
    /// older row takes its default, and a row that cannot be read at all takes every default.
    pub fn from_stored(stored: &Value) -> Self {
        serde_json::from_value(stored.clone()).unwrap_or_else(|error| {
            tracing::warn!(%error, "unreadable assistant settings; using the defaults");
            Self::default()
        })
    }

    /// The history to send, as a count of whole turns.
    pub fn history_turns(&self) -> usize {
        usize::try_from(self.history_turns).unwrap_or(usize::MAX)
    }

    /// How long a person may be quiet in a conversation handed to them before it returns.
    pub fn handoff_timeout(&self) -> chrono::Duration {
        chrono::Duration::minutes(i64::from(self.handoff_timeout_minutes))
    }

    /// How long an assignment may go unanswered before the conversation returns to the queue.
    pub fn assignment_timeout(&self) -> chrono::Duration {
        chrono::Duration::minutes(i64::from(self.assignment_timeout_minutes))
    }

    /// Checks every field's range, reporting each problem.
    pub fn problems(&self) -> Vec<InvalidSetting> {
        let mut problems = Vec::new();
        let mut check = |ok: bool, field, problem| {
            if !ok {
                problems.push(InvalidSetting { field, problem });
            }
        };
        check(
            self.temperature.is_none_or(|t| (0.0..=2.0).contains(&t)),
            "temperature",
            "must be between 0 and 2",
        );
        check(
            self.max_tokens.is_none_or(|t| (1..=128_000).contains(&t)),
            "max_tokens",
            "must be between 1 and 128000",
        );
        check(
            self.history_turns <= 200,
            "history_turns",
            "must be at most 200",
        );
        check(
            self.debounce_ms <= 60_000,
            "debounce_ms",
            "must be at most 60000",
        );
        check(
            self.fallback_message
                .as_ref()
                .is_none_or(|m| m.chars().count() <= TEXT_LIMIT && !m.trim().is_empty()),
            "fallback_message",
            "must be 1 to 4096 characters",
        );
        check(
            (1..=43_200).contains(&self.handoff_timeout_minutes),
            "handoff_timeout_minutes",
            "must be between 1 and 43200",
        );
        check(
            (1..=43_200).contains(&self.assignment_timeout_minutes),
            "assignment_timeout_minutes",
            "must be between 1 and 43200",
        );
        problems
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stored_object_missing_fields_takes_the_defaults() {
        let stored = serde_json::json!({"history_turns": 3});
        let settings = AssistantSettings::from_stored(&stored);
        assert_eq!(settings.history_turns, 3);
        assert!(settings.memory_enabled);
        assert_eq!(settings.debounce_ms, 0);
    }

    #[test]
    fn defaults_are_valid() {
        assert!(AssistantSettings::default().problems().is_empty());
    }

    #[test]
    fn every_out_of_range_field_is_reported() {
        let settings = AssistantSettings {
            temperature: Some(2.5),
            max_tokens: Some(0),
            history_turns: 500,
            memory_enabled: true,
            debounce_ms: 61_000,
            fallback_message: Some(String::new()),
            handoff: true,
            handoff_timeout_minutes: 0,
            assignment_timeout_minutes: 0,
            vision: true,
            transcribe: true,
        };
        let fields: Vec<_> = settings.problems().iter().map(|p| p.field).collect();
        assert_eq!(
            fields,
            [
                "temperature",
                "max_tokens",
                "history_turns",
                "debounce_ms",
                "fallback_message",
                "handoff_timeout_minutes",
                "assignment_timeout_minutes"
            ]
        );
    }
}
