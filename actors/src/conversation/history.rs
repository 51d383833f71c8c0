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
    messages[start_of_last_turns(messages, turns)..]
        .iter()
        .filter_map(to_chat)
        .collect()
}

/// Where the last `turns` whole turns of `messages` start.
fn start_of_last_turns(messages: &[message::Model], turns: usize) -> usize {
    let starts: Vec<usize> = messages
        .iter()
        .enumerate()
        .filter(|(_, m)| m.role == Role::User)
        .map(|(i, _)| i)
        .collect();
    match starts.len().checked_sub(turns) {
        Some(skip) => starts[skip],
        // Fewer turns than asked: start at the first user message, dropping any orphan
        // assistant output before it (a template sent before the person wrote, say).
        None => starts.first().copied().unwrap_or(messages.len()),
    }
}

/// How far back a refresh looks before the newest kept message: a message another writer
/// (a send, a flow) timestamped just before it but committed just after the last refresh is
/// still picked up. Short, because everything inside it is read again: with 5 s, a person
/// writing fast made every turn re-read hundreds of rows (2 ms a turn on SQLite).
const REFRESH_OVERLAP: chrono::Duration = chrono::Duration::milliseconds(250);

/// The recent messages of one conversation, kept by its identity's actor between turns. The
/// actor adds what it stores itself ([`KeptHistory::push`]); what others store (a send, a
/// flow, an opt-out) is announced with [`crate::changes::Change::Messages`] and read from the
/// table on the next turn ([`KeptHistory::missed`]), so a turn reads nothing when nobody else
/// wrote, and only what is new when somebody did.
#[derive(Clone, Debug)]
pub(crate) struct KeptHistory {
    /// The conversation they belong to.
    pub(crate) conversation_id: uuid::Uuid,
    /// Oldest first.
    messages: Vec<message::Model>,
    /// Messages stored by others from this time on may be missing; `None` when the kept
    /// messages are all there is.
    unread_since: Option<chrono::DateTime<chrono::Utc>>,
}

impl KeptHistory {
    /// History loaded whole (the conversation's last `window` messages, oldest first).
    pub(crate) fn loaded(conversation_id: uuid::Uuid, messages: Vec<message::Model>) -> Self {
        Self {
            conversation_id,
            messages: messages.into_iter().map(lean).collect(),
            unread_since: None,
        }
    }

    /// Since when to read messages others stored; `None` when nothing is missing.
    pub(crate) fn refresh_from(&self) -> Option<chrono::DateTime<chrono::Utc>> {
        self.unread_since.map(|at| at - REFRESH_OVERLAP)
    }

    /// Messages may have been stored by others from `since` on.
    pub(crate) fn missed(&mut self, since: chrono::DateTime<chrono::Utc>) {
        self.unread_since = Some(self.unread_since.map_or(since, |at| at.min(since)));
    }

    /// Gives back what was reserved for growth (a history pushed to from empty holds four).
    pub(crate) fn compact(&mut self) {
        self.messages.shrink_to_fit();
    }

    /// Adds the messages read since [`KeptHistory::refresh_from`]; nothing is missing after.
    pub(crate) fn add(&mut self, newer: Vec<message::Model>) {
        self.merge(newer);
        self.unread_since = None;
    }

    /// Adds a message this actor stored.
    pub(crate) fn push(&mut self, stored: &message::Model) {
        self.merge(vec![lean(stored.clone())]);
    }

    /// Adds what is not kept yet, keeping time order.
    fn merge(&mut self, newer: Vec<message::Model>) {
        let fresh: Vec<message::Model> = newer
            .into_iter()
            .filter(|m| !self.messages.iter().rev().any(|k| k.id == m.id))
            .map(lean)
            .collect();
        if fresh.is_empty() {
            return;
        }
        self.messages.extend(fresh);
        if !self.messages.is_sorted_by_key(|m| (m.created_at, m.id)) {
            self.messages.sort_by_key(|m| (m.created_at, m.id));
        }
    }

    /// The kept messages, oldest first.
    pub(crate) fn messages(&self) -> &[message::Model] {
        &self.messages
    }

    /// Forgets what the next turns will not send: everything before the last `turns` turns
    /// (whole turns are what the model gets).
    pub(crate) fn keep_last_turns(&mut self, turns: usize) {
        let from = start_of_last_turns(&self.messages, turns.max(1));
        self.messages.drain(..from);
    }
}

/// `m` as the history keeps it: what the prompt and the keeping read (id, role, content, tool
/// calls, time, conversation), without what only the table needs (the wire payload, token
/// usage, metadata, Meta's id and error). A resting identity holds its history for as long as
/// it is remembered, so every byte here is multiplied by the people a server has heard from.
fn lean(mut m: message::Model) -> message::Model {
    m.outbound = None;
    m.usage = None;
    m.metadata = None;
    m.error = None;
    m.platform_message_id = None;
    m
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
        // What the business said to the person; the note on the way back says who wrote it.
        Role::Operator => Some(ChatMessage::assistant(m.content.clone())),
        Role::System => Some(ChatMessage::system(m.content.clone())),
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

    #[test]
    fn kept_history_adds_only_what_is_new_in_order_and_keeps_whole_turns() {
        let first = message(Role::User, "one");
        let reply = message(Role::Assistant, "two");
        let mut kept = KeptHistory::loaded(Uuid::nil(), vec![first.clone()]);
        kept.push(&reply);
        assert_eq!(kept.refresh_from(), None, "nothing was stored by others");

        // Someone else stored a message: the next refresh starts before it.
        let next = message(Role::User, "three");
        kept.missed(next.created_at);
        assert!(kept.refresh_from().is_some_and(|at| at < next.created_at));

        // A refresh overlaps what is kept: only the new message is added, in time order.
        kept.add(vec![reply.clone(), next.clone()]);
        assert_eq!(kept.refresh_from(), None);
        let contents: Vec<&str> = kept.messages().iter().map(|m| m.content.as_str()).collect();
        assert_eq!(contents, ["one", "two", "three"]);

        kept.keep_last_turns(1);
        let contents: Vec<&str> = kept.messages().iter().map(|m| m.content.as_str()).collect();
        assert_eq!(contents, ["three"]);
    }
}
