//! Resuming after a stop or a takeover: outbound messages caught mid-send are failed
//! (`interrupted`, never sent twice), those stored and not yet sent are sent.

use parley_persistence::{MessageStatus, PersistenceError, deliveries};
use uuid::Uuid;

use super::ActorRuntime;
use crate::events::MessageTold;

impl ActorRuntime {
    /// After a restart: outbound messages caught mid-send are failed (`interrupted`, never
    /// sent twice), and outbound messages stored but not yet sent are sent, as what they are
    /// (a template stays a template). Unanswered webhook events are picked up by the inbound
    /// worker, however many there are.
    ///
    /// # Errors
    /// Fails on a database error.
    pub async fn resume(&self) -> Result<(), PersistenceError> {
        if !self.placement.is_clustered() {
            return self.resume_channels(None).await;
        }
        // A cluster node resumes the channels it owns; those it takes over later are
        // resumed by the membership loop.
        let ids = parley_persistence::channels::all_ids(&self.db).await?;
        self.resume_channels(Some(self.placement.keep_owned(ids, |id| *id)))
            .await
    }

    /// Resumes the outbound side of `channels` (all, for `None`): messages caught mid-send
    /// are failed `interrupted`, those pending are sent.
    ///
    /// # Errors
    /// Fails on a database error.
    pub async fn resume_channels(
        &self,
        channels: Option<Vec<Uuid>>,
    ) -> Result<(), PersistenceError> {
        let interrupted = self.fail_interrupted(channels.as_deref()).await?;
        if interrupted > 0 {
            tracing::warn!(
                interrupted,
                "outbound messages caught mid-send at the last stop were marked failed"
            );
        }
        self.handles.outbox.resume_pending(channels);
        Ok(())
    }

    /// Fails the messages a stop caught mid-send (on `channels`, or all), each with its
    /// `message.failed` event, in one transaction; answers how many.
    async fn fail_interrupted(&self, channels: Option<&[Uuid]>) -> Result<usize, PersistenceError> {
        let events = &self.handles.events;
        let now = parley_persistence::clock::now();
        let txn = parley_persistence::begin_write(&self.db).await?;
        let caught = deliveries::fail_interrupted(&txn, channels).await?;
        let mut told = false;
        for message in &caught {
            let identity_id = crate::whatsapp::Outgoing::from_stored(message.outbound.as_ref())
                .and_then(|outgoing| outgoing.identity_id);
            let error = deliveries::interrupted_error();
            let about = MessageTold {
                workspace_id: message.workspace_id,
                message_id: message.id,
                channel_id: message.channel_id,
                identity_id,
                platform_message_id: message.platform_message_id.as_deref(),
                error: Some(&error),
                operator: None,
            };
            let event = events.message(MessageStatus::Failed, about);
            if let Some(event) = event {
                event.write(&txn, now).await?;
                told = true;
            }
        }
        txn.commit().await?;
        if told {
            events.wake();
        }
        Ok(caught.len())
    }
}
