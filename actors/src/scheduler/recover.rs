//! Runs a stop caught mid-way, settled at start-up by what became of them. A send task's run
//! stores its message under the run's own id before handing it to the channel, so the message
//! table tells whether the run handed it over:
//!
//! - no message: nothing reached the outbox, let alone Meta; the task runs again now (late);
//! - a message still `pending`: the outbox sends it at start-up, as every pending message;
//! - a message `sending`: it may have reached Meta; failed `interrupted`, never sent twice;
//! - a message sent (or refused) already: the run ends as its message did.
//!
//! Any other task type's run is failed `interrupted`, as before: its effects (a flow, a stage,
//! a follow-up) are not sends the table can tell apart.
//!
//! On a cluster a run without a message is failed `interrupted` too: its node may be frozen,
//! not dead, and store and send its message when it wakes (under its own run's id, which a
//! second run would not share), so running it again could send twice.

use chrono::{DateTime, Utc};
use parley_persistence::entities::{scheduled_task, scheduled_task_run};
use parley_persistence::scheduled_tasks::{self, RunEnd};
use parley_persistence::{
    ConnectionTrait, DatabaseConnection, FailureReason, MessageStatus, PersistenceError, RunStatus,
    TaskType, conversations,
};
use serde_json::json;

use super::next_run;
use crate::events::Events;

/// How the runs left `running` were settled.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Recovered {
    /// Runs failed `interrupted`.
    pub(super) interrupted: u64,
    /// Send runs that never handed their message over, run again.
    pub(super) rerun: u64,
}

/// Settles every run left `running` by the last stop (of the tasks `mine` takes: a cluster
/// node settles those of the partitions it took over).
///
/// # Errors
/// Fails on a database error.
pub(super) async fn recover(
    db: &DatabaseConnection,
    events: &Events,
    now: DateTime<Utc>,
    mine: impl Fn(uuid::Uuid) -> bool,
    rerun_unsent: bool,
) -> Result<Recovered, PersistenceError> {
    let mut recovered = Recovered::default();
    let runs = scheduled_tasks::running_runs(db).await?;
    for run in runs.into_iter().filter(|run| mine(run.task_id)) {
        let task = scheduled_tasks::find_in_any_workspace(db, run.task_id).await?;
        let end = settle(db, task.as_ref(), &run, now, rerun_unsent).await?;
        match (&end.status, end.error.as_deref()) {
            (RunStatus::Failed, Some(RUN_AGAIN)) => recovered.rerun += 1,
            (RunStatus::Failed, _) => recovered.interrupted += 1,
            _ => {}
        }
        super::finish_run(db, events, task.as_ref(), &run, end, now).await?;
    }
    Ok(recovered)
}

/// What a run that never handed its message over is recorded as (its task runs again).
const RUN_AGAIN: &str = "interrupted before its message was handed to the channel; run again";

async fn settle(
    db: &impl ConnectionTrait,
    task: Option<&scheduled_task::Model>,
    run: &scheduled_task_run::Model,
    now: DateTime<Utc>,
    rerun_unsent: bool,
) -> Result<RunEnd, PersistenceError> {
    let next_run_at = task.and_then(|t| next_run(t, now));
    let interrupted = RunEnd {
        status: RunStatus::Failed,
        error: Some(FailureReason::Interrupted.as_str().to_owned()),
        result: None,
        next_run_at,
    };
    let sends =
        task.is_some_and(|t| matches!(t.task_type, TaskType::SendMessage | TaskType::SendTemplate));
    if !sends {
        return Ok(interrupted);
    }
    let Some(message) = conversations::find_message(db, run.id).await? else {
        if !rerun_unsent {
            return Ok(interrupted);
        }
        // Due again at once: the sweep at start-up runs it, marked late.
        return Ok(RunEnd {
            error: Some(RUN_AGAIN.to_owned()),
            next_run_at: Some(run.started_at.min(now)),
            ..interrupted
        });
    };
    let result = Some(json!({"message_id": message.id, "status": message.status,
                             "platform_message_id": message.platform_message_id}));
    Ok(match message.status {
        MessageStatus::Pending
        | MessageStatus::Sent
        | MessageStatus::Delivered
        | MessageStatus::Read => RunEnd {
            status: RunStatus::Succeeded,
            error: None,
            result,
            next_run_at,
        },
        MessageStatus::Failed => RunEnd {
            error: message.error.map(|e| e.to_string()),
            result,
            ..interrupted
        },
        MessageStatus::Sending | MessageStatus::Received => interrupted,
    })
}
