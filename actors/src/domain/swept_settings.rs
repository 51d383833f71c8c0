//! The settings of the assistants a sweep meets, each read once per sweep (a sweep over
//! hundreds of conversations of a few assistants reads a few rows).

use parley_persistence::entities::conversation;
use parley_persistence::{DatabaseConnection, PersistenceError, assistants};
use uuid::Uuid;

use super::AssistantSettings;

/// What one sweep has read so far.
#[derive(Debug, Default)]
pub(crate) struct SweptSettings(Vec<(Option<Uuid>, AssistantSettings)>);

impl SweptSettings {
    /// The settings of `conversation`'s assistant (the defaults without one, or for one
    /// deleted meanwhile).
    ///
    /// # Errors
    /// The database's.
    pub(crate) async fn of(
        &mut self,
        db: &DatabaseConnection,
        conversation: &conversation::Model,
    ) -> Result<AssistantSettings, PersistenceError> {
        if let Some((_, settings)) = self.0.iter().find(|(a, _)| *a == conversation.assistant_id) {
            return Ok(settings.clone());
        }
        let settings = match conversation.assistant_id {
            Some(id) => assistants::find(db, conversation.workspace_id, id)
                .await?
                .map(|a| AssistantSettings::from_stored(&a.settings))
                .unwrap_or_default(),
            None => AssistantSettings::default(),
        };
        self.0.push((conversation.assistant_id, settings.clone()));
        Ok(settings)
    }
}
