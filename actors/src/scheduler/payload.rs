//! A scheduled task's payload, parsed into one typed value per task type (parse, don't
//! validate): a missing or ill-typed field is named by its path under `payload`.

use parley_persistence::TaskType;
use serde_json::{Map, Value};
use uuid::Uuid;

use crate::outbound::FreeForm;
use crate::whatsapp::{OutgoingMedia, TemplateParameters};

/// What a task does, with its parameters.
#[derive(Clone, Debug, PartialEq)]
pub enum TaskPayload {
    /// Free text or a file to an identity on a channel.
    SendMessage {
        /// The identity (its id, external id, phone or e-mail; stored as its id).
        identity: String,
        /// The channel.
        channel_id: Uuid,
        /// The text (`message`) or the file (`media`).
        content: FreeForm,
    },
    /// A template to an identity on a channel.
    SendTemplate {
        /// The identity.
        identity: String,
        /// The channel.
        channel_id: Uuid,
        /// The template's name.
        template_name: String,
        /// Its language.
        language: String,
        /// Send components (`{"body": [{"type": "text", "text": "Ana"}]}`); a plain array of
        /// strings fills the body.
        parameters: TemplateParameters,
    },
    /// Creates and queues a flow.
    StartFlow {
        /// The campaign.
        campaign_id: Uuid,
        /// The channel.
        channel_id: Uuid,
        /// The recipients (identity ids, external ids, phones or e-mails; stored as ids).
        contacts: Vec<String>,
        /// The flow's configuration.
        configuration: Option<Value>,
    },
    /// Moves an identity to a stage.
    SetStage {
        /// The identity.
        identity: String,
        /// The stage: its id or its name, as `POST /identity/{id}/stage` takes it (stored as its
        /// id).
        stage_id: String,
        /// Kept with the stage history entry.
        metadata: Value,
    },
    /// The identity's assistant writes a follow-up and it is sent.
    AssistantFollowup {
        /// The identity.
        identity: String,
        /// The channel.
        channel_id: Uuid,
        /// What the assistant is asked to do.
        instructions: String,
    },
}

/// Longest free text or instructions.
const MAX_TEXT: usize = 4_096;

/// A field problem: the field's name under `payload` and what is wrong.
pub type FieldProblem = (String, String);

impl TaskPayload {
    /// Parses `payload` for `task_type`.
    ///
    /// # Errors
    /// Every field problem found.
    pub fn parse(task_type: TaskType, payload: &Value) -> Result<Self, Vec<FieldProblem>> {
        let empty = Map::new();
        let Some(object) = payload.as_object() else {
            return Err(vec![(String::new(), "must be an object".to_owned())]);
        };
        let fields = Fields {
            object: if object.is_empty() { &empty } else { object },
            problems: Vec::new(),
        };
        fields.parse(task_type)
    }

    /// The stored form.
    pub fn to_json(&self) -> Value {
        use serde_json::json;
        match self {
            Self::SendMessage {
                identity,
                channel_id,
                content: FreeForm::Text(message),
            } => json!({"identity_id": identity, "channel_id": channel_id, "message": message}),
            Self::SendMessage {
                identity,
                channel_id,
                content: FreeForm::Media(media),
            } => json!({"identity_id": identity, "channel_id": channel_id, "media": media}),
            Self::SendTemplate {
                identity,
                channel_id,
                template_name,
                language,
                parameters,
            } => json!({"identity_id": identity, "channel_id": channel_id,
                        "template_name": template_name, "language": language,
                        "parameters": parameters}),
            Self::StartFlow {
                campaign_id,
                channel_id,
                contacts,
                configuration,
            } => json!({"campaign_uid": campaign_id, "channel_uid": channel_id,
                        "contact_uids": contacts, "configuration": configuration}),
            Self::SetStage {
                identity,
                stage_id,
                metadata,
            } => json!({"identity_id": identity, "stage_id": stage_id, "metadata": metadata}),
            Self::AssistantFollowup {
                identity,
                channel_id,
                instructions,
            } => json!({"identity_id": identity, "channel_id": channel_id,
                        "instructions": instructions}),
        }
    }
}

struct Fields<'a> {
    object: &'a Map<String, Value>,
    problems: Vec<FieldProblem>,
}

impl Fields<'_> {
    fn parse(mut self, task_type: TaskType) -> Result<TaskPayload, Vec<FieldProblem>> {
        let parsed = match task_type {
            TaskType::SendMessage => TaskPayload::SendMessage {
                identity: self.text("identity_id", 512),
                channel_id: self.uuid("channel_id"),
                content: self.free_form(),
            },
            TaskType::SendTemplate => TaskPayload::SendTemplate {
                identity: self.text("identity_id", 512),
                channel_id: self.uuid("channel_id"),
                template_name: self.text("template_name", 512),
                language: self.template_language("language"),
                parameters: self.parameters(),
            },
            TaskType::StartFlow => TaskPayload::StartFlow {
                campaign_id: self.uuid("campaign_uid"),
                channel_id: self.uuid("channel_uid"),
                contacts: self.contacts(),
                configuration: self
                    .object
                    .get("configuration")
                    .filter(|v| !v.is_null())
                    .cloned(),
            },
            TaskType::SetStage => TaskPayload::SetStage {
                identity: self.text("identity_id", 512),
                stage_id: self.text("stage_id", 200),
                metadata: self.metadata(),
            },
            TaskType::AssistantFollowup => TaskPayload::AssistantFollowup {
                identity: self.text("identity_id", 512),
                channel_id: self.uuid("channel_id"),
                instructions: self.text("instructions", MAX_TEXT),
            },
        };
        // Free-form values are bounded like every other in the API.
        for field in ["parameters", "configuration", "metadata"] {
            if let Some(value) = self.object.get(field)
                && !crate::domain::within_free_form_limit(value)
            {
                let limit = crate::domain::free_form_limit();
                self.problem(field, format!("must be at most {limit} bytes of JSON"));
            }
        }
        if self.problems.is_empty() {
            Ok(parsed)
        } else {
            Err(self.problems)
        }
    }

    fn problem(&mut self, field: &str, message: impl Into<String>) {
        self.problems.push((field.to_owned(), message.into()));
    }

    fn text(&mut self, field: &str, max: usize) -> String {
        match self.object.get(field) {
            None | Some(Value::Null) => self.problem(field, "is required"),
            Some(Value::String(text)) if text.trim().is_empty() => {
                self.problem(field, "must not be empty");
            }
            Some(Value::String(text)) if text.chars().count() > max => {
                self.problem(field, format!("must be at most {max} characters"));
            }
            Some(Value::String(text)) => return text.trim().to_owned(),
            Some(_) => self.problem(field, "must be a string"),
        }
        String::new()
    }

    /// `message` or `media`, exactly one.
    fn free_form(&mut self) -> FreeForm {
        let given = |field| self.object.get(field).filter(|v| !v.is_null());
        match (given("message"), given("media")) {
            (Some(_), Some(_)) => {
                self.problem("media", "is sent instead of a message: give one of them");
            }
            (None, Some(media)) => match OutgoingMedia::parse(media) {
                Ok(media) => return FreeForm::Media(media),
                Err(found) => {
                    for (field, problem) in found {
                        let path = if field.is_empty() {
                            "media".to_owned()
                        } else {
                            format!("media.{field}")
                        };
                        self.problems.push((path, problem));
                    }
                }
            },
            _ => return FreeForm::Text(self.text("message", MAX_TEXT)),
        }
        FreeForm::Text(String::new())
    }

    fn template_language(&mut self, field: &str) -> String {
        let language = self.text(field, 16);
        if !language.is_empty() && !crate::domain::is_template_language(&language) {
            self.problem(field, "must be a language code such as en_US or pt_BR");
        }
        language
    }

    fn uuid(&mut self, field: &str) -> Uuid {
        match self.object.get(field) {
            None | Some(Value::Null) => self.problem(field, "is required"),
            Some(Value::String(text)) => match Uuid::parse_str(text) {
                Ok(id) => return id,
                Err(_) => self.problem(field, "must be a UUID"),
            },
            Some(_) => self.problem(field, "must be a string (a UUID)"),
        }
        Uuid::nil()
    }

    fn metadata(&mut self) -> Value {
        match self.object.get("metadata") {
            None | Some(Value::Null) => Value::Object(Map::new()),
            Some(value @ Value::Object(_)) => value.clone(),
            Some(_) => {
                self.problem("metadata", "must be an object");
                Value::Null
            }
        }
    }

    fn contacts(&mut self) -> Vec<String> {
        match self.object.get("contact_uids") {
            Some(Value::Array(items)) if !items.is_empty() => {
                let texts: Vec<String> = items
                    .iter()
                    .filter_map(|v| v.as_str().map(str::to_owned))
                    .collect();
                if texts.len() != items.len() {
                    self.problem("contact_uids", "must be an array of strings");
                }
                texts
            }
            Some(Value::Array(_)) => {
                self.problem("contact_uids", "must name at least one contact");
                Vec::new()
            }
            None | Some(Value::Null) => {
                self.problem("contact_uids", "is required");
                Vec::new()
            }
            Some(_) => {
                self.problem("contact_uids", "must be an array of strings");
                Vec::new()
            }
        }
    }

    fn parameters(&mut self) -> TemplateParameters {
        match self.object.get("parameters") {
            None | Some(Value::Null) => TemplateParameters::new(),
            Some(Value::Object(components)) => components.clone(),
            Some(Value::Array(values)) => {
                let texts: Option<Vec<Value>> = values
                    .iter()
                    .map(|v| {
                        v.as_str()
                            .map(|t| serde_json::json!({"type": "text", "text": t}))
                    })
                    .collect();
                match texts {
                    Some(body) => {
                        let mut components = TemplateParameters::new();
                        components.insert("body".to_owned(), Value::Array(body));
                        components
                    }
                    None => {
                        self.problem(
                            "parameters",
                            "must be an array of strings or an object of components",
                        );
                        TemplateParameters::new()
                    }
                }
            }
            Some(_) => {
                self.problem(
                    "parameters",
                    "must be an array of strings or an object of components",
                );
                TemplateParameters::new()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn each_type_parses_into_its_own_fields() {
        let channel = Uuid::now_v7();
        let parsed = TaskPayload::parse(
            TaskType::SendMessage,
            &json!({"identity_id": "crm-42", "channel_id": channel, "message": " Hi "}),
        );
        assert_eq!(
            parsed,
            Ok(TaskPayload::SendMessage {
                identity: "crm-42".into(),
                channel_id: channel,
                content: FreeForm::Text("Hi".into())
            })
        );
        let file = TaskPayload::parse(
            TaskType::SendMessage,
            &json!({"identity_id": "crm-42", "channel_id": channel,
                    "media": {"kind": "image", "media_id": "77", "caption": "Yours"}}),
        )
        .expect("parses");
        let TaskPayload::SendMessage {
            content: FreeForm::Media(media),
            ..
        } = &file
        else {
            panic!("a file");
        };
        assert_eq!(media.media_id.as_deref(), Some("77"));
        assert_eq!(
            TaskPayload::parse(TaskType::SendMessage, &file.to_json()),
            Ok(file)
        );
        let both = TaskPayload::parse(
            TaskType::SendMessage,
            &json!({"identity_id": "a", "channel_id": channel, "message": "Hi",
                    "media": {"kind": "video"}}),
        )
        .expect_err("refused");
        assert_eq!(both[0].0, "media");
        let template = TaskPayload::parse(
            TaskType::SendTemplate,
            &json!({"identity_id": "crm-42", "channel_id": channel, "template_name": "t",
                    "language": "en_US", "parameters": ["Ana"]}),
        )
        .expect("parses");
        let TaskPayload::SendTemplate { parameters, .. } = template else {
            panic!("a template send");
        };
        assert_eq!(parameters["body"], json!([{"type": "text", "text": "Ana"}]));
    }

    #[test]
    fn missing_and_mistyped_fields_are_named() {
        let problems = TaskPayload::parse(
            TaskType::SetStage,
            &json!({"identity_id": 7, "stage_id": 9, "metadata": []}),
        )
        .expect_err("refused");
        let fields: Vec<&str> = problems.iter().map(|(f, _)| f.as_str()).collect();
        assert_eq!(fields, ["identity_id", "stage_id", "metadata"]);
        let flow = TaskPayload::parse(TaskType::StartFlow, &json!({})).expect_err("refused");
        let fields: Vec<&str> = flow.iter().map(|(f, _)| f.as_str()).collect();
        assert_eq!(fields, ["campaign_uid", "channel_uid", "contact_uids"]);
        assert!(TaskPayload::parse(TaskType::SendMessage, &json!("text")).is_err());
    }
}
