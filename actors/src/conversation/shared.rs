//! What every conversation actor of a server reads alike: each channel's route to its
//! assistants and each workspace's stages. Read once on first use and shared by `Arc`, instead
//! of once per actor and a copy in each: a webhook burst from a thousand new people spawns a
//! thousand actors that would otherwise each read the same channel, assistants, MCP servers
//! and stages.
//!
//! The registry forgets an entry when a [`Change`] concerns it, before it tells the actors, so
//! the next turn reads it again. A read already under way when the change arrives finishes
//! for the turns waiting on it, as a turn that started before the change would; it is not
//! kept, because forgetting drops the slot it fills.
//!
//! Changes made through another server sharing the database are not announced here, so a
//! value is also read again once it is [`MAX_AGE`] old: this server sees them within that time
//! (before, a conversation actor kept its own copy for as long as it lived). A value in use is
//! read again ahead of that, in the background, once it is half that old, so a steady stream of
//! turns never waits for the read.

use std::sync::Arc;
use std::time::Duration;

use parley_persistence::entities::stage;
use parley_persistence::{DatabaseConnection, Page, stages};
use uuid::Uuid;

use super::TurnError;
use super::route::Route;
use crate::changes::Change;
use crate::remembered::Remembered;

/// How long a shared value is used before it is read again.
const MAX_AGE: Duration = Duration::from_secs(60);

/// The shared routes and stages of one server's conversation actors.
#[derive(Debug)]
pub(crate) struct Shared {
    /// Each channel's route, by workspace and channel.
    routes: Remembered<(i64, Uuid), Arc<Route>>,
    /// Each workspace's stages.
    stages: Remembered<i64, Arc<Vec<stage::Model>>>,
}

impl Default for Shared {
    fn default() -> Self {
        Self {
            routes: Remembered::new(MAX_AGE),
            stages: Remembered::new(MAX_AGE),
        }
    }
}

impl Shared {
    /// The route of `channel_id` in the workspace, read on first use.
    ///
    /// # Errors
    /// As [`Route::load`]; a failed read is not kept.
    pub(crate) async fn route(
        &self,
        db: &DatabaseConnection,
        workspace_id: i64,
        channel_id: Uuid,
    ) -> Result<Arc<Route>, TurnError> {
        let read = || {
            let db = db.clone();
            async move {
                let route = Route::load(&db, workspace_id, channel_id).await?;
                Ok::<_, TurnError>(Some(Arc::new(route)))
            }
        };
        found(self.routes.recall(&(workspace_id, channel_id), read).await)
    }

    /// The workspace's stages (their names render in instructions and the tool text).
    ///
    /// # Errors
    /// A storage error; a failed read is not kept.
    pub(crate) async fn stages(
        &self,
        db: &DatabaseConnection,
        workspace_id: i64,
    ) -> Result<Arc<Vec<stage::Model>>, TurnError> {
        let read = || {
            let db = db.clone();
            async move {
                // Stages are a short list by nature; a thousand is far beyond any journey.
                let page = Page {
                    page: 1,
                    limit: 1_000,
                };
                let stages = stages::list(&db, workspace_id, page).await?.items;
                Ok::<_, TurnError>(Some(Arc::new(stages)))
            }
        };
        found(self.stages.recall(&workspace_id, read).await)
    }

    /// Forgets what `change` made stale.
    pub(crate) fn forget(&self, change: &Change) {
        match change {
            Change::Stages { workspace_id } => self.stages.forget(|ws, _| ws == workspace_id),
            Change::Channel {
                workspace_id,
                channel_id,
            }
            | Change::ChannelDeleted {
                workspace_id,
                channel_id,
            } => self
                .routes
                .forget(|key, _| *key == (*workspace_id, *channel_id)),
            Change::Assistants { workspace_id } => {
                self.routes.forget(|(ws, _), _| ws == workspace_id);
            }
            Change::Identity { .. }
            | Change::Messages { .. }
            | Change::KeyRevoked { .. }
            | Change::EventRoutes { .. }
            | Change::Inbox { .. } => {}
        }
    }
}

/// What a read that always finds something found.
fn found<V>(recalled: Result<Option<V>, TurnError>) -> Result<V, TurnError> {
    recalled?.ok_or_else(|| TurnError::Storage("a shared value read as nothing".to_owned()))
}
