//! One round of tool calls the model asked for: the request stored, each call run (an MCP
//! server's or a built-in tool), each result stored and handed back to the model.

use parley_persistence::clock;
use parley_persistence::conversations::{self, NewMessage};
use parley_persistence::entities::{conversation, stage};
use serde_json::Value;

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

impl ToolRound<'_> {
    /// Runs each call the model asked for and hands its result back, then stores the request
    /// and the results in one commit (each at the time it happened): the history holds a
    /// request with its results or neither, and the calls do not wait for a write.
    pub(super) async fn run(
        self,
        completion: &Completion,
        messages: &mut Vec<ChatMessage>,
    ) -> Result<Vec<ToolCallRecord>, TurnError> {
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
            let (source, result) = match self.toolbox.run_mcp(&self.deps.mcp, call).await {
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
            written.push((result_message, clock::now()));
            messages.push(ChatMessage::tool_result(&call.id, text));
            records.push(ToolCallRecord {
                name: call.function.name.clone(),
                arguments: serde_json::from_str(&call.function.arguments)
                    .unwrap_or_else(|_| Value::String(call.function.arguments.clone())),
                result,
            });
        }
        let writer = &self.deps.writer;
        for stored in conversations::store_messages(writer, self.conversation, written).await? {
            self.context.wrote(&stored);
        }
        Ok(records)
    }
}
