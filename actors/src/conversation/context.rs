//! What a conversation actor keeps about its identity between turns: the identity and its
//! memory. Loaded on the first turn, written through by the built-in tools, dropped when a
//! change to the identity is announced.

use std::collections::BTreeMap;

use litemap::LiteMap;
use serde::{Deserialize, Serialize};

use parley_persistence::entities::{conversation, identity, memory_entry, message, stage};
use parley_persistence::{ConnectionTrait, Result, memory};
use serde_json::{Value, json};

use crate::changes::Change;
use crate::conversation::history::KeptHistory;
use crate::domain::templating::nest_memory;

/// The cached view of one identity. Serialisable, to be kept sealed while its actor rests
/// (`sealed.rs`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct Context {
    /// The identity row.
    pub(crate) identity: identity::Model,
    /// Its memory, by key.
    pub(crate) memory: BTreeMap<String, memory_entry::Model>,
    /// Its current conversation on each channel, as this actor last wrote to it. Its
    /// `last_message_at` is never ahead of the database's (others may append later), so a
    /// conversation this cache thinks active is active; one it thinks idle is read again.
    /// (Sorted vectors: most people talk on one channel, and a hash map's smallest table
    /// holds four.)
    pub(crate) conversations: LiteMap<uuid::Uuid, conversation::Model>,
    /// The recent messages of that conversation on each channel, brought up to date by each
    /// turn.
    pub(crate) histories: LiteMap<uuid::Uuid, KeptHistory>,
    /// Whether `conversations` holds every open conversation of the identity, so that a
    /// channel it has none on needs no look in the table before one is started: true for an
    /// identity this server has just created, until messages are stored for it outside its
    /// actor (which may start a conversation) or a channel of its changes.
    pub(crate) conversations_known: bool,
}

impl Context {
    /// Loads the identity's context; `None` when the identity no longer exists.
    pub(crate) async fn load(
        db: &impl ConnectionTrait,
        workspace_id: i64,
        identity_id: uuid::Uuid,
    ) -> Result<Option<Self>> {
        let Some((identity, entries)) =
            memory::identity_with_memory(db, workspace_id, identity_id).await?
        else {
            return Ok(None);
        };
        let memory = entries
            .into_iter()
            .map(|entry| (entry.key.clone(), entry))
            .collect();
        Ok(Some(Self {
            memory,
            ..Self::fresh(identity)
        }))
    }

    /// The context of an identity just created: no memory, no conversations yet.
    pub(crate) fn fresh(identity: identity::Model) -> Self {
        Self {
            identity,
            memory: BTreeMap::new(),
            conversations: LiteMap::with_capacity(1),
            histories: LiteMap::with_capacity(1),
            conversations_known: false,
        }
    }

    /// Adds a message this actor stored to the history it keeps of that conversation.
    pub(crate) fn wrote(&mut self, stored: &message::Model) {
        if let Some(kept) = self
            .histories
            .get_mut(&stored.channel_id)
            .filter(|kept| kept.conversation_id == stored.conversation_id)
        {
            kept.push(stored);
        }
    }

    /// Messages of this identity may have been stored from `since` on without passing through
    /// [`Context::wrote`]: the next turn on each channel reads them from the table.
    pub(crate) fn missed(&mut self, since: chrono::DateTime<chrono::Utc>) {
        for (_, kept) in self.histories.iter_mut() {
            kept.missed(since);
        }
    }

    /// Drops what `change` made stale; the next turn reads it again. Answers `false` when
    /// nothing of this context stands any more (the identity itself changed).
    pub(crate) fn changed(&mut self, change: &Change) -> bool {
        match change {
            Change::Identity { .. } => return false,
            Change::Messages { since, .. } => {
                self.missed(*since);
                self.conversations_known = false;
            }
            Change::Stages { .. }
            | Change::KeyRevoked { .. }
            | Change::EventRoutes { .. }
            | Change::Inbox { .. } => {}
            Change::Channel { channel_id, .. } | Change::ChannelDeleted { channel_id, .. } => {
                // A deleted channel's conversations were closed; a changed one's are read
                // again.
                self.conversations.remove(channel_id);
                self.conversations_known = false;
                self.histories.remove(channel_id);
            }
            // The history kept is as long as the assistant's `history_turns` asked.
            Change::Assistants { .. } => self.histories.clear(),
        }
        true
    }

    /// Whether `change` leaves every context as it is, so that a sealed one is left alone:
    /// what [`Context::changed`] does nothing for. A change missing here costs a sealed cache
    /// its opening (one identity's messages) or the cache itself (anything else), never its
    /// correctness.
    pub(crate) fn untouched_by(change: &Change) -> bool {
        matches!(
            change,
            Change::Stages { .. }
                | Change::KeyRevoked { .. }
                | Change::EventRoutes { .. }
                | Change::Inbox { .. }
        )
    }

    /// The identity's language: `preferences.language` memory, else metadata `language`; the
    /// language part only (`pt` of `pt-BR`), lower-cased.
    pub(crate) fn language(&self) -> Option<String> {
        self.memory
            .get("preferences.language")
            .and_then(|m| m.value.as_str())
            .or_else(|| self.identity.metadata["language"].as_str())
            .map(|tag| tag.chars().take(2).collect::<String>().to_lowercase())
            .filter(|lang| lang.len() == 2)
    }

    /// The name of the identity's current stage among the workspace's `stages`.
    pub(crate) fn stage_name<'a>(&self, stages: &'a [stage::Model]) -> Option<&'a str> {
        let current = self.identity.stage_id?;
        stages
            .iter()
            .find(|s| s.id == current)
            .map(|s| s.name.as_str())
    }

    /// The object instructions are rendered with.
    /// What the model is told of the person when its instructions do not place it
    /// themselves: the memory (`key: value` lines) and the journey stage; `None` when there is
    /// nothing to tell.
    pub(crate) fn context_block(&self, stages: &[stage::Model]) -> Option<String> {
        let mut lines = Vec::new();
        if !self.memory.is_empty() {
            lines.push("What you remember about this person:".to_owned());
            for (key, entry) in &self.memory {
                let value = match &entry.value {
                    Value::String(text) => text.clone(),
                    other => other.to_string(),
                };
                lines.push(format!("- {key}: {value}"));
            }
        }
        if let Some(stage) = self.stage_name(stages) {
            lines.push(format!("Their journey stage: {stage}"));
        }
        (!lines.is_empty()).then(|| lines.join("\n"))
    }

    pub(crate) fn template_context(&self, stages: &[stage::Model]) -> Value {
        json!({
            "identity": {
                "id": self.identity.id,
                "name": self.identity.name,
                "external_id": self.identity.external_id,
                "metadata": self.identity.metadata,
                "stage": self.stage_name(stages),
            },
            "memory": nest_memory(self.memory.iter().map(|(k, e)| (k.as_str(), &e.value))),
        })
    }
}
