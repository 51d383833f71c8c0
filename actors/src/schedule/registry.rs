//! The `scheduler` supervisor: sweeps the tasks table every `sweep` and keeps a
//! ScheduledTaskActor only for tasks due before the next sweep (and at once for a task created
//! or resumed inside that window). A task's actor sleeps until its time, claims the task and
//! writes its run `running` in the database, runs it, records the end and the next run, and
//! stops. [`Scheduler`] is the handle the HTTP layer tells about changes.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use parley_persistence::entities::scheduled_task;
use parley_persistence::scheduled_tasks::{self, RunEnd};
use parley_persistence::{RunStatus, TaskStatus, clock};
use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort, call_t};
use uuid::Uuid;

use super::{next_run, run};
use crate::runtime::{ActorPath, Handles, LiveActors, RuntimeError, SupervisorKind};

/// Tasks read per sweep at most; the rest are read by the next sweeps as the first ones run.
const SWEEP_LIMIT: u64 = 10_000;

/// Behaviour of the `root/scheduler` supervisor.
pub(crate) struct SchedulerRegistry;

/// What the scheduler starts from.
pub(crate) struct SchedulerArgs {
    pub(crate) handles: Arc<Handles>,
    /// How often the table is swept; tasks due within it get an actor.
    pub(crate) sweep: Duration,
}

/// State of the scheduler.
pub(crate) struct SchedulerState {
    handles: Arc<Handles>,
    sweep: Duration,
    /// When this process started: a run due before it fell due while the service was down.
    booted_at: DateTime<Utc>,
    live: LiveActors<Uuid, TaskMsg>,
    /// The due time each live actor waits for.
    due: std::collections::HashMap<Uuid, DateTime<Utc>>,
}

/// Messages of the scheduler.
pub(crate) enum SchedulerMsg {
    /// Sweep the table now (and again after `sweep`).
    Sweep,
    /// A task was created, paused, resumed, deleted, or ran: its actor is started or stopped.
    Changed(Uuid),
    /// How many task actors are live (of one workspace, when given).
    Count(Option<i64>, RpcReplyPort<usize>),
}

impl Actor for SchedulerRegistry {
    type Msg = SchedulerMsg;
    type State = SchedulerState;
    type Arguments = SchedulerArgs;

    async fn pre_start(
        &self,
        _myself: ActorRef<Self::Msg>,
        args: SchedulerArgs,
    ) -> Result<Self::State, ActorProcessingErr> {
        let now = clock::now();
        let interrupted =
            scheduled_tasks::fail_interrupted(&args.handles.db, |task| next_run(task, now), now)
                .await?;
        if interrupted > 0 {
            tracing::warn!(
                interrupted,
                "task runs caught mid-way by the last stop were failed `interrupted`"
            );
        }
        Ok(SchedulerState {
            handles: args.handles,
            sweep: args.sweep,
            booted_at: now,
            live: LiveActors::new(),
            due: std::collections::HashMap::new(),
        })
    }

    async fn post_start(
        &self,
        myself: ActorRef<Self::Msg>,
        _state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        myself.send_message(SchedulerMsg::Sweep)?;
        Ok(())
    }

    async fn post_stop(
        &self,
        myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        let path = ActorPath::supervisor(SupervisorKind::Scheduler);
        state.live.stop_all(&myself.get_cell(), &path).await;
        Ok(())
    }

    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        message: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            SchedulerMsg::Sweep => {
                let until = clock::now() + chrono::Duration::from_std(state.sweep)?;
                for task in
                    scheduled_tasks::due_before(&state.handles.db, until, SWEEP_LIMIT).await?
                {
                    ensure(&myself, state, &task).await;
                }
                myself.send_after(state.sweep, || SchedulerMsg::Sweep);
            }
            SchedulerMsg::Changed(id) => {
                let task = scheduled_tasks::find_any(&state.handles.db, id).await?;
                let until = clock::now() + chrono::Duration::from_std(state.sweep)?;
                match task {
                    Some(task)
                        if task.status == TaskStatus::Scheduled
                            && task.next_run_at.is_some_and(|at| at <= until) =>
                    {
                        ensure(&myself, state, &task).await;
                    }
                    _ => {
                        if let Some(actor) = state.live.get(&id) {
                            actor.stop(Some("the task changed".to_owned()));
                        }
                    }
                }
            }
            SchedulerMsg::Count(workspace, reply) => {
                let _ = reply.send(state.live.count_in(workspace));
            }
        }
        Ok(())
    }

    async fn handle_supervisor_evt(
        &self,
        _myself: ActorRef<Self::Msg>,
        event: ractor::SupervisionEvent,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        if let Some((id, ending)) = state.live.ended(event) {
            state.due.remove(&id);
            // A failed actor's task is still scheduled: the next sweep gives it a new actor.
            ending.log(
                &ActorPath::task(id),
                "the next sweep starts it again",
                "ran",
            );
        }
        Ok(())
    }
}

/// Gives `task` an actor for its next run, unless one already waits for that run.
async fn ensure(
    myself: &ActorRef<SchedulerMsg>,
    state: &mut SchedulerState,
    task: &scheduled_task::Model,
) {
    let Some(due_at) = task.next_run_at else {
        return;
    };
    if let Some(actor) = state.live.get(&task.id).cloned() {
        if state.due.get(&task.id) == Some(&due_at) {
            return;
        }
        actor.stop(Some("rescheduled".to_owned()));
        state.live.forget(&actor.get_cell());
    }
    let args = TaskArgs {
        task_id: task.id,
        due_at,
        late: due_at < state.booted_at,
        handles: state.handles.clone(),
        scheduler: myself.clone(),
    };
    match Actor::spawn_linked(None, TaskActor, args, myself.get_cell()).await {
        Ok((actor, _)) => {
            state.live.insert_in(task.id, actor, task.workspace_id);
            state.due.insert(task.id, due_at);
        }
        Err(error) => {
            tracing::error!(actor = %ActorPath::task(task.id), %error, "actor failed to start; the next sweep tries again");
        }
    }
}

/// Behaviour of one task's actor: waits for the task's time, runs it once, stops.
pub(crate) struct TaskActor;

/// What a task actor starts from.
pub(crate) struct TaskArgs {
    task_id: Uuid,
    due_at: DateTime<Utc>,
    late: bool,
    handles: Arc<Handles>,
    scheduler: ActorRef<SchedulerMsg>,
}

/// State of a task actor: the timer and run it owns.
pub(crate) struct TaskState {
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
        let work = tokio::spawn(async move {
            let wait = (args.due_at - Utc::now()).to_std().unwrap_or_default();
            tokio::time::sleep(wait).await;
            // The run itself is detached: stopping the actor (a pause, a shutdown) never cuts
            // a run in half; a process stop does, and the next start fails it `interrupted`.
            let run = tokio::spawn(run_once(
                args.handles.clone(),
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
        Ok(TaskState { work })
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        state.work.abort();
        Ok(())
    }

    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        message: Self::Msg,
        _state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            TaskMsg::Done => myself.stop(None),
        }
        Ok(())
    }
}

/// Claims the task for its run due at `due_at`, runs it, and records how it went.
async fn run_once(handles: Arc<Handles>, task_id: Uuid, due_at: DateTime<Utc>, late: bool) {
    let db = &handles.db;
    let outcome: Result<(), parley_persistence::PersistenceError> = async {
        let now = clock::now();
        // The claim and the run row commit together: a stop leaves both or neither.
        let txn = parley_persistence::begin_write(db).await?;
        let Some(run) = scheduled_tasks::start_run(&txn, task_id, due_at, late, now).await? else {
            return Ok(());
        };
        txn.commit().await?;
        let Some(task) = scheduled_tasks::find_any(db, task_id).await? else {
            return Ok(());
        };
        tracing::info!(%task_id, task_type = task.task_type.as_str(), late, "task run started");
        let result = run::execute(&handles, &task).await;
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
        scheduled_tasks::finish_run(db, &run, end, finished).await
    }
    .await;
    if let Err(error) = outcome {
        tracing::error!(%task_id, %error, "a task run could not be recorded");
    }
}

/// The handle on the scheduler; cheap to clone.
#[derive(Clone, Debug)]
pub struct Scheduler {
    registry: ActorRef<SchedulerMsg>,
}

impl Scheduler {
    pub(crate) fn new(registry: ActorRef<SchedulerMsg>) -> Self {
        Self { registry }
    }

    /// A task was created, paused, resumed or deleted.
    pub fn changed(&self, task_id: Uuid) {
        let _ = self.registry.send_message(SchedulerMsg::Changed(task_id));
    }

    /// How many task actors are live for `workspace` (all, for `None`).
    ///
    /// # Errors
    /// Fails when the scheduler does not answer.
    pub async fn live_in(&self, workspace: Option<i64>) -> Result<usize, RuntimeError> {
        call_t!(self.registry, SchedulerMsg::Count, 5_000, workspace)
            .map_err(|e| RuntimeError::Unavailable(e.to_string()))
    }
}
