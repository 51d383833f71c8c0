//! Who answers a channel: workers, their assistants and the MCP servers attached to them.
//! Conversation actors share each channel's route to its assistant and tools, so every write
//! here tells them (and forgets a server's cached tool list when the server changes).

use parley_persistence::assistants::{self, AssistantFields};
use parley_persistence::entities::{assistant, mcp_server};
use parley_persistence::mcp_servers::{self, McpServerFields};
use parley_persistence::{PersistenceError, clock, workers};
use uuid::Uuid;

use super::Store;
use crate::changes::Change;

impl Store {
    /// Creates an assistant of a worker.
    ///
    /// # Errors
    /// A database error.
    pub async fn create_assistant(
        &self,
        workspace_id: i64,
        worker_id: Uuid,
        fields: AssistantFields,
    ) -> Result<assistant::Model, PersistenceError> {
        let created =
            assistants::create(&self.db, workspace_id, worker_id, fields, clock::now()).await?;
        self.announce(Change::Assistants { workspace_id });
        Ok(created)
    }

    /// Changes an assistant.
    ///
    /// # Errors
    /// A database error.
    pub async fn update_assistant(
        &self,
        current: assistant::Model,
        fields: AssistantFields,
    ) -> Result<assistant::Model, PersistenceError> {
        let workspace_id = current.workspace_id;
        let updated = assistants::update(&self.db, current, fields, clock::now()).await?;
        self.announce(Change::Assistants { workspace_id });
        Ok(updated)
    }

    /// Deletes an assistant; `false` when the workspace has no such assistant.
    ///
    /// # Errors
    /// A database error.
    pub async fn delete_assistant(
        &self,
        workspace_id: i64,
        id: Uuid,
    ) -> Result<bool, PersistenceError> {
        let deleted = assistants::delete(&self.db, workspace_id, id).await?;
        if deleted {
            self.announce(Change::Assistants { workspace_id });
        }
        Ok(deleted)
    }

    /// Deletes a worker with its assistants; `false` when the workspace has no such worker.
    ///
    /// # Errors
    /// A database error.
    pub async fn delete_worker(
        &self,
        workspace_id: i64,
        id: Uuid,
    ) -> Result<bool, PersistenceError> {
        let txn = parley_persistence::begin_write(&self.db).await?;
        if !workers::delete(&txn, workspace_id, id).await? {
            return Ok(false);
        }
        txn.commit().await?;
        self.announce(Change::Assistants { workspace_id });
        Ok(true)
    }

    /// Changes an MCP server; its cached tool list is forgotten.
    ///
    /// # Errors
    /// A database error.
    pub async fn update_mcp_server(
        &self,
        current: mcp_server::Model,
        fields: McpServerFields,
    ) -> Result<mcp_server::Model, PersistenceError> {
        let workspace_id = current.workspace_id;
        let updated = mcp_servers::update(&self.db, current, fields, clock::now()).await?;
        self.mcp.forget(updated.id);
        self.announce(Change::Assistants { workspace_id });
        Ok(updated)
    }

    /// Deletes an MCP server, detaching it everywhere; `false` when the workspace has none.
    ///
    /// # Errors
    /// A database error.
    pub async fn delete_mcp_server(
        &self,
        workspace_id: i64,
        id: Uuid,
    ) -> Result<bool, PersistenceError> {
        let txn = parley_persistence::begin_write(&self.db).await?;
        if !mcp_servers::delete(&txn, workspace_id, id).await? {
            return Ok(false);
        }
        txn.commit().await?;
        self.mcp.forget(id);
        self.announce(Change::Assistants { workspace_id });
        Ok(true)
    }

    /// Attaches an MCP server to an assistant (idempotent).
    ///
    /// # Errors
    /// A database error.
    pub async fn attach_mcp_server(
        &self,
        workspace_id: i64,
        assistant_id: Uuid,
        server_id: Uuid,
    ) -> Result<(), PersistenceError> {
        mcp_servers::attach(
            &self.db,
            workspace_id,
            assistant_id,
            server_id,
            clock::now(),
        )
        .await?;
        self.announce(Change::Assistants { workspace_id });
        Ok(())
    }

    /// Detaches an MCP server from an assistant.
    ///
    /// # Errors
    /// A database error.
    pub async fn detach_mcp_server(
        &self,
        workspace_id: i64,
        assistant_id: Uuid,
        server_id: Uuid,
    ) -> Result<(), PersistenceError> {
        mcp_servers::detach(&self.db, assistant_id, server_id).await?;
        self.announce(Change::Assistants { workspace_id });
        Ok(())
    }
}
