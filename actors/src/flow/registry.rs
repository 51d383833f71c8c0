//! The `flows` supervisor: one FlowActor per queued, running or paused flow, started at boot
//! for every such flow and when a flow is queued or resumed; a failed actor is started again
//! after a pause, and its new runner continues from the database.

use parley_persistence::{FlowStatus, flows};
use ractor::{Actor, ActorProcessingErr, ActorRef, SupervisionEvent};
use std::time::Duration;
use uuid::Uuid;

use super::FlowDeps;
use super::actor::{FlowActor, FlowArgs, FlowMsg};
use super::handle::{FlowRegistryMsg, Flows};
use crate::tree::{ActorPath, Ending, LiveActors, SupervisorKind};

/// How long a failed flow actor waits before it is started again.
const RESTART_AFTER: Duration = Duration::from_secs(1);

/// Behaviour of the `root/flows` supervisor.
pub(crate) struct FlowRegistry;

/// What the `flows` supervisor starts with.
pub(crate) struct FlowRegistryArgs {
    /// What its flow actors need.
    pub(crate) deps: FlowDeps,
    /// The handle on itself, for its runners (a send's late report reaches its flow).
    pub(crate) flows: Flows,
}

/// State of the registry.
pub(crate) struct FlowRegistryState {
    deps: FlowDeps,
    flows: Flows,
    live: LiveActors<Uuid, FlowMsg>,
}

impl Actor for FlowRegistry {
    type Msg = FlowRegistryMsg;
    type State = FlowRegistryState;
    type Arguments = FlowRegistryArgs;

    async fn pre_start(
        &self,
        _myself: ActorRef<Self::Msg>,
        args: FlowRegistryArgs,
    ) -> Result<Self::State, ActorProcessingErr> {
        Ok(FlowRegistryState {
            deps: args.deps,
            flows: args.flows,
            live: LiveActors::new(),
        })
    }

    async fn post_start(
        &self,
        myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        start_owned(&myself, state).await?;
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

    #[tracing::instrument(name = "flows", skip_all)]
    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        message: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            FlowRegistryMsg::Changed(flow_id) if !state.deps.placement.owns(flow_id) => {}
            FlowRegistryMsg::Changed(flow_id) => {
                let found = flows::find_in_any_workspace(&state.deps.db, flow_id).await?;
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
            FlowRegistryMsg::Rebalance => {
                let placement = state.deps.placement.clone();
                // A flow's runner stops with its actor; what it left `sending` is settled by
                // the next owner's actor, and its claims here no longer commit.
                state.live.retire_unless(|id| placement.owns(*id));
                start_owned(&myself, state).await?;
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
            let failed = matches!(ending, Ending::Failed(_));
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
        deps: state.deps.clone(),
        flows: state.flows.clone(),
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

/// Starts an actor for every live flow this node owns that has none.
async fn start_owned(
    myself: &ActorRef<FlowRegistryMsg>,
    state: &mut FlowRegistryState,
) -> Result<(), parley_persistence::PersistenceError> {
    for flow in flows::live(&state.deps.db).await? {
        if state.deps.placement.owns(flow.id) && state.live.get(&flow.id).is_none() {
            spawn(myself, state, flow.id, flow.workspace_id).await;
        }
    }
    Ok(())
}
