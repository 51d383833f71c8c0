//! An assistant's fields as a create or update gives them, each checked once.

use parley_persistence::assistants::AssistantFields;
use parley_persistence::entities::assistant;
use serde_json::{Map, Value};

use super::{MAX_MODEL_CHARS, PROVIDER_ONE};
use crate::domain::{AssistantSettings, Instructions, LanguageTag, Name};
use crate::http::error::PathSegment;
use crate::http::validation::Problems;

/// The assistant fields a request gives; `None` keeps the current value on update.
pub(super) struct AssistantInput {
    pub(super) name: Option<String>,
    pub(super) instructions: Option<String>,
    pub(super) languages: Option<Vec<String>>,
    pub(super) provider: Option<String>,
    pub(super) model: Option<Option<String>>,
    pub(super) settings: Option<Value>,
}

impl AssistantInput {
    /// Validates the given fields over `current` (or over nothing, on create), recording every
    /// problem; `None` when something required is missing or invalid.
    pub(super) fn into_fields(
        self,
        problems: &mut Problems,
        current: Option<&assistant::Model>,
    ) -> Option<AssistantFields> {
        let name = match self.name {
            Some(name) => problems
                .parse(["name"], Name::try_from(name.as_str()))
                .map(Name::into_inner),
            None => current.map(|c| c.name.clone()),
        };
        let instructions = match self.instructions {
            Some(text) => problems
                .parse(["instructions"], Instructions::try_from(text.as_str()))
                .map(Instructions::into_inner),
            None => current.map(|c| c.instructions.clone()),
        };
        let languages = match self.languages {
            Some(tags) => {
                let mut valid = Vec::with_capacity(tags.len());
                for (index, tag) in tags.iter().enumerate() {
                    let path = [PathSegment::from("languages"), PathSegment::from(index)];
                    if let Some(tag) = problems.parse(path, LanguageTag::try_from(tag.as_str())) {
                        valid.push(Value::String(tag.as_str().to_owned()));
                    }
                }
                Some(Value::Array(valid))
            }
            None => current.map(|c| c.languages.clone()),
        };
        let provider = match self.provider {
            Some(provider) if provider == PROVIDER_ONE => Some(provider),
            Some(_) => {
                problems.add(["provider"], format!("must be {PROVIDER_ONE}"));
                None
            }
            None => current.map(|c| c.provider.clone()),
        };
        let model = match self.model {
            Some(Some(model)) => {
                let model = model.trim().to_owned();
                if model.is_empty() || model.chars().count() > MAX_MODEL_CHARS {
                    problems.add(
                        ["model"],
                        format!("must be 1 to {MAX_MODEL_CHARS} characters"),
                    );
                }
                Some(model)
            }
            Some(None) => None,
            None => current.and_then(|c| c.model.clone()),
        };
        let base = current.map_or_else(
            || serde_json::to_value(AssistantSettings::default()).unwrap_or(Value::Null),
            |c| c.settings.clone(),
        );
        let settings = parse_settings(problems, base, self.settings);
        Some(AssistantFields {
            name: name?,
            instructions: instructions?,
            languages: languages?,
            provider: provider?,
            model,
            settings: settings?,
        })
    }
}

/// Lays the given `settings` object over `base`, then checks every field.
fn parse_settings(problems: &mut Problems, base: Value, given: Option<Value>) -> Option<Value> {
    let mut merged: Map<String, Value> = match base {
        Value::Object(map) => map,
        _ => Map::new(),
    };
    match given {
        None | Some(Value::Null) => {}
        Some(Value::Object(map)) => merged.extend(map),
        Some(_) => {
            problems.add(["settings"], "must be an object");
            return None;
        }
    }
    let parsed: AssistantSettings = match serde_path_to_error::deserialize(Value::Object(merged)) {
        Ok(parsed) => parsed,
        Err(error) => {
            let mut path = vec![PathSegment::from("settings")];
            path.extend(error.path().iter().map(|s| PathSegment::Key(s.to_string())));
            problems.add(path, error.inner().to_string());
            return None;
        }
    };
    let invalid = parsed.problems();
    for problem in &invalid {
        problems.add(["settings", problem.field], problem.problem);
    }
    if invalid.is_empty() {
        serde_json::to_value(parsed).ok()
    } else {
        None
    }
}
