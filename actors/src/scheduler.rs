//! Scheduled tasks: durable timed work. The `root/scheduler` supervisor sweeps the tasks table
//! and keeps a ScheduledTaskActor (`root/scheduler/task:<id>`) only for tasks due within its
//! sweep window, so a million future tasks cost rows, not actors.
//!
//! - [`payload`]: each task type's parameters, parsed once.
//! - [`recurrence`]: cron (croner) in an IANA timezone.
//! - `run`: what each task type does, through the same paths as the API (the Outbox, flow
//!   creation, the store's set-stage, a follow-up turn).
//! - `registry`: the scheduler and the [`Scheduler`] handle; `task`: one task's actor.

mod commands;
mod handle;
pub mod payload;
mod recover;
pub mod recurrence;
pub(crate) mod registry;
mod run;
mod task;

pub use self::commands::{TaskMove, TaskMoveError};
pub use self::handle::Scheduler;
pub(crate) use self::handle::SchedulerMsg;
pub use self::payload::TaskPayload;
pub use self::recurrence::{Recurrence, RecurrenceError};
pub use self::run::TaskDeps;

use chrono::{DateTime, Utc};
use parley_persistence::entities::{scheduled_task, scheduled_task_run};
use parley_persistence::scheduled_tasks::{self, RunEnd};
use parley_persistence::{DatabaseConnection, EventType, PersistenceError};
use serde_json::json;

use crate::events::Events;

/// The run after one that started at `after`, for a recurring task.
pub fn next_run(task: &scheduled_task::Model, after: DateTime<Utc>) -> Option<DateTime<Utc>> {
    let expression = task.recurrence.as_deref()?;
    Recurrence::parse(expression, &task.timezone)
        .ok()?
        .next_after(after)
}

/// Records how `run` of `task` ended, with its `task.run.finished` event in the same
/// transaction (none for a task deleted meanwhile).
///
/// # Errors
/// The database's.
pub(crate) async fn finish_run(
    db: &DatabaseConnection,
    events: &Events,
    task: Option<&scheduled_task::Model>,
    run: &scheduled_task_run::Model,
    end: RunEnd,
    now: DateTime<Utc>,
) -> Result<(), PersistenceError> {
    let event = task.and_then(|task| {
        events.event(task.workspace_id, EventType::TaskRunFinished, || {
            json!({
                "task_id": task.id,
                "run_id": run.id,
                "task_type": task.task_type,
                "status": end.status,
                "late": run.late,
                "error": end.error,
            })
        })
    });
    let txn = parley_persistence::begin_write(db).await?;
    scheduled_tasks::finish_run(&txn, run, end, now).await?;
    if let Some(event) = &event {
        event.write(&txn, now).await?;
    }
    txn.commit().await?;
    if event.is_some() {
        events.wake();
    }
    Ok(())
}
