//! A workspace's stages: every conversation actor of the workspace shares their names (its
//! instructions and the `set_stage` tool read them), so each write tells them.

use parley_persistence::entities::stage;
use parley_persistence::stages::{self, StageChanges};
use parley_persistence::{PersistenceError, clock};
use serde_json::Value;
use uuid::Uuid;

use super::Store;
use crate::changes::Change;

impl Store {
    /// Creates a stage.
    ///
    /// # Errors
    /// [`PersistenceError::Conflict`] for a name the workspace has; a database error.
    pub async fn create_stage(
        &self,
        workspace_id: i64,
        name: &str,
        description: Option<String>,
        metadata: Value,
    ) -> Result<stage::Model, PersistenceError> {
        let created = stages::create(
            &self.db,
            workspace_id,
            name,
            description,
            metadata,
            clock::now(),
        )
        .await?;
        self.announce(Change::Stages { workspace_id });
        Ok(created)
    }

    /// Changes a stage.
    ///
    /// # Errors
    /// [`PersistenceError::Conflict`] for a name the workspace has; a database error.
    pub async fn update_stage(
        &self,
        current: stage::Model,
        changes: StageChanges,
    ) -> Result<stage::Model, PersistenceError> {
        let workspace_id = current.workspace_id;
        let updated = stages::update(&self.db, current, changes, clock::now()).await?;
        self.announce(Change::Stages { workspace_id });
        Ok(updated)
    }

    /// Deletes a stage; `false` when the workspace has no such stage.
    ///
    /// # Errors
    /// A database error.
    pub async fn delete_stage(
        &self,
        workspace_id: i64,
        id: Uuid,
    ) -> Result<bool, PersistenceError> {
        let txn = parley_persistence::begin_write(&self.db).await?;
        if !stages::delete(&txn, workspace_id, id).await? {
            return Ok(false);
        }
        txn.commit().await?;
        self.announce(Change::Stages { workspace_id });
        Ok(true)
    }
}
