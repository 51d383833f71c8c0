//! The `flows` supervisor: one FlowActor per queued, running or paused flow, started at boot
//! for every such flow and when a flow is queued or resumed; a failed actor is started again
//! after a pause, and its new runner continues from the database. [`Flows`] is the handle the
//! HTTP layer and the delivery reports talk through.

use std::sync::Arc;
use std::time::Duration;

use parley_persistence::{FlowStatus, clock, flows};
use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort, SupervisionEvent, call_t};
use tokio::sync::{Notify, watch};
use uuid::Uuid;

use super::run::Runner;
use crate::runtime::{ActorPath, Handles, LiveActors, RuntimeError, SupervisorKind};

/// How long a failed flow actor waits before it is started again.
const RESTART_AFTER: Duration = Duration::from_secs(1);

/// Behaviour of the `root/flows` supervisor.
pub(crate) struct FlowRegistry;

/// State of the registry.
pub(crate) struct FlowRegistryState {
    handles: Arc<Handles>,
    live: LiveActors<Uuid, FlowMsg>,
}

/// Messages of the registry.
pub(crate) enum FlowRegistryMsg {
    /// The flow's status changed (created, queued, paused, resumed, cancelled): its actor is
    /// started, told, or stopped.
    Changed(Uuid),
    /// A delivery report moved one of the flow's recipients.
    Reported(Uuid),
    /// How many flow actors are live (of one workspace, when given).
    Count(Option<i64>, RpcReplyPort<usize>),
}

impl Actor for FlowRegistry {
    type Msg = FlowRegistryMsg;
    type State = FlowRegistryState;
    type Arguments = Arc<Handles>;

    async fn pre_start(
        &self,
        _myself: ActorRef<Self::Msg>,
        handles: Arc<Handles>,
    ) -> Result<Self::State, ActorProcessingErr> {
        Ok(FlowRegistryState {
            handles,
            live: LiveActors::new(),
        })
    }

    async fn post_start(
        &self,
        myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        for flow in flows::live(&state.handles.db).await? {
            spawn(&myself, state, flow.id, flow.workspace_id).await;
        }
        Ok(())
    }

    async fn post_stop(
        &self,
        myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        let path = ActorPath::supervisor(SupervisorKind::Flows);
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
            FlowRegistryMsg::Changed(flow_id) => {
                let found = flows::find_any(&state.handles.db, flow_id).await?;
                match (found, state.live.get(&flow_id)) {
                    (Some(flow), Some(actor)) => {
                        let _ = actor.send_message(FlowMsg::Status(flow.status));
                    }
                    (Some(flow), None) if flow.status.is_live() => {
                        spawn(&myself, state, flow.id, flow.workspace_id).await;
                    }
                    (None, Some(actor)) => {
                        let _ = actor.send_message(FlowMsg::Status(FlowStatus::Cancelled));
                    }
                    _ => {}
                }
            }
            FlowRegistryMsg::Reported(flow_id) => {
                if let Some(actor) = state.live.get(&flow_id) {
                    let _ = actor.send_message(FlowMsg::Reported);
                }
            }
            FlowRegistryMsg::Count(workspace, reply) => {
                let _ = reply.send(state.live.count_in(workspace));
            }
        }
        Ok(())
    }

    async fn handle_supervisor_evt(
        &self,
        myself: ActorRef<Self::Msg>,
        event: SupervisionEvent,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        if let Some((id, ending)) = state.live.ended(event) {
            let failed = matches!(ending, crate::runtime::Ending::Failed(_));
            ending.log(&ActorPath::flow(id), "started again shortly", "finished");
            if failed {
                myself.send_after(RESTART_AFTER, move || FlowRegistryMsg::Changed(id));
            }
        }
        Ok(())
    }
}

async fn spawn(
    myself: &ActorRef<FlowRegistryMsg>,
    state: &mut FlowRegistryState,
    flow_id: Uuid,
    workspace_id: i64,
) {
    let path = ActorPath::flow(flow_id);
    let args = FlowArgs {
        flow_id,
        handles: state.handles.clone(),
    };
    match Actor::spawn_linked(None, FlowActor, args, myself.get_cell()).await {
        Ok((actor, _)) => {
            tracing::info!(actor = %path, "actor spawned");
            state.live.insert_in(flow_id, actor, workspace_id);
        }
        Err(error) => {
            tracing::error!(actor = %path, %error, "actor failed to start; trying again shortly");
            myself.send_after(RESTART_AFTER, move || FlowRegistryMsg::Changed(flow_id));
        }
    }
}

/// Behaviour of one flow's actor: owns its runner and tells it what the user decided.
pub(crate) struct FlowActor;

/// What a flow actor starts from.
pub(crate) struct FlowArgs {
    flow_id: Uuid,
    handles: Arc<Handles>,
}

/// State of a flow actor.
pub(crate) struct FlowState {
    flow_id: Uuid,
    control: watch::Sender<FlowStatus>,
    reports: Arc<Notify>,
    runner: tokio::task::JoinHandle<()>,
}

/// Messages of a flow actor.
pub(crate) enum FlowMsg {
    /// The flow's status as the user set it.
    Status(FlowStatus),
    /// A delivery report moved a recipient.
    Reported,
    /// The runner finished; `Err` when it failed.
    RunnerEnded(Result<(), String>),
}

impl Actor for FlowActor {
    type Msg = FlowMsg;
    type State = FlowState;
    type Arguments = FlowArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<Self::Msg>,
        args: FlowArgs,
    ) -> Result<Self::State, ActorProcessingErr> {
        let db = &args.handles.db;
        // Sends caught mid-way by the last stop (or this actor's last failure) may have
        // reached Meta: they are failed, never sent twice.
        let interrupted = flows::fail_interrupted(db, args.flow_id, clock::now()).await?;
        if interrupted > 0 {
            tracing::warn!(flow_id = %args.flow_id, interrupted, "recipients caught mid-send were failed `interrupted`");
        }
        let status = flows::find_any(db, args.flow_id)
            .await?
            .map_or(FlowStatus::Cancelled, |f| f.status);
        let (control, watching) = watch::channel(status);
        let reports = Arc::new(Notify::new());
        let runner = Runner {
            flow_id: args.flow_id,
            handles: args.handles.clone(),
            control: watching,
            reports: reports.clone(),
        };
        let me = myself.clone();
        let runner = tokio::spawn(async move {
            let ended = tokio::spawn(runner.run()).await;
            let outcome = match ended {
                Ok(Ok(())) => Ok(()),
                Ok(Err(error)) => Err(error.to_string()),
                Err(error) => Err(format!("the runner panicked: {error}")),
            };
            let _ = me.send_message(FlowMsg::RunnerEnded(outcome));
        });
        Ok(FlowState {
            flow_id: args.flow_id,
            control,
            reports,
            runner,
        })
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        state.runner.abort();
        Ok(())
    }

    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        message: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            FlowMsg::Status(status) => {
                state.control.send_replace(status);
            }
            FlowMsg::Reported => state.reports.notify_one(),
            FlowMsg::RunnerEnded(Ok(())) => myself.stop(None),
            FlowMsg::RunnerEnded(Err(error)) => {
                return Err(format!("flow {}: {error}", state.flow_id).into());
            }
        }
        Ok(())
    }
}

/// The handle on the flow actors; cheap to clone.
#[derive(Clone, Debug)]
pub struct Flows {
    registry: ActorRef<FlowRegistryMsg>,
}

impl Flows {
    pub(crate) fn new(registry: ActorRef<FlowRegistryMsg>) -> Self {
        Self { registry }
    }

    /// The flow's status changed in the database: its actor starts, hears it, or stops.
    pub fn changed(&self, flow_id: Uuid) {
        let _ = self
            .registry
            .send_message(FlowRegistryMsg::Changed(flow_id));
    }

    /// A delivery report moved one of the flow's recipients.
    pub(crate) fn reported(&self, flow_id: Uuid) {
        let _ = self
            .registry
            .send_message(FlowRegistryMsg::Reported(flow_id));
    }

    /// How many flow actors are live for `workspace` (all, for `None`).
    ///
    /// # Errors
    /// Fails when the registry does not answer.
    pub async fn live_in(&self, workspace: Option<i64>) -> Result<usize, RuntimeError> {
        call_t!(self.registry, FlowRegistryMsg::Count, 5_000, workspace)
            .map_err(|e| RuntimeError::Unavailable(e.to_string()))
    }
}
