//! What a task does when it runs, by type, through the same paths the API uses.

use std::sync::Arc;

use parley_persistence::entities::scheduled_task;
use parley_persistence::flows::NewRecipient;
use parley_persistence::{FlowStatus, channels, clock, identities, stages};
use serde_json::{Value, json};
use uuid::Uuid;

use super::TaskPayload;
use crate::changes::Change;
use crate::flow::{self, FlowConfig, FlowRequest};
use crate::outbound::{Outbox, Sent, TemplateRef, TemplateSend};
use crate::people;
use crate::runtime::Handles;

/// Runs `task`; answers what it did, or why it failed.
pub(super) async fn execute(
    handles: &Arc<Handles>,
    task: &scheduled_task::Model,
) -> Result<Value, String> {
    let payload = TaskPayload::parse(task.task_type, &task.payload)
        .map_err(|problems| format!("the payload no longer reads: {problems:?}"))?;
    let ws = task.workspace_id;
    let db = &handles.db;
    let outbox = Outbox::new(handles.clone());
    match payload {
        TaskPayload::SendMessage {
            identity,
            channel_id,
            message,
        } => {
            let sent = outbox
                .send_text(ws, channel_id, identity_id(&identity)?, message)
                .await
                .map_err(|e| e.to_string())?;
            Ok(sent_json(&sent))
        }
        TaskPayload::SendTemplate {
            identity,
            channel_id,
            template_name,
            language,
            parameters,
        } => {
            let channel = channels::find(db, ws, channel_id)
                .await
                .map_err(|e| e.to_string())?
                .ok_or("the channel no longer exists")?;
            let phone = people::phone_of(db, identity_id(&identity)?)
                .await
                .map_err(|e| e.to_string())?
                .ok_or("the identity has no phone number")?;
            let send = TemplateSend {
                workspace_id: ws,
                channel,
                phone,
                name: None,
                template: TemplateRef {
                    name_or_id: template_name,
                    language,
                    carousel: false,
                },
                parameters,
            };
            let sent = outbox
                .send_template(send)
                .await
                .map_err(|e| e.to_string())?;
            Ok(sent_json(&sent))
        }
        TaskPayload::StartFlow {
            campaign_id,
            channel_id,
            contacts,
            configuration,
        } => {
            let mut recipients = Vec::with_capacity(contacts.len());
            for contact in contacts {
                recipients.push(NewRecipient {
                    identity_id: identity_id(&contact)?,
                    contact,
                });
            }
            let request = FlowRequest {
                workspace_id: ws,
                campaign_id,
                channel_id,
                recipients,
                description: Some(format!("Started by scheduled task {}", task.name)),
                status: FlowStatus::Queued,
                configuration: FlowConfig::parse(configuration.as_ref()).unwrap_or_default(),
            };
            let created = flow::create(handles, request)
                .await
                .map_err(|e| e.to_string())?;
            Ok(json!({"flow_uid": created.id}))
        }
        TaskPayload::SetStage {
            identity,
            stage_id,
            metadata,
        } => {
            let storage = |e: parley_persistence::PersistenceError| e.to_string();
            let identity = identities::find(db, ws, identity_id(&identity)?)
                .await
                .map_err(storage)?
                .ok_or("the identity no longer exists")?;
            let stage = stages::find(db, ws, stage_id)
                .await
                .map_err(storage)?
                .ok_or("the stage no longer exists")?;
            let txn = parley_persistence::begin_write(db).await.map_err(storage)?;
            let (moved, entry) =
                identities::set_stage(&txn, identity, &stage, metadata, clock::now())
                    .await
                    .map_err(storage)?;
            txn.commit().await.map_err(|e| e.to_string())?;
            if let Ok(conversations) = handles.conversations() {
                conversations.changed(&Change::Identity {
                    workspace_id: ws,
                    identity_id: moved.id,
                });
            }
            Ok(json!({"identity_id": moved.id, "stage": stage.name, "history_id": entry.id}))
        }
        TaskPayload::AssistantFollowup {
            identity,
            channel_id,
            instructions,
        } => {
            let identity_id = identity_id(&identity)?;
            let phone = people::phone_of(db, identity_id)
                .await
                .map_err(|e| e.to_string())?
                .ok_or("the identity has no phone number")?;
            let conversations = handles.conversations().map_err(|e| e.to_string())?;
            let outcome = conversations
                .follow_up(ws, identity_id, channel_id, phone, instructions)
                .await
                .map_err(|e| e.to_string())?;
            let delivered = match outcome.delivery {
                Some(outgoing) => outbox
                    .deliver_reply(outcome.message_id, channel_id, outgoing)
                    .await
                    .map_err(|e| format!("the follow-up was written but not sent: {e}"))?,
                None => outbox
                    .deliver(outcome.message_id)
                    .await
                    .map_err(|e| format!("the follow-up was written but not sent: {e}"))?,
            };
            Ok(
                json!({"message_id": outcome.message_id, "conversation_id": outcome.conversation_id,
                      "platform_message_id": delivered.platform_message_id, "content": outcome.reply}),
            )
        }
    }
}

/// A stored identity reference: the identity's id (resolved when the task was created).
fn identity_id(stored: &str) -> Result<Uuid, String> {
    Uuid::parse_str(stored).map_err(|_| format!("`{stored}` is not an identity id"))
}

fn sent_json(sent: &Sent) -> Value {
    json!({"message_id": sent.message_id, "conversation_id": sent.conversation_id,
           "platform_message_id": sent.platform_message_id, "content": sent.content})
}
