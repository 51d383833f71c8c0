//! One scheduled task's actor (`root/scheduler/task:<id>`): sleeps until the task is due,
//! claims it and writes its run `running` in one transaction, runs it (detached, so a stop of
//! the actor never cuts a run in half), records how it went and the next occurrence, tells the
//! scheduler, and stops.

use chrono::{DateTime, Utc};
use parley_persistence::scheduled_tasks::{self, RunEnd};
use parley_persistence::{RunStatus, clock};
use ractor::{Actor, ActorProcessingErr, ActorRef};
use uuid::Uuid;

use super::handle::SchedulerMsg;
use super::next_run;
use super::run::{self, TaskDeps};
use crate::tree::ActorPath;

/// Behaviour of one task's actor: waits for the task's time, runs it once, stops.
pub(crate) struct TaskActor;

/// What a task actor starts from.
pub(crate) struct TaskArgs {
    pub(crate) task_id: Uuid,
    pub(crate) due_at: DateTime<Utc>,
    pub(crate) late: bool,
    pub(crate) deps: TaskDeps,
    pub(crate) scheduler: ActorRef<SchedulerMsg>,
}

/// State of a task actor: the timer and run it owns.
pub(crate) struct TaskState {
    path: ActorPath,
    work: tokio::task::JoinHandle<()>,
}

/// Messages of a task actor.
pub(crate) enum TaskMsg {
    /// The run ended (or there was nothing to run).
    Done,
}

impl Actor for TaskActor {
    type Msg = TaskMsg;
    type State = TaskState;
    type Arguments = TaskArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<Self::Msg>,
        args: TaskArgs,
    ) -> Result<Self::State, ActorProcessingErr> {
        let path = ActorPath::task(args.task_id);
        let work = tokio::spawn(async move {
            let wait = (args.due_at - Utc::now()).to_std().unwrap_or_default();
            tokio::time::sleep(wait).await;
            // The run itself is detached: stopping the actor (a pause, a shutdown) never cuts
            // a run in half; a process stop does, and the next start fails it `interrupted`.
            let run = tokio::spawn(run_once(
                args.deps.clone(),
                args.task_id,
                args.due_at,
                args.late,
            ));
            if let Err(error) = run.await {
                tracing::error!(task_id = %args.task_id, %error, "a task run failed");
            }
            args.scheduler
                .send_message(SchedulerMsg::Changed(args.task_id))
                .ok();
            let _ = myself.send_message(TaskMsg::Done);
        });
        Ok(TaskState { path, work })
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        state.work.abort();
        Ok(())
    }

    #[tracing::instrument(name = "task", skip_all, fields(actor = %state.path))]
    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        message: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            TaskMsg::Done => myself.stop(None),
        }
        Ok(())
    }
}

/// Claims the task for its run due at `due_at`, runs it, and records how it went.
async fn run_once(deps: TaskDeps, task_id: Uuid, due_at: DateTime<Utc>, late: bool) {
    let db = &deps.db;
    let outcome: Result<(), parley_persistence::PersistenceError> = async {
        let now = clock::now();
        // The claim and the run row commit together: a stop leaves both or neither.
        let txn = parley_persistence::begin_write(db).await?;
        let fence = deps.placement.fence(task_id);
        let claimed = scheduled_tasks::start_run(&txn, task_id, due_at, late, now, fence.as_ref());
        let Some(run) = claimed.await? else {
            return Ok(());
        };
        txn.commit().await?;
        let Some(task) = scheduled_tasks::find_in_any_workspace(db, task_id).await? else {
            return Ok(());
        };
        tracing::info!(%task_id, task_type = task.task_type.as_str(), late, "task run started");
        let result = run::execute(&deps, &task, run.id).await;
        let finished = clock::now();
        let next_run_at = next_run(&task, finished.max(due_at));
        crate::measure::task_run(if result.is_ok() {
            "succeeded"
        } else {
            "failed"
        });
        let end = match result {
            Ok(result) => RunEnd {
                status: RunStatus::Succeeded,
                error: None,
                result: Some(result),
                next_run_at,
            },
            Err(error) => {
                tracing::warn!(%task_id, %error, "task run failed");
                RunEnd {
                    status: RunStatus::Failed,
                    error: Some(error),
                    result: None,
                    next_run_at,
                }
            }
        };
        let events = deps.outbox.events();
        super::finish_run(db, events, Some(&task), &run, end, finished).await?;
        scheduled_tasks::trim_runs(db, task_id, deps.runs_kept.max(1)).await?;
        Ok(())
    }
    .await;
    if let Err(error) = outcome {
        tracing::error!(%task_id, %error, "a task run could not be recorded");
    }
}
