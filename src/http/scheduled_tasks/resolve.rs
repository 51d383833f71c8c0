//! What a scheduled task's payload refers to, found in the caller's workspace: a 400 naming the
//! payload's field when it is not there, else the payload with its references resolved.

use parley_actors::flow::FlowConfig;
use parley_actors::outbound::FreeForm;
use parley_actors::scheduler::TaskPayload;
use parley_actors::store::identities::StageRef;
use parley_actors::whatsapp::template::{check_parameters, header_links};
use parley_actors::whatsapp::{TemplateParameters, TemplateRef};
use parley_persistence::{campaigns, channels, stages};
use serde_json::Value;
use uuid::Uuid;

use crate::http::AppState;
use crate::http::error::{ApiError, FieldError, Result};
use crate::http::lookup::{resolve_contacts, resolve_identity};
use crate::http::validation::{Problems, egress_allows};

/// Finds what a payload refers to in the workspace (a 400 naming the payload's field when it
/// is not there) and answers the payload with its references resolved (identity paths and
/// contacts become identity ids).
pub(super) struct Resolver<'a> {
    pub(super) state: &'a AppState,
    pub(super) ws: i64,
}

impl Resolver<'_> {
    pub(super) async fn resolve(&self, payload: TaskPayload) -> Result<TaskPayload> {
        Ok(match payload {
            TaskPayload::SendMessage {
                identity,
                channel_id,
                content,
            } => {
                if let FreeForm::Media(media) = &content {
                    self.links_allowed(media.link.as_deref(), ["payload", "media", "link"])?;
                }
                TaskPayload::SendMessage {
                    identity: self.identity(&identity).await?,
                    channel_id: self.channel(channel_id, "channel_id").await?,
                    content,
                }
            }
            TaskPayload::SendTemplate {
                identity,
                channel_id,
                template_name,
                language,
                parameters,
            } => {
                let identity = self.identity(&identity).await?;
                let channel_id = self.channel(channel_id, "channel_id").await?;
                self.template(channel_id, &template_name, &language, &parameters)
                    .await?;
                let at = ["payload", "parameters", "header"];
                self.links_allowed(header_links(&parameters), at)?;
                TaskPayload::SendTemplate {
                    identity,
                    channel_id,
                    template_name,
                    language,
                    parameters,
                }
            }
            TaskPayload::StartFlow {
                campaign_id,
                channel_id,
                contacts,
                configuration,
            } => {
                self.start_flow(campaign_id, channel_id, contacts, configuration)
                    .await?
            }
            TaskPayload::SetStage {
                identity,
                stage_id,
                metadata,
            } => {
                // An id or a name, as `POST /identity/{id}/stage` takes it; stored as the id.
                let ws = self.ws;
                let stage = match StageRef::parse(&stage_id) {
                    StageRef::Id(id) => stages::find(&self.state.db, ws, id).await?,
                    StageRef::Name(name) => stages::find_by_name(&self.state.db, ws, &name).await?,
                }
                .ok_or_else(|| missing("stage_id", "stage"))?;
                TaskPayload::SetStage {
                    identity: self.identity(&identity).await?,
                    stage_id: stage.id.to_string(),
                    metadata,
                }
            }
            TaskPayload::AssistantFollowup {
                identity,
                channel_id,
                instructions,
            } => TaskPayload::AssistantFollowup {
                identity: self.identity(&identity).await?,
                channel_id: self.channel(channel_id, "channel_id").await?,
                instructions,
            },
        })
    }

    async fn identity(&self, raw: &str) -> Result<String> {
        resolve_identity(&self.state.db, self.ws, raw)
            .await?
            .map(|found| found.id.to_string())
            .ok_or_else(|| missing("identity_id", "identity"))
    }

    async fn channel(&self, id: Uuid, field: &'static str) -> Result<Uuid> {
        channels::find(&self.state.db, self.ws, id)
            .await?
            .map(|_| id)
            .ok_or_else(|| missing(field, "channel"))
    }

    /// The channel's template `name` in `language` exists and `parameters` fill exactly its
    /// placeholders, as a send's must (502 when Meta cannot be asked).
    async fn template(
        &self,
        channel_id: Uuid,
        name: &str,
        language: &str,
        parameters: &TemplateParameters,
    ) -> Result<()> {
        let listed = self
            .state
            .actors
            .channels()
            .list_templates(channel_id)
            .await?;
        let wanted = TemplateRef {
            name_or_id: name.to_owned(),
            language: language.to_owned(),
            carousel: false,
        };
        let Some(found) = wanted.find(&listed) else {
            return Err(ApiError::invalid(vec![FieldError::new(
                ["payload", "template_name"],
                format!("names no template of this channel in {language}"),
            )]));
        };
        check_parameters(found, parameters).map_err(|mismatch| {
            ApiError::invalid(vec![FieldError::new(
                ["payload", "parameters", mismatch.component],
                mismatch.to_string(),
            )])
        })
    }

    /// The links a payload sends files at are ones the egress policy allows (400 at `at`).
    fn links_allowed<'l>(
        &self,
        links: impl IntoIterator<Item = &'l str>,
        at: [&str; 3],
    ) -> Result<()> {
        let mut problems = Problems::default();
        let hub = self.state.actors.mcp();
        for link in links {
            egress_allows(&mut problems, hub.egress(), at, link);
        }
        problems.finish()
    }

    async fn start_flow(
        &self,
        campaign_id: Uuid,
        channel_id: Uuid,
        contacts: Vec<String>,
        configuration: Option<Value>,
    ) -> Result<TaskPayload> {
        let db = &self.state.db;
        if campaigns::find(db, self.ws, campaign_id).await?.is_none() {
            return Err(missing("campaign_uid", "campaign"));
        }
        let channel_id = self.channel(channel_id, "channel_uid").await?;
        if let Err(problems) = FlowConfig::parse(configuration.as_ref()) {
            let details = problems
                .into_iter()
                .map(|(field, problem)| {
                    FieldError::new(["payload", "configuration", field], problem)
                })
                .collect();
            return Err(ApiError::invalid(details));
        }
        let recipients =
            resolve_contacts(db, self.ws, contacts)
                .await
                .map_err(|error| match error {
                    ApiError::BadRequest { message, .. } => {
                        ApiError::invalid(vec![FieldError::new(
                            ["payload", "contact_uids"],
                            message,
                        )])
                    }
                    other => other,
                })?;
        Ok(TaskPayload::StartFlow {
            campaign_id,
            channel_id,
            contacts: recipients
                .into_iter()
                .map(|r| r.identity_id.to_string())
                .collect(),
            configuration,
        })
    }
}

/// A payload field naming nothing of the workspace.
fn missing(field: &str, what: &str) -> ApiError {
    ApiError::invalid(vec![FieldError::new(
        ["payload", field],
        format!("names no {what} of this workspace"),
    )])
}
