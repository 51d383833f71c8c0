//! Channels: their actor holds the row and its token, and conversation actors share each
//! channel's route, so every change restarts the actor and refreshes the route; a deleted
//! channel's actor stops.

use parley_persistence::channels::{self, ChannelChanges};
use parley_persistence::entities::channel;
use parley_persistence::{PersistenceError, clock, flows};
use uuid::Uuid;

use super::Store;
use crate::changes::Change;

/// How a channel's deletion went.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Deleted {
    /// Deleted; its conversations and messages stay readable.
    Yes,
    /// The workspace has no such channel.
    NotFound,
    /// A flow on it is queued, running or paused.
    Busy,
}

impl Store {
    /// Changes a channel (credentials, activity, settings, its synced worker).
    ///
    /// # Errors
    /// [`PersistenceError::Conflict`] for a phone number id another channel holds; a database
    /// error.
    pub async fn update_channel(
        &self,
        current: channel::Model,
        changes: ChannelChanges,
    ) -> Result<channel::Model, PersistenceError> {
        let workspace_id = current.workspace_id;
        let updated = channels::update(&self.db, current, changes, clock::now()).await?;
        self.announce(Change::Channel {
            workspace_id,
            channel_id: updated.id,
        });
        Ok(updated)
    }

    /// Deletes a channel unless a live flow uses it.
    ///
    /// # Errors
    /// A database error.
    pub async fn delete_channel(
        &self,
        workspace_id: i64,
        id: Uuid,
    ) -> Result<Deleted, PersistenceError> {
        let txn = parley_persistence::begin_write(&self.db).await?;
        if channels::find(&txn, workspace_id, id).await?.is_some()
            && flows::channel_busy(&txn, id).await?
        {
            return Ok(Deleted::Busy);
        }
        if !channels::delete(&txn, workspace_id, id, clock::now()).await? {
            return Ok(Deleted::NotFound);
        }
        txn.commit().await?;
        self.announce(Change::ChannelDeleted {
            workspace_id,
            channel_id: id,
        });
        Ok(Deleted::Yes)
    }
}
