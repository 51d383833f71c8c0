//! Identities: their conversation actor caches the identity, its stage and its memory, and the
//! front door remembers which identity each path names, so every write here tells them. The
//! one way to move an identity to a stage (`POST /identity/{id}/stage` and `set_stage` tasks),
//! to remember or forget a memory entry through the API, and to commit the identity writes
//! the front door runs in a transaction of its own (`PUT`, delete, merge).

use parley_persistence::entities::{identity, identity_stage, memory_entry, stage};
use parley_persistence::{
    DatabaseTransaction, PersistenceError, clock, identities, memory, stages,
};
use serde_json::Value;
use uuid::Uuid;

use super::{Store, StoreError};
use crate::changes::Change;

/// A stage named by its id or by its name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StageRef {
    /// The stage's id.
    Id(Uuid),
    /// The stage's name in the workspace.
    Name(String),
}

impl StageRef {
    /// A stage id when `raw` is a UUID, else a name.
    pub fn parse(raw: &str) -> Self {
        let raw = raw.trim();
        Uuid::parse_str(raw).map_or_else(|_| Self::Name(raw.to_owned()), Self::Id)
    }
}

/// An identity moved to a stage.
#[derive(Clone, Debug)]
pub struct StageSet {
    /// The identity as it is now.
    pub identity: identity::Model,
    /// The stage it is in.
    pub stage: stage::Model,
    /// The history entry of the move.
    pub entry: identity_stage::Model,
}

impl Store {
    /// Moves the identity to `stage` with `metadata` on the history entry.
    ///
    /// # Errors
    /// [`StoreError::NotFound`] naming `"Identity"` or `"Stage"` when either is not in the
    /// workspace; a database error.
    pub async fn set_stage(
        &self,
        workspace_id: i64,
        identity_id: Uuid,
        stage: &StageRef,
        metadata: Value,
    ) -> Result<StageSet, StoreError> {
        let txn = parley_persistence::begin_write(&self.db).await?;
        let found = identities::find(&txn, workspace_id, identity_id)
            .await?
            .ok_or(StoreError::NotFound("Identity"))?;
        let stage = match stage {
            StageRef::Id(id) => stages::find(&txn, workspace_id, *id).await?,
            StageRef::Name(name) => stages::find_by_name(&txn, workspace_id, name).await?,
        }
        .ok_or(StoreError::NotFound("Stage"))?;
        let (identity, entry) =
            identities::set_stage(&txn, found, &stage, metadata, clock::now()).await?;
        txn.commit().await.map_err(PersistenceError::from)?;
        self.announce(Change::Identity {
            workspace_id,
            identity_id,
        });
        tracing::info!(%identity_id, stage = %stage.name, "identity stage set");
        Ok(StageSet {
            identity,
            stage,
            entry,
        })
    }
}

impl Store {
    /// Commits `txn`, which wrote the identities `identity_ids` of the workspace (a `PUT`, a
    /// delete, a merge), and announces each.
    ///
    /// # Errors
    /// A database error; nothing is announced then.
    pub async fn commit_identities(
        &self,
        txn: DatabaseTransaction,
        workspace_id: i64,
        identity_ids: &[Uuid],
    ) -> Result<(), PersistenceError> {
        txn.commit().await?;
        for identity_id in identity_ids {
            self.announce(Change::Identity {
                workspace_id,
                identity_id: *identity_id,
            });
        }
        Ok(())
    }

    /// Writes one memory entry of an identity; answers it and whether it is new.
    ///
    /// # Errors
    /// A database error.
    pub async fn remember(
        &self,
        workspace_id: i64,
        identity_id: Uuid,
        key: &str,
        value: Value,
        metadata: Value,
    ) -> Result<(memory_entry::Model, bool), PersistenceError> {
        let written = memory::upsert(
            &self.db,
            workspace_id,
            identity_id,
            key,
            value,
            metadata,
            clock::now(),
        )
        .await?;
        self.announce(Change::Identity {
            workspace_id,
            identity_id,
        });
        Ok(written)
    }

    /// Forgets one memory entry of an identity; `false` when it had none under `key`.
    ///
    /// # Errors
    /// A database error.
    pub async fn forget(
        &self,
        workspace_id: i64,
        identity_id: Uuid,
        key: &str,
    ) -> Result<bool, PersistenceError> {
        let forgotten = memory::delete(&self.db, identity_id, key).await?;
        if forgotten {
            self.announce(Change::Identity {
                workspace_id,
                identity_id,
            });
        }
        Ok(forgotten)
    }
}
