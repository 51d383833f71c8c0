//! What a conversation actor keeps about its identity between turns: the identity, its stage's
//! name and its memory. Loaded on the first turn, written through by the memory tools, dropped
//! when the API changes them.

use std::collections::BTreeMap;

use parley_persistence::entities::{identity, memory_entry};
use parley_persistence::{ConnectionTrait, Result, identities, memory};
use serde_json::{Value, json};

use crate::templating::nest_memory;

/// The cached view of one identity.
#[derive(Clone, Debug)]
pub(crate) struct Context {
    /// The identity row.
    pub(crate) identity: identity::Model,
    /// Name of its current stage.
    pub(crate) stage: Option<String>,
    /// Its memory, by key.
    pub(crate) memory: BTreeMap<String, memory_entry::Model>,
}

impl Context {
    /// Loads the identity's context; `None` when the identity no longer exists.
    pub(crate) async fn load(
        db: &impl ConnectionTrait,
        workspace_id: i64,
        identity_id: uuid::Uuid,
    ) -> Result<Option<Self>> {
        let Some(identity) = identities::find(db, workspace_id, identity_id).await? else {
            return Ok(None);
        };
        let stage = match identity.stage_id {
            Some(id) => identities::stages_by_id(db, &[id])
                .await?
                .into_iter()
                .next()
                .map(|s| s.name),
            None => None,
        };
        let memory = memory::list(db, identity_id)
            .await?
            .into_iter()
            .map(|entry| (entry.key.clone(), entry))
            .collect();
        Ok(Some(Self {
            identity,
            stage,
            memory,
        }))
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

    /// The object instructions are rendered with.
    pub(crate) fn template_context(&self) -> Value {
        json!({
            "identity": {
                "id": self.identity.id,
                "name": self.identity.name,
                "external_id": self.identity.external_id,
                "metadata": self.identity.metadata,
                "stage": self.stage,
            },
            "memory": nest_memory(self.memory.iter().map(|(k, e)| (k.as_str(), &e.value))),
        })
    }
}
