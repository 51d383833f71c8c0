//! What a task does when it runs, by type, through the same paths the API uses: the Outbox,
//! flow creation, the store's set-stage, a follow-up turn in the identity's conversation actor.

use parley_persistence::entities::scheduled_task;
use parley_persistence::flows::NewRecipient;
use parley_persistence::{DatabaseConnection, FlowStatus, channels};
use serde_json::{Value, json};
use uuid::Uuid;

use super::TaskPayload;
use crate::conversation::Conversations;
use crate::flow::{FlowConfig, FlowRequest, Flows};
use crate::outbound::{Outbox, Sent, TemplateSend};
use crate::people;
use crate::store::{Store, StoreError, identities::StageRef};
use crate::thread::Thread;
use crate::whatsapp::TemplateRef;

/// What task runs need; cheap to clone.
#[derive(Clone, Debug)]
pub struct TaskDeps {
    /// Connection pool.
    pub db: DatabaseConnection,
    /// Sends messages and templates.
    pub outbox: Outbox,
    /// Runs follow-up turns.
    pub conversations: Conversations,
    /// Creates flows.
    pub flows: Flows,
    /// Moves identities to stages (and tells their actors).
    pub store: Store,
    /// Runs kept per task; older ones are deleted as new ones are recorded.
    pub runs_kept: u64,
    /// Which tasks this node owns; a run's claim carries its fence.
    pub placement: crate::cluster::Placement,
}

/// Runs `task` as its run `run_id`; answers what it did, or why it failed. A message the run
/// sends is stored under the run's id, so that a restart can tell whether the run handed it
/// over (`recover`).
pub(super) async fn execute(
    deps: &TaskDeps,
    task: &scheduled_task::Model,
    run_id: Uuid,
) -> Result<Value, String> {
    let payload = TaskPayload::parse(task.task_type, &task.payload)
        .map_err(|problems| format!("the payload no longer reads: {problems:?}"))?;
    let ws = task.workspace_id;
    match payload {
        TaskPayload::SendMessage {
            identity,
            channel_id,
            content,
        } => {
            let thread = Thread {
                workspace_id: ws,
                identity_id: identity_id(&identity)?,
                channel_id,
            };
            let sent = deps
                .outbox
                .send_free_form(thread, content, Some(run_id))
                .await;
            Ok(sent_json(&sent.map_err(|e| e.to_string())?))
        }
        TaskPayload::SendTemplate {
            identity,
            channel_id,
            template_name,
            language,
            parameters,
        } => {
            let template = TemplateRef {
                name_or_id: template_name,
                language,
                carousel: false,
            };
            let identity = identity_id(&identity)?;
            let send = (identity, channel_id, template, parameters);
            send_template(deps, ws, send, run_id).await
        }
        TaskPayload::StartFlow {
            campaign_id,
            channel_id,
            contacts,
            configuration,
        } => start_flow(deps, task, campaign_id, channel_id, contacts, configuration).await,
        TaskPayload::SetStage {
            identity,
            stage_id,
            metadata,
        } => {
            let identity = identity_id(&identity)?;
            let set = deps
                .store
                .set_stage(ws, identity, &StageRef::parse(&stage_id), metadata)
                .await
                .map_err(|error| match error {
                    StoreError::NotFound(what) => {
                        format!("the {} no longer exists", what.to_lowercase())
                    }
                    other => other.to_string(),
                })?;
            Ok(
                json!({"identity_id": set.identity.id, "stage": set.stage.name, "history_id": set.entry.id}),
            )
        }
        TaskPayload::AssistantFollowup {
            identity,
            channel_id,
            instructions,
        } => follow_up(deps, ws, identity_id(&identity)?, channel_id, instructions).await,
    }
}

/// What a template task sends: to whom, on which channel, which template with which values.
type TemplateTask = (Uuid, Uuid, TemplateRef, crate::whatsapp::TemplateParameters);

async fn send_template(
    deps: &TaskDeps,
    ws: i64,
    (identity_id, channel_id, template, parameters): TemplateTask,
    run_id: Uuid,
) -> Result<Value, String> {
    let channel = channels::find(&deps.db, ws, channel_id)
        .await
        .map_err(|e| e.to_string())?
        .ok_or("the channel no longer exists")?;
    let phone = people::phone_of(&deps.db, identity_id)
        .await
        .map_err(|e| e.to_string())?
        .ok_or("the identity has no phone number")?;
    let send = TemplateSend {
        workspace_id: ws,
        channel,
        phone,
        name: None,
        template,
        parameters,
        message_id: Some(run_id),
    };
    let sent = deps.outbox.send_template(send).await;
    Ok(sent_json(&sent.map_err(|e| e.to_string())?))
}

async fn start_flow(
    deps: &TaskDeps,
    task: &scheduled_task::Model,
    campaign_id: Uuid,
    channel_id: Uuid,
    contacts: Vec<String>,
    configuration: Option<Value>,
) -> Result<Value, String> {
    let mut recipients = Vec::with_capacity(contacts.len());
    for contact in contacts {
        recipients.push(NewRecipient {
            identity_id: identity_id(&contact)?,
            contact,
        });
    }
    let request = FlowRequest {
        workspace_id: task.workspace_id,
        campaign_id,
        channel_id,
        recipients,
        description: Some(format!("Started by scheduled task {}", task.name)),
        status: FlowStatus::Queued,
        configuration: FlowConfig::parse(configuration.as_ref()).unwrap_or_default(),
    };
    let created = deps
        .flows
        .create(request)
        .await
        .map_err(|e| e.to_string())?;
    Ok(json!({"flow_uid": created.id}))
}

async fn follow_up(
    deps: &TaskDeps,
    ws: i64,
    identity_id: Uuid,
    channel_id: Uuid,
    instructions: String,
) -> Result<Value, String> {
    let phone = people::phone_of(&deps.db, identity_id)
        .await
        .map_err(|e| e.to_string())?
        .ok_or("the identity has no phone number")?;
    let outcome = deps
        .conversations
        .follow_up(ws, identity_id, channel_id, phone, instructions)
        .await
        .map_err(|e| e.to_string())?;
    let delivered = outcome
        .deliver(&deps.outbox)
        .await
        .map_err(|e| format!("the follow-up was written but not sent: {e}"))?;
    Ok(
        json!({"message_id": outcome.message_id, "conversation_id": outcome.conversation_id,
              "platform_message_id": delivered.platform_message_id, "content": outcome.reply}),
    )
}

/// A stored identity reference: the identity's id (resolved when the task was created).
fn identity_id(stored: &str) -> Result<Uuid, String> {
    Uuid::parse_str(stored).map_err(|_| format!("`{stored}` is not an identity id"))
}

fn sent_json(sent: &Sent) -> Value {
    json!({"message_id": sent.message_id, "conversation_id": sent.conversation_id,
           "platform_message_id": sent.platform_message_id, "content": sent.content})
}
