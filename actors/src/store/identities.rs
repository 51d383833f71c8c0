//! An identity's journey: the one way to move it to a stage (`POST /identity/{id}/stage` and
//! `set_stage` tasks), which its conversation actor hears of before its next turn.

use parley_persistence::entities::{identity, identity_stage, stage};
use parley_persistence::{PersistenceError, clock, identities, stages};
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
