//! Scheduled tasks: durable timed work. The `root/scheduler` supervisor sweeps the tasks table
//! and keeps a ScheduledTaskActor (`root/scheduler/task:<id>`) only for tasks due within its
//! sweep window, so a million future tasks cost rows, not actors.
//!
//! - [`payload`]: each task type's parameters, parsed once.
//! - [`recurrence`]: cron (croner) in an IANA timezone.
//! - `run`: what each task type does, through the same paths as the API (the Outbox, flow
//!   creation, the store's set-stage, a follow-up turn).
//! - `registry`: the scheduler and the [`Scheduler`] handle; `task`: one task's actor.

mod handle;
pub mod payload;
mod recover;
pub mod recurrence;
pub(crate) mod registry;
mod run;
mod task;

pub use self::handle::Scheduler;
pub(crate) use self::handle::SchedulerMsg;
pub use self::payload::TaskPayload;
pub use self::recurrence::{Recurrence, RecurrenceError};
pub use self::run::TaskDeps;

use chrono::{DateTime, Utc};
use parley_persistence::entities::scheduled_task;

/// The run after one that started at `after`, for a recurring task.
pub fn next_run(task: &scheduled_task::Model, after: DateTime<Utc>) -> Option<DateTime<Utc>> {
    let expression = task.recurrence.as_deref()?;
    Recurrence::parse(expression, &task.timezone)
        .ok()?
        .next_after(after)
}
