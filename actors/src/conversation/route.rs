//! Which assistant answers on a channel: the channel's synced worker holds the candidates; the
//! oldest one speaking the identity's language answers, else the oldest. A conversation actor
//! keeps each channel's route until a change to the channel, its workers or assistants.

use parley_persistence::entities::{assistant, channel, mcp_server};
use parley_persistence::{DatabaseConnection, assistants, channels, mcp_servers};
use serde_json::Value;
use uuid::Uuid;

use super::TurnError;
use crate::domain::AssistantSettings;
use crate::domain::templating::Compiled;

/// A channel and the assistants that may answer on it, oldest first.
#[derive(Clone, Debug)]
pub(crate) struct Route {
    channel: channel::Model,
    candidates: Vec<Candidate>,
}

/// An assistant that may answer, with what it needs read once.
#[derive(Clone, Debug)]
struct Candidate {
    assistant: assistant::Model,
    settings: AssistantSettings,
    /// Its instructions, compiled.
    instructions: Compiled,
    /// The MCP servers attached to it, in attachment order.
    mcp_servers: Vec<mcp_server::Model>,
}

/// The assistant chosen for one turn.
#[derive(Clone, Debug)]
pub(crate) struct Routed {
    /// The channel.
    pub(crate) channel: channel::Model,
    /// The assistant answering.
    pub(crate) assistant: assistant::Model,
    /// Its settings, read once.
    pub(crate) settings: AssistantSettings,
    /// Its instructions, compiled once.
    pub(crate) instructions: Compiled,
    /// The MCP servers attached to it.
    pub(crate) mcp_servers: Vec<mcp_server::Model>,
}

impl Route {
    /// Loads the channel and its worker's assistants.
    ///
    /// # Errors
    /// [`TurnError::ChannelNotFound`] for a channel that is not in the workspace, or a storage
    /// error.
    pub(crate) async fn load(
        db: &DatabaseConnection,
        workspace_id: i64,
        channel_id: Uuid,
    ) -> Result<Self, TurnError> {
        let channel = channels::find(db, workspace_id, channel_id)
            .await?
            .ok_or(TurnError::ChannelNotFound)?;
        let assistants = match channel.worker_id {
            Some(worker_id) => assistants::list_for_worker(db, workspace_id, worker_id).await?,
            None => Vec::new(),
        };
        let mut candidates = Vec::with_capacity(assistants.len());
        for assistant in assistants {
            candidates.push(Candidate {
                settings: AssistantSettings::from_stored(&assistant.settings),
                instructions: Compiled::new(&assistant.instructions),
                mcp_servers: mcp_servers::attached_to(db, assistant.id).await?,
                assistant,
            });
        }
        Ok(Self {
            channel,
            candidates,
        })
    }

    /// The assistant for an identity speaking `language` (a two-letter code).
    ///
    /// # Errors
    /// [`TurnError::NoAssistant`] when the channel has no worker or the worker no assistant.
    pub(crate) fn choose(&self, language: Option<&str>) -> Result<Routed, TurnError> {
        let speaks = |a: &assistant::Model| {
            language.is_some_and(|lang| {
                a.languages
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                    .any(|tag| tag.get(..2) == Some(lang))
            })
        };
        let chosen = self
            .candidates
            .iter()
            .find(|c| speaks(&c.assistant))
            .or_else(|| self.candidates.first())
            .ok_or(TurnError::NoAssistant)?;
        Ok(Routed {
            channel: self.channel.clone(),
            assistant: chosen.assistant.clone(),
            settings: chosen.settings.clone(),
            instructions: chosen.instructions.clone(),
            mcp_servers: chosen.mcp_servers.clone(),
        })
    }
}
