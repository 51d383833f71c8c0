//! Turning stored messages into the model's history: whole turns only, so that a tool call is
//! never separated from its result.

use chrono::{DateTime, Utc};
use parley_persistence::Role;
use parley_persistence::entities::message;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::llm::{ChatMessage, ToolCall};

/// A stored message as the history keeps it: what the prompt reads (role, content, tool calls)
/// and what the keeping orders and matches by (time, id). A resting identity holds its history
/// for as long as it is remembered, so every byte here is multiplied by the people a server
/// has heard from: about 72 bytes and the text, where the table's row takes 350 and more.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct Kept {
    pub(crate) id: Uuid,
    pub(crate) created_at: DateTime<Utc>,
    pub(crate) role: Role,
    pub(crate) content: Box<str>,
    tooling: Tooling,
}

/// A message's part in a tool round.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
enum Tooling {
    None,
    /// The calls an assistant message asked for.
    Calls(Box<[ToolCall]>),
    /// The call a tool result answers.
    Answers(Box<str>),
}

impl From<message::Model> for Kept {
    fn from(m: message::Model) -> Self {
        let tooling = match (m.role, m.tool_calls, m.tool_call_id) {
            (Role::Tool, _, Some(id)) => Tooling::Answers(id.into_boxed_str()),
            (Role::Assistant, Some(calls), _) => {
                match serde_json::from_value::<Vec<ToolCall>>(calls) {
                    Ok(calls) if !calls.is_empty() => Tooling::Calls(calls.into_boxed_slice()),
                    _ => Tooling::None,
                }
            }
            _ => Tooling::None,
        };
        Self {
            id: m.id,
            created_at: m.created_at,
            role: m.role,
            content: m.content.into_boxed_str(),
            tooling,
        }
    }
}

impl From<&message::Model> for Kept {
    fn from(m: &message::Model) -> Self {
        Self::from(m.clone())
    }
}

/// The last `turns` whole turns of `messages` (oldest first) as chat messages. A turn starts at
/// a user message and holds every assistant and tool message up to the next one.
pub(crate) fn last_turns(messages: &[Kept], turns: usize) -> Vec<ChatMessage> {
    if turns == 0 {
        return Vec::new();
    }
    messages[start_of_last_turns(messages, turns)..]
        .iter()
        .filter_map(to_chat)
        .collect()
}

/// Where the last `turns` whole turns of `messages` start.
fn start_of_last_turns(messages: &[Kept], turns: usize) -> usize {
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
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct KeptHistory {
    /// The conversation they belong to.
    pub(crate) conversation_id: Uuid,
    /// Oldest first.
    messages: Vec<Kept>,
    /// Messages stored by others from this time on may be missing; `None` when the kept
    /// messages are all there is.
    unread_since: Option<DateTime<Utc>>,
}

impl KeptHistory {
    /// History loaded whole (the conversation's last `window` messages, oldest first).
    pub(crate) fn loaded(conversation_id: Uuid, messages: Vec<message::Model>) -> Self {
        Self {
            conversation_id,
            messages: messages.into_iter().map(Kept::from).collect(),
            unread_since: None,
        }
    }

    /// Since when to read messages others stored; `None` when nothing is missing.
    pub(crate) fn refresh_from(&self) -> Option<DateTime<Utc>> {
        self.unread_since.map(|at| at - REFRESH_OVERLAP)
    }

    /// Messages may have been stored by others from `since` on.
    pub(crate) fn missed(&mut self, since: DateTime<Utc>) {
        self.unread_since = Some(self.unread_since.map_or(since, |at| at.min(since)));
    }

    /// Adds the messages read since [`KeptHistory::refresh_from`]; nothing is missing after.
    pub(crate) fn add(&mut self, newer: Vec<message::Model>) {
        self.merge(newer.into_iter().map(Kept::from).collect());
        self.unread_since = None;
    }

    /// Adds a message this actor stored.
    pub(crate) fn push(&mut self, stored: &message::Model) {
        self.merge(vec![Kept::from(stored)]);
    }

    /// Adds what is not kept yet, keeping time order.
    fn merge(&mut self, newer: Vec<Kept>) {
        let fresh: Vec<Kept> = newer
            .into_iter()
            .filter(|m| !self.messages.iter().rev().any(|k| k.id == m.id))
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
    pub(crate) fn messages(&self) -> &[Kept] {
        &self.messages
    }

    /// Forgets what the next turns will not send: everything before the last `turns` turns
    /// (whole turns are what the model gets).
    pub(crate) fn keep_last_turns(&mut self, turns: usize) {
        let from = start_of_last_turns(&self.messages, turns.max(1));
        self.messages.drain(..from);
    }
}

fn to_chat(m: &Kept) -> Option<ChatMessage> {
    let content = || m.content.to_string();
    match (m.role, &m.tooling) {
        (Role::User, _) => Some(ChatMessage::user(content())),
        (Role::Assistant, Tooling::Calls(calls)) => {
            let text = (!m.content.is_empty()).then(content);
            Some(ChatMessage::tool_request(text, calls.to_vec()))
        }
        // What the business said to the person; the note on the way back says who wrote it.
        (Role::Assistant | Role::Operator, _) => Some(ChatMessage::assistant(content())),
        (Role::Tool, Tooling::Answers(id)) => Some(ChatMessage::tool_result(id, content())),
        (Role::Tool, _) => None,
        (Role::System, _) => Some(ChatMessage::system(content())),
    }
}

#[cfg(test)]
pub(super) mod tests {
    use chrono::Utc;
    use parley_persistence::{Direction, MessageStatus};
    use serde_json::json;
    use uuid::Uuid;

    use super::*;

    /// A stored message of `role` (an assistant's without content asks for a tool call; a
    /// tool's answers it).
    pub(in crate::conversation) fn message(role: Role, content: &str) -> message::Model {
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
            operator_id: None,
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
        let messages: Vec<Kept> = messages.into_iter().map(Kept::from).collect();
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
        let messages: Vec<Kept> = messages.into_iter().map(Kept::from).collect();
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
        let contents: Vec<&str> = kept.messages().iter().map(|m| &*m.content).collect();
        assert_eq!(contents, ["one", "two", "three"]);

        kept.keep_last_turns(1);
        let contents: Vec<&str> = kept.messages().iter().map(|m| &*m.content).collect();
        assert_eq!(contents, ["three"]);
    }
}
