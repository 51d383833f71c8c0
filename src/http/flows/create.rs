//! `POST /flows`: the body checked once into a [`NewFlowCommand`], its channel, campaign and
//! contacts found in the caller's workspace, and the flow created through the flows handle.

use axum::extract::State;
use parley_actors::flow::{FlowConfig, FlowRequest};
use parley_persistence::FlowStatus;
use serde::Deserialize;
use serde_json::Value;
use uuid::Uuid;

use super::{FlowRecord, record};
use crate::domain::Permission;
use crate::http::AppState;
use crate::http::auth::Caller;
use crate::http::envelope::Envelope;
use crate::http::error::{ApiError, FieldError, Result};
use crate::http::extract::Json;
use crate::http::lookup::{campaign_of, channel_of, resolve_contacts};
use crate::http::validation::{Checked, checked, problem, required};

/// Most recipients a flow may have.
const MAX_CONTACTS: usize = 100_000;
/// Longest description.
pub(super) const MAX_DESCRIPTION: usize = 2_000;

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub(super) struct CreateFlowBody {
    #[schema(required = true, value_type = uuid::Uuid)]
    channel_uid: Option<String>,
    #[schema(required = true, value_type = uuid::Uuid)]
    campaign_uid: Option<String>,
    /// Identities, each addressed like any identity (id, external id, phone or e-mail).
    #[schema(required = true, value_type = Vec<String>, min_items = 1, max_items = 100000)]
    contact_uids: Option<Vec<String>>,
    #[schema(value_type = Option<String>, max_length = 2000)]
    description: Option<String>,
    #[schema(value_type = Option<FlowConfiguration>)]
    configuration: Option<Value>,
    #[schema(value_type = Option<NewFlowStatus>)]
    status: Option<String>,
}

/// How a new flow starts: `queued` (the default) starts it, `draft` keeps it until a PATCH
/// queues it.
#[derive(utoipa::ToSchema)]
#[schema(rename_all = "lowercase")]
#[allow(
    dead_code,
    reason = "only the document names it; the handler reads the string"
)]
pub(super) enum NewFlowStatus {
    Queued,
    Draft,
}

/// A flow's `configuration`: every field optional, with its default; a value out of its
/// bounds is a 400 naming it, an unknown field is ignored.
#[derive(utoipa::ToSchema)]
#[schema(rename_all = "camelCase")]
#[allow(
    dead_code,
    reason = "only the document names it; FlowConfig::parse reads the object"
)]
pub(super) struct FlowConfiguration {
    /// Base pause between two recipients.
    #[schema(minimum = 0, maximum = 86400000, default = 1000)]
    pause_between_contacts_ms: Option<u64>,
    /// The pause varies by up to this much either way.
    #[schema(minimum = 0, maximum = 86400000, default = 0)]
    pause_between_contacts_salt_ms: Option<u64>,
    /// Sends in flight at once.
    #[schema(minimum = 1, maximum = 10, default = 1)]
    max_concurrent_messages: Option<u64>,
    /// Attempts after the first, per recipient.
    #[schema(minimum = 0, maximum = 10, default = 3)]
    max_retries: Option<u64>,
    /// Wait before a retry.
    #[schema(minimum = 0, maximum = 86400000, default = 5000)]
    retry_delay_ms: Option<u64>,
    /// Longest wait for delivery reports after the last send.
    #[schema(minimum = 0, maximum = 86400000, default = 600000)]
    timeout_ms: Option<u64>,
}

/// Run a campaign to many people.
///
/// A flow sends the campaign's template to each contact with pacing, bounded concurrency and
/// retries; `status: draft` waits for a PATCH to `queued`.
#[utoipa::path(
    post,
    path = "/flows",
    tag = "flows",
    request_body = CreateFlowBody,
    responses((status = 201, body = Envelope<FlowRecord>)),
)]
#[tracing::instrument(skip_all, fields(workspace_id = caller.workspace_id))]
pub(super) async fn create_flow(
    caller: Caller,
    State(state): State<AppState>,
    Json(body): Json<CreateFlowBody>,
) -> Result<Envelope<FlowRecord>> {
    caller.require(Permission::Write)?;
    let command = NewFlowCommand::try_from(body)?;
    let channel = channel_of(&state, &caller, command.channel_uid).await?;
    let campaign = campaign_of(&state, &caller, command.campaign_uid).await?;
    let recipients = resolve_contacts(&state.db, caller.workspace_id, command.contacts).await?;
    let request = FlowRequest {
        workspace_id: caller.workspace_id,
        campaign_id: campaign.id,
        channel_id: channel.id,
        recipients,
        description: command.description,
        status: command.status,
        configuration: command.configuration,
    };
    let created = state.actors.flows().create(request).await?;
    Ok(Envelope::created(
        "Flow created successfully",
        record(&state.db, created).await?,
    ))
}

/// A flow to create as the body asks for it, each field checked once.
struct NewFlowCommand {
    channel_uid: Uuid,
    campaign_uid: Uuid,
    contacts: Vec<String>,
    description: Option<String>,
    status: FlowStatus,
    configuration: FlowConfig,
}

impl TryFrom<CreateFlowBody> for NewFlowCommand {
    type Error = ApiError;

    fn try_from(body: CreateFlowBody) -> Result<Self> {
        let channel_uid = uid("channelUid", body.channel_uid.as_deref());
        let campaign_uid = uid("campaignUid", body.campaign_uid.as_deref());
        let contacts = contacts(body.contact_uids);
        let description = description(body.description);
        let status = status(body.status.as_deref());
        let configuration = configuration(body.configuration.as_ref());
        checked!(
            channel_uid,
            campaign_uid,
            contacts,
            description,
            status,
            configuration
        );
        Ok(Self {
            channel_uid,
            campaign_uid,
            contacts,
            description,
            status,
            configuration,
        })
    }
}

/// A required id, named by its own field when it is not a UUID.
fn uid(field: &str, raw: Option<&str>) -> Checked<Uuid> {
    let raw = required(field, raw)?;
    Uuid::parse_str(raw.trim()).map_or_else(|_| problem([field], "must be a UUID"), Ok)
}

fn contacts(raw: Option<Vec<String>>) -> Checked<Vec<String>> {
    match raw {
        None => problem(["contactUids"], "is required"),
        Some(contacts) if contacts.is_empty() => {
            problem(["contactUids"], "must name at least one contact")
        }
        Some(contacts) if contacts.len() > MAX_CONTACTS => problem(
            ["contactUids"],
            format!("may name at most {MAX_CONTACTS} contacts"),
        ),
        Some(contacts) => Ok(contacts),
    }
}

fn description(raw: Option<String>) -> Checked<Option<String>> {
    match raw {
        Some(d) if d.chars().count() > MAX_DESCRIPTION => problem(
            ["description"],
            format!("must be at most {MAX_DESCRIPTION} characters"),
        ),
        other => Ok(other),
    }
}

fn status(raw: Option<&str>) -> Checked<FlowStatus> {
    match raw {
        None | Some("queued") => Ok(FlowStatus::Queued),
        Some("draft") => Ok(FlowStatus::Draft),
        Some(_) => problem(["status"], "must be queued or draft"),
    }
}

fn configuration(raw: Option<&Value>) -> Checked<FlowConfig> {
    FlowConfig::parse(raw).map_err(|found| {
        found
            .into_iter()
            .map(|(field, problem)| {
                if field == "configuration" {
                    FieldError::new(["configuration"], problem)
                } else {
                    FieldError::new(["configuration", field], problem)
                }
            })
            .collect()
    })
}
