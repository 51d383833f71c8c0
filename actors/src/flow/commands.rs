//! What a person does to a flow, from the API or the console alike: queue a draft, pause,
//! resume, cancel. The move is checked against DESIGN's table of flow moves and made in the
//! database (with `flow.finished` when it ends the flow), then the flow's actor is told,
//! wherever it runs.

use parley_persistence::entities::flow;
use parley_persistence::{FlowStatus, PersistenceError, flows};

use super::{Ending, Flows, move_to};

/// Why a flow did not move.
#[derive(Debug, thiserror::Error)]
pub enum FlowMoveError {
    /// DESIGN's table has no such move (a move to the state the flow is in included).
    #[error("A flow cannot move from {} to {}", .from.as_str(), .to.as_str())]
    InvalidTransition {
        /// The state the flow is in now.
        from: FlowStatus,
        /// The state asked for.
        to: FlowStatus,
    },
    /// The flow was deleted meanwhile.
    #[error("the flow no longer exists")]
    Gone,
    /// The database failed.
    #[error(transparent)]
    Storage(#[from] PersistenceError),
}

impl Flows {
    /// Moves `found` (read in its caller's workspace) to `to` if its state allows it, tells its
    /// actor, and answers the flow as it is now. A flow its actor moved meanwhile (a queued one
    /// that started) is read again and moved from where it is now, if that allows it too.
    ///
    /// # Errors
    /// [`FlowMoveError`].
    pub async fn set_status(
        &self,
        found: &flow::Model,
        to: FlowStatus,
    ) -> Result<flow::Model, FlowMoveError> {
        let from = found.status;
        if !self.move_from_where_it_is(found, to).await? {
            let now = flows::find_in_any_workspace(self.db(), found.id)
                .await?
                .map_or(from, |f| f.status);
            return Err(FlowMoveError::InvalidTransition { from: now, to });
        }
        tracing::info!(flow_id = %found.id, from = from.as_str(), to = to.as_str(), "flow status set");
        self.changed(found.id);
        flows::find_in_any_workspace(self.db(), found.id)
            .await?
            .ok_or(FlowMoveError::Gone)
    }

    /// Resumes the flows of `workspace_id` that its quota paused (the operator raised it); one
    /// still over it pauses again at its next send. Answers how many were resumed.
    ///
    /// # Errors
    /// The database's.
    pub async fn resume_over_quota(&self, workspace_id: i64) -> Result<usize, PersistenceError> {
        let paused = flows::paused_for(self.db(), workspace_id, super::QUOTA_REASON).await?;
        let mut resumed = 0;
        for flow in &paused {
            match self.set_status(flow, FlowStatus::Running).await {
                Ok(_) => resumed += 1,
                Err(FlowMoveError::Storage(error)) => return Err(error),
                Err(_) => {}
            }
        }
        Ok(resumed)
    }

    async fn move_from_where_it_is(
        &self,
        found: &flow::Model,
        to: FlowStatus,
    ) -> Result<bool, PersistenceError> {
        let mut from = found.status;
        for _ in 0..3 {
            if !from.may_move_to(to) {
                return Ok(false);
            }
            let ending = Ending::From(&[from]);
            if move_to(self.db(), self.events(), found, to, None, ending).await? {
                return Ok(true);
            }
            match flows::find_in_any_workspace(self.db(), found.id).await? {
                Some(now) if now.status != from => from = now.status,
                _ => return Ok(false),
            }
        }
        Ok(false)
    }
}
