//! The writes of event webhook endpoints: each one changes the workspace's event routes, which
//! are read again here at once (the next fact is written for the endpoints as they are now)
//! and announced, so that every other node reads them again too.

use chrono::{DateTime, Utc};
use parley_persistence::PersistenceError;
use parley_persistence::entities::event_webhook;
use parley_persistence::event_webhooks::{self, EndpointUpdate, NewEndpoint};
use uuid::Uuid;

use super::Store;
use crate::changes::Change;

impl Store {
    /// Creates an endpoint of `workspace_id`.
    ///
    /// # Errors
    /// The database's.
    pub async fn create_endpoint(
        &self,
        workspace_id: i64,
        new: NewEndpoint,
        now: DateTime<Utc>,
    ) -> Result<event_webhook::Model, PersistenceError> {
        let created = event_webhooks::create(&self.db, workspace_id, new, now).await?;
        self.routes_changed(workspace_id).await?;
        Ok(created)
    }

    /// Updates `found` (its URL, events, description or whether it is enabled).
    ///
    /// # Errors
    /// The database's.
    pub async fn update_endpoint(
        &self,
        found: event_webhook::Model,
        update: EndpointUpdate,
        now: DateTime<Utc>,
    ) -> Result<event_webhook::Model, PersistenceError> {
        let workspace_id = found.workspace_id;
        let updated = event_webhooks::update(&self.db, found, update, now).await?;
        self.routes_changed(workspace_id).await?;
        Ok(updated)
    }

    /// Deletes endpoint `id` of `workspace_id` with its deliveries; `false` when there was
    /// none.
    ///
    /// # Errors
    /// The database's.
    pub async fn delete_endpoint(
        &self,
        workspace_id: i64,
        id: Uuid,
    ) -> Result<bool, PersistenceError> {
        let deleted = event_webhooks::delete(&self.db, workspace_id, id).await?;
        if deleted {
            self.routes_changed(workspace_id).await?;
        }
        Ok(deleted)
    }

    /// Gives `found` the new `sealed` secret, the current one signing beside it `until`.
    ///
    /// # Errors
    /// The database's.
    pub async fn rotate_endpoint_secret(
        &self,
        found: event_webhook::Model,
        sealed: String,
        until: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> Result<event_webhook::Model, PersistenceError> {
        let workspace_id = found.workspace_id;
        let rotated = event_webhooks::rotate(&self.db, found, sealed, until, now).await?;
        // The routes are as they were; read again, they tell the lanes running to take the
        // endpoint as it is now, secrets and all.
        self.routes_changed(workspace_id).await?;
        Ok(rotated)
    }

    async fn routes_changed(&self, workspace_id: i64) -> Result<(), PersistenceError> {
        self.events.reload(&self.db, Some(workspace_id)).await?;
        self.announce(Change::EventRoutes { workspace_id });
        Ok(())
    }
}
