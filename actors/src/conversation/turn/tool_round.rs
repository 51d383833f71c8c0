//! One round of tool calls the model asked for: each call run (an MCP server's or a built-in
//! tool) and its result handed back to the model; the request and the results stored together
//! while the model reads them ([`Ran::store`]).

use chrono::{DateTime, Utc};
use parley_persistence::clock;
use parley_persistence::conversations::{self, NewMessage};
use parley_persistence::entities::{conversation, message, stage};
use serde_json::Value;
use tracing::Instrument;

use super::super::context::Context;
use super::super::{ConversationDeps, ToolCallRecord, TurnError};
use super::super::{handoff, tools};
use super::toolbox::Toolbox;
use crate::llm::{ChatMessage, Completion};

/// One round of tool calls the model asked for.
pub(super) struct ToolRound<'a> {
    pub(super) deps: &'a ConversationDeps,
    pub(super) context: &'a mut Context,
    pub(super) stages: &'a [stage::Model],
    pub(super) conversation: &'a conversation::Model,
    pub(super) toolbox: &'a Toolbox,
}

/// A round that has run: what it tells the turn, and its messages, not stored yet.
pub(super) struct Ran {
    pub(super) records: Vec<ToolCallRecord>,
    /// The request and each result, at the time each happened.
    written: Vec<(NewMessage, DateTime<Utc>)>,
}

impl Ran {
    /// Stores the request and the results in one commit, so that the history holds a request
    /// with its results or neither; answers the stored rows (for the context's history).
    ///
    /// # Errors
    /// A database error; nothing of the round is stored then.
    pub(super) async fn store(
        self,
        deps: &ConversationDeps,
        conversation: &conversation::Model,
    ) -> Result<Vec<message::Model>, TurnError> {
        Ok(conversations::store_messages(&deps.writer, conversation, self.written).await?)
    }
}

impl ToolRound<'_> {
    /// Runs each call the model asked for and hands its result back (in `messages`); the
    /// round's messages are left to [`Ran::store`], so that neither the calls nor the model's
    /// next request wait for a write.
    pub(super) async fn run(
        self,
        completion: &Completion,
        messages: &mut Vec<ChatMessage>,
    ) -> Result<Ran, TurnError> {
        let db = &self.deps.db;
        let calls_json = serde_json::to_value(&completion.tool_calls).unwrap_or(Value::Null);
        let mut request = NewMessage::to_person(
            completion.content.clone(),
            parley_persistence::MessageStatus::Sent,
        );
        request.id = Some(uuid::Uuid::now_v7());
        request.usage = serde_json::to_value(completion.usage).ok();
        request.tool_calls = Some(calls_json);
        let mut written = Vec::with_capacity(1 + completion.tool_calls.len());
        written.push((request, clock::now()));
        let content = (!completion.content.is_empty()).then(|| completion.content.clone());
        messages.push(ChatMessage::tool_request(
            content,
            completion.tool_calls.clone(),
        ));
        let mut records = Vec::with_capacity(completion.tool_calls.len());
        for call in &completion.tool_calls {
            let mcp = self.toolbox.run_mcp(&self.deps.mcp, call);
            let (source, result) = match mcp.instrument(tracing::debug_span!("tool_call")).await {
                Some(result) => ("mcp", result),
                None if call.function.name == tools::HANDOFF_TOOL
                    && self.toolbox.offers(tools::HANDOFF_TOOL) =>
                {
                    let reason = tools::handoff_reason(call);
                    let (deps, conversation) = (self.deps, self.conversation);
                    handoff::hand_over(deps, self.context, conversation, reason, "tool").await?;
                    ("builtin", tools::handed_over())
                }
                None => (
                    "builtin",
                    tools::execute(db, self.context, self.stages, self.conversation.id, call)
                        .await?,
                ),
            };
            let refused = result.get("error").is_some()
                || result["ok"] == Value::Bool(false)
                || result["isError"] == Value::Bool(true);
            crate::measure::tool_call(source, !refused);
            let text = result.to_string();
            let mut result_message = NewMessage::tool_result(call.id.clone(), text.clone());
            result_message.id = Some(uuid::Uuid::now_v7());
            // Where the answer came from: an MCP server's answer is a call counted.
            result_message.metadata = Some(serde_json::json!({"source": source}));
            written.push((result_message, clock::now()));
            messages.push(ChatMessage::tool_result(&call.id, text));
            records.push(ToolCallRecord {
                name: call.function.name.clone(),
                arguments: serde_json::from_str(&call.function.arguments)
                    .unwrap_or_else(|_| Value::String(call.function.arguments.clone())),
                result,
            });
        }
        Ok(Ran { records, written })
    }
}
