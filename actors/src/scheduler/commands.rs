//! What a person does to a scheduled task, from the API or the console alike: pause a
//! scheduled one, resume a paused one. The move is made in the database, then the scheduler is
//! told, wherever the task runs.

use parley_persistence::entities::scheduled_task;
use parley_persistence::{PersistenceError, TaskStatus, clock, scheduled_tasks};

use super::Scheduler;

/// A scheduled task's pause or resume: the status it needs and the one it sets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TaskMove {
    /// `scheduled` → `paused`.
    Pause,
    /// `paused` → `scheduled`.
    Resume,
}

impl TaskMove {
    fn statuses(self) -> (TaskStatus, TaskStatus) {
        match self {
            Self::Pause => (TaskStatus::Scheduled, TaskStatus::Paused),
            Self::Resume => (TaskStatus::Paused, TaskStatus::Scheduled),
        }
    }
}

/// Why a task did not move.
#[derive(Debug, thiserror::Error)]
pub enum TaskMoveError {
    /// The task is not in the status the move needs.
    #[error("{}; this one is {}", refusal(*.how), .status.as_str())]
    Refused {
        /// The move asked for.
        how: TaskMove,
        /// The status the task is in.
        status: TaskStatus,
    },
    /// The task was deleted meanwhile.
    #[error("the task no longer exists")]
    Gone,
    /// The database failed.
    #[error(transparent)]
    Storage(#[from] PersistenceError),
}

fn refusal(how: TaskMove) -> &'static str {
    match how {
        TaskMove::Pause => "Only a scheduled task can be paused",
        TaskMove::Resume => "Only a paused task can be resumed",
    }
}

impl Scheduler {
    /// Pauses or resumes `found` (read in its caller's workspace) and tells the scheduler;
    /// answers the task as it is now.
    ///
    /// # Errors
    /// [`TaskMoveError`].
    pub async fn move_task(
        &self,
        db: &parley_persistence::DatabaseConnection,
        found: &scheduled_task::Model,
        how: TaskMove,
    ) -> Result<scheduled_task::Model, TaskMoveError> {
        let (from, to) = how.statuses();
        if !scheduled_tasks::set_status(db, found.id, &[from], to, clock::now()).await? {
            return Err(TaskMoveError::Refused {
                how,
                status: found.status,
            });
        }
        self.changed(found.id);
        scheduled_tasks::find(db, found.workspace_id, found.id)
            .await?
            .ok_or(TaskMoveError::Gone)
    }
}
