//! Turning stored messages into the model's history: whole turns only, so that a tool call is
//! never separated from its result.

use parley_persistence::Role;
use parley_persistence::entities::message;

use crate::llm::{ChatMessage, ToolCall};

/// The last `turns` whole turns of `messages` (oldest first) as chat messages. A turn starts at
/// a user message and holds every assistant and tool message up to the next one.
pub(crate) fn last_turns(messages: &[message::Model], turns: usize) -> Vec<ChatMessage> {
    if turns == 0 {
        return Vec::new();
    }
    let starts: Vec<usize> = messages
        .iter()
        .enumerate()
        .filter(|(_, m)| m.role == Role::User)
        .map(|(i, _)| i)
        .collect();
    let from = match starts.len().checked_sub(turns) {
        Some(skip) => starts[skip],
        // Fewer turns than asked: start at the first user message, dropping any orphan
        // assistant output before it (a template sent before the person wrote, say).
        None => starts.first().copied().unwrap_or(messages.len()),
    };
    messages[from..].iter().filter_map(to_chat).collect()
}

fn to_chat(m: &message::Model) -> Option<ChatMessage> {
    match m.role {
        Role::User => Some(ChatMessage::user(m.content.clone())),
        Role::Assistant => {
            let calls: Vec<ToolCall> = m
                .tool_calls
                .as_ref()
                .and_then(|v| serde_json::from_value(v.clone()).ok())
                .unwrap_or_default();
            if calls.is_empty() {
                Some(ChatMessage::assistant(m.content.clone()))
            } else {
                let content = (!m.content.is_empty()).then(|| m.content.clone());
                Some(ChatMessage::tool_request(content, calls))
            }
        }
        Role::Tool => m
            .tool_call_id
            .as_deref()
            .map(|id| ChatMessage::tool_result(id, m.content.clone())),
    }
}

#[cfg(test)]
mod tests {
    use chrono::Utc;
    use parley_persistence::{Direction, MessageStatus};
    use serde_json::json;
    use uuid::Uuid;

    use super::*;

    fn message(role: Role, content: &str) -> message::Model {
        message::Model {
            id: Uuid::now_v7(),
            workspace_id: 1,
            conversation_id: Uuid::nil(),
            channel_id: Uuid::nil(),
            direction: if role == Role::User {
                Direction::Inbound
            } else {
                Direction::Outbound
            },
            role,
            content: content.to_owned(),
            status: MessageStatus::Sent,
            platform_message_id: None,
            error: None,
            usage: None,
            tool_calls: (role == Role::Assistant && content.is_empty())
                .then(|| json!([{"id": "c1", "type": "function", "function": {"name": "remember", "arguments": "{}"}}])),
            tool_call_id: (role == Role::Tool).then(|| "c1".to_owned()),
            created_at: Utc::now(),
            reply_to_message_id: None,
            outbound: None,
            metadata: None,
        }
    }

    #[test]
    fn only_whole_turns_are_kept_and_a_tool_call_stays_with_its_result() {
        let messages = vec![
            message(Role::User, "one"),
            message(Role::Assistant, "first"),
            message(Role::User, "two"),
            message(Role::Assistant, ""),
            message(Role::Tool, "{\"ok\":true}"),
            message(Role::Assistant, "second"),
            message(Role::User, "three"),
            message(Role::Assistant, "third"),
        ];
        let history = last_turns(&messages, 2);
        let roles: Vec<_> = history.iter().map(|m| m.role.as_str()).collect();
        assert_eq!(
            roles,
            [
                "user",
                "assistant",
                "tool",
                "assistant",
                "user",
                "assistant"
            ]
        );
        assert_eq!(history[0].content.as_deref(), Some("two"));
        assert_eq!(history[1].tool_calls.len(), 1);
        assert_eq!(history[2].tool_call_id.as_deref(), Some("c1"));
    }

    #[test]
    fn zero_turns_is_no_history_and_more_turns_than_exist_is_all() {
        let messages = vec![
            message(Role::Assistant, "template"),
            message(Role::User, "hi"),
            message(Role::Assistant, "hello"),
        ];
        assert!(last_turns(&messages, 0).is_empty());
        assert_eq!(last_turns(&messages, 10).len(), 2);
    }
}
