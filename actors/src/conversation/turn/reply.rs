//! How a turn's reply is stored: answered to an API caller (`sent`), or waiting for the
//! channel to send it to a WhatsApp sender (`pending`, with what goes on the wire); and the
//! assistant's fallback message when the model fails.

use chrono::Utc;
use parley_persistence::conversations::{self, NewMessage};
use parley_persistence::entities::{conversation, message};
use parley_persistence::{GroupCommit, MessageStatus, clock};
use serde_json::json;
use tokio::sync::mpsc;
use uuid::Uuid;

use super::super::route::Routed;
use super::super::{ConversationDeps, TurnError, TurnEvent, TurnOrigin, TurnOutcome, TurnRequest};
use crate::llm::{Completion, LlmError, Usage};
use crate::outbound::{self, Parcel};
use crate::whatsapp::{OutboundContent, Outgoing};

/// Where the reply of a turn goes.
pub(super) struct ReplyPlan {
    /// The person's message it answers.
    to: Option<Uuid>,
    /// For a WhatsApp sender (or a follow-up): the recipient and the message the reply quotes.
    whatsapp: Option<(String, Option<String>)>,
    /// The identity, for the outbound record.
    identity_id: Uuid,
}

impl ReplyPlan {
    /// The plan for a batch: a reply to WhatsApp when any message of it came from WhatsApp
    /// (quoting the last), else an answer to the API caller.
    pub(super) fn new(batch: &[TurnRequest], to: Option<Uuid>, identity_id: Uuid) -> Self {
        let whatsapp = batch.iter().rev().find_map(|r| match &r.origin {
            TurnOrigin::WhatsApp { wamid, from, .. } => {
                Some((from.digits().to_owned(), Some(wamid.clone())))
            }
            TurnOrigin::FollowUp { to, .. } => Some((to.digits().to_owned(), None)),
            TurnOrigin::Api { .. } => None,
        });
        Self {
            to,
            whatsapp,
            identity_id,
        }
    }

    /// The message to store for `content`: pending with its wire form for a WhatsApp sender
    /// (the one "store pending, then deliver" path), answered at once for an API caller.
    fn message(&self, content: String) -> NewMessage {
        let mut message = match &self.whatsapp {
            Some((to, wamid)) => {
                let outgoing = Outgoing {
                    to: to.clone(),
                    identity_id: Some(self.identity_id),
                    operator: None,
                    content: OutboundContent::Text {
                        body: content.clone(),
                        context: wamid.clone(),
                    },
                };
                outbound::pending(&outgoing, content)
            }
            None => NewMessage::to_person(content, MessageStatus::Sent),
        };
        message.reply_to_message_id = self.to;
        message
    }

    /// Stores the model's final answer.
    pub(super) async fn store(
        &self,
        writer: &GroupCommit,
        conversation: &conversation::Model,
        completion: &Completion,
    ) -> Result<message::Model, TurnError> {
        let mut message = self.message(completion.content.clone());
        message.usage = serde_json::to_value(completion.usage).ok();
        Ok(
            conversations::store_message(writer, conversation, message, clock::now(), Vec::new())
                .await?,
        )
    }
}

/// The model failed after its retries: answer the assistant's fallback message when it has one
/// (stored with the error), else the error. Either way the person's message stays stored.
pub(super) async fn fall_back(
    deps: &ConversationDeps,
    conversation: &conversation::Model,
    routed: &Routed,
    streams: &[mpsc::Sender<TurnEvent>],
    error: LlmError,
    plan: &ReplyPlan,
) -> Result<TurnOutcome, TurnError> {
    tracing::warn!(%error, conversation_id = %conversation.id, "language model failed");
    let Some(fallback) = routed.settings.fallback_message.clone() else {
        return Err(TurnError::Llm(error));
    };
    let code = if matches!(error, LlmError::Timeout(_)) {
        "upstream_timeout"
    } else {
        "upstream_failed"
    };
    let mut message = plan.message(fallback.clone());
    message.error = Some(json!({"code": code, "message": error.to_string(), "at": Utc::now()}));
    let stored = conversations::store_message(
        &deps.writer,
        conversation,
        message,
        clock::now(),
        Vec::new(),
    )
    .await?;
    deps.inbox_moved(stored.workspace_id);
    for listener in streams {
        let _ = listener.send(TurnEvent::Token(fallback.clone())).await;
    }
    Ok(TurnOutcome {
        conversation_id: conversation.id,
        message_id: stored.id,
        reply: fallback,
        tool_calls: Vec::new(),
        usage: Usage::default(),
        fallback: true,
        parcel: Parcel::of(&stored),
    })
}
