//! The `scheduler` supervisor: sweeps the tasks table every `sweep` and keeps a
//! ScheduledTaskActor only for tasks due before the next sweep (and at once for a task created
//! or resumed inside that window). A task's actor sleeps until its time, claims the task and
//! writes its run `running` in the database, runs it, records the end and the next run, and
//! stops (`task`).

use std::time::Duration;

use chrono::{DateTime, Utc};
use parley_persistence::entities::scheduled_task;
use parley_persistence::scheduled_tasks;
use parley_persistence::{TaskStatus, clock};
use ractor::{Actor, ActorProcessingErr, ActorRef};
use uuid::Uuid;

use super::handle::SchedulerMsg;
use super::recover::recover;
use super::run::TaskDeps;
use super::task::{TaskActor, TaskArgs, TaskMsg};
use crate::tree::{ActorPath, LiveActors, SupervisorKind};

/// Tasks read per sweep at most; the rest are read by the next sweeps as the first ones run.
const SWEEP_LIMIT: u64 = 10_000;

/// Behaviour of the `root/scheduler` supervisor.
pub(crate) struct SchedulerRegistry;

/// What the scheduler starts from.
pub(crate) struct SchedulerArgs {
    pub(crate) deps: TaskDeps,
    /// How often the table is swept; tasks due within it get an actor.
    pub(crate) sweep: Duration,
}

/// State of the scheduler.
pub(crate) struct SchedulerState {
    deps: TaskDeps,
    sweep: Duration,
    /// When this process started: a run due before it fell due while the service was down.
    booted_at: DateTime<Utc>,
    live: LiveActors<Uuid, TaskMsg>,
    /// The due time each live actor waits for.
    due: std::collections::HashMap<Uuid, DateTime<Utc>>,
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
        let placement = args.deps.placement.clone();
        recover_where(&args.deps, now, |task_id| placement.owns(task_id)).await?;
        Ok(SchedulerState {
            deps: args.deps,
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

    #[tracing::instrument(name = "scheduler", skip_all)]
    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        message: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            SchedulerMsg::Sweep => {
                sweep(&myself, state).await?;
                myself.send_after(state.sweep, || SchedulerMsg::Sweep);
            }
            SchedulerMsg::Rebalance(gained) => {
                let placement = state.deps.placement.clone();
                state.live.retire_unless(|id| placement.owns(*id));
                let now = clock::now();
                recover_where(&state.deps, now, |id| placement.in_partitions(id, &gained)).await?;
                sweep(&myself, state).await?;
            }
            SchedulerMsg::Changed(id) if !state.deps.placement.owns(id) => {
                if let Some(actor) = state.live.get(&id) {
                    actor.stop(Some("another node owns the task".to_owned()));
                }
            }
            SchedulerMsg::Changed(id) => {
                let task = scheduled_tasks::find_in_any_workspace(&state.deps.db, id).await?;
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

/// Gives every task due before the next sweep that this node owns an actor.
async fn sweep(
    myself: &ActorRef<SchedulerMsg>,
    state: &mut SchedulerState,
) -> Result<(), ActorProcessingErr> {
    let until = clock::now() + chrono::Duration::from_std(state.sweep)?;
    let due = scheduled_tasks::due_before(&state.deps.db, until, SWEEP_LIMIT).await?;
    let placement = state.deps.placement.clone();
    for task in placement.keep_owned(due, |task| task.id) {
        ensure(myself, state, &task).await;
    }
    Ok(())
}

/// Settles the runs left `running` of the tasks `mine` says are this node's to settle.
async fn recover_where(
    deps: &TaskDeps,
    now: DateTime<Utc>,
    mine: impl Fn(Uuid) -> bool,
) -> Result<(), parley_persistence::PersistenceError> {
    let rerun_unsent = !deps.placement.is_clustered();
    let recovered = recover(&deps.db, deps.outbox.events(), now, mine, rerun_unsent).await?;
    if recovered.interrupted > 0 {
        tracing::warn!(
            interrupted = recovered.interrupted,
            "task runs caught mid-way by the last stop were failed `interrupted`"
        );
    }
    if recovered.rerun > 0 {
        tracing::warn!(
            rerun = recovered.rerun,
            "send task runs stopped before handing their message over run again"
        );
    }
    Ok(())
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
        deps: state.deps.clone(),
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
