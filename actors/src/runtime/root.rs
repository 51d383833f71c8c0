//! The root supervisor: starts one supervisor per kind of live work, publishes their handles,
//! and restarts a failed one with a growing backoff while the others carry on.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use ractor::{Actor, ActorCell, ActorProcessingErr, ActorRef, RpcReplyPort, SupervisionEvent};

use super::supervisor::SupervisorSnapshot;
use super::{ActorPath, Ending, Handles, RuntimeDeps, SupervisorKind, ending};
use crate::channel::registry::ChannelRegistry;
use crate::conversation::registry::ConversationRegistry;
use crate::flow::registry::FlowRegistry;
use crate::inbound::worker::{InboundWorker, InboundWorkerArgs};
use crate::schedule::registry::{SchedulerArgs, SchedulerRegistry};

/// Behaviour of the root supervisor.
pub(crate) struct Root;

/// What the root starts with.
pub(crate) struct RootArgs {
    pub(crate) deps: Arc<RuntimeDeps>,
    pub(crate) handles: Arc<Handles>,
}

/// State of the root.
pub(crate) struct RootState {
    /// Handed to the supervisors at every (re)start.
    deps: Arc<RuntimeDeps>,
    /// Where the live supervisors are published for the rest of Parley.
    handles: Arc<Handles>,
    /// The live child supervisors; a failed one is replaced after a backoff.
    children: Vec<(SupervisorKind, ActorCell)>,
    /// Consecutive restarts per kind, to grow the backoff for a supervisor that keeps failing.
    restarts: HashMap<SupervisorKind, u32>,
    /// Set once the root is stopping, so that children ending then are not restarted.
    stopping: bool,
}

/// Messages the root handles.
pub(crate) enum RootMsg {
    /// Snapshot every child supervisor.
    Tree(RpcReplyPort<Vec<SupervisorSnapshot>>),
    /// Start a supervisor again after its backoff.
    Restart(SupervisorKind),
    /// Fail a child supervisor on purpose.
    #[cfg(test)]
    CrashChild(SupervisorKind),
}

/// First restart delay; doubles per consecutive restart up to [`MAX_BACKOFF`].
const BASE_BACKOFF: Duration = Duration::from_millis(100);
const MAX_BACKOFF: Duration = Duration::from_secs(10);

impl Actor for Root {
    type Msg = RootMsg;
    type State = RootState;
    type Arguments = RootArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<Self::Msg>,
        args: RootArgs,
    ) -> Result<Self::State, ActorProcessingErr> {
        let mut state = RootState {
            deps: args.deps,
            handles: args.handles,
            children: Vec::with_capacity(SupervisorKind::ALL.len()),
            restarts: HashMap::new(),
            stopping: false,
        };
        for kind in SupervisorKind::ALL {
            let cell = spawn_child(&myself.get_cell(), kind, &state).await?;
            state.children.push((kind, cell));
        }
        Ok(state)
    }

    async fn post_stop(
        &self,
        myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        state.stopping = true;
        // Stop in reverse start order: the inbound worker before the actors it talks to.
        for (kind, cell) in state.children.iter().rev() {
            cell.stop_and_wait(Some("shutdown".to_owned()), Some(Duration::from_secs(15)))
                .await
                .unwrap_or_else(|error| {
                    tracing::warn!(actor = %ActorPath::supervisor(*kind), %error, "did not stop in time");
                });
        }
        myself
            .stop_children_and_wait(Some("shutdown".to_owned()), None)
            .await;
        Ok(())
    }

    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        message: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            RootMsg::Tree(reply) => {
                let snapshots = state
                    .children
                    .iter()
                    .map(|(kind, cell)| SupervisorSnapshot {
                        path: ActorPath::supervisor(*kind).to_string(),
                        live_children: cell.get_children().len(),
                        resting: None,
                    })
                    .collect();
                let _ = reply.send(snapshots);
            }
            RootMsg::Restart(kind) => {
                if state.stopping || state.children.iter().any(|(k, _)| *k == kind) {
                    return Ok(());
                }
                match spawn_child(&myself.get_cell(), kind, state).await {
                    Ok(cell) => {
                        tracing::warn!(actor = %ActorPath::supervisor(kind), "actor restarted");
                        state.children.push((kind, cell));
                    }
                    Err(error) => {
                        tracing::error!(actor = %ActorPath::supervisor(kind), %error, "restart failed");
                        schedule_restart(&myself, state, kind);
                    }
                }
            }
            #[cfg(test)]
            RootMsg::CrashChild(kind) => {
                if let Some((_, cell)) = state.children.iter().find(|(k, _)| *k == kind) {
                    cell.kill();
                }
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
        let Some((cell, ending)) = ending(event) else {
            return Ok(());
        };
        let Some(index) = state
            .children
            .iter()
            .position(|(_, child)| child.get_id() == cell.get_id())
        else {
            return Ok(());
        };
        let (kind, _) = state.children.remove(index);
        state.handles.set(kind, None);
        let path = ActorPath::supervisor(kind);
        if state.stopping {
            tracing::info!(actor = %path, "actor stopped");
            return Ok(());
        }
        let reason = match ending {
            Ending::Stopped(reason, _) => reason.unwrap_or_else(|| "stopped".to_owned()),
            Ending::Failed(error) => error,
        };
        tracing::error!(actor = %path, %reason, "actor failed");
        crate::measure::actor_failed(kind.name());
        schedule_restart(&myself, state, kind);
        Ok(())
    }
}

async fn spawn_child(
    root: &ActorCell,
    kind: SupervisorKind,
    state: &RootState,
) -> Result<ActorCell, ractor::SpawnErr> {
    let deps = &state.deps;
    let cell = match kind {
        SupervisorKind::Conversations => {
            let args = Arc::new(deps.conversations.clone());
            Actor::spawn_linked(None, ConversationRegistry, args, root.clone())
                .await?
                .0
                .get_cell()
        }
        SupervisorKind::Channels => {
            let args = Arc::new(deps.channels.clone());
            Actor::spawn_linked(None, ChannelRegistry, args, root.clone())
                .await?
                .0
                .get_cell()
        }
        SupervisorKind::Inbound => {
            let args = InboundWorkerArgs {
                settings: deps.inbound.clone(),
                handles: state.handles.clone(),
            };
            Actor::spawn_linked(None, InboundWorker, args, root.clone())
                .await?
                .0
                .get_cell()
        }
        SupervisorKind::Flows => {
            Actor::spawn_linked(None, FlowRegistry, state.handles.clone(), root.clone())
                .await?
                .0
                .get_cell()
        }
        SupervisorKind::Scheduler => {
            let args = SchedulerArgs {
                handles: state.handles.clone(),
                sweep: deps.scheduler_sweep,
            };
            Actor::spawn_linked(None, SchedulerRegistry, args, root.clone())
                .await?
                .0
                .get_cell()
        }
    };
    state.handles.set(kind, Some(&cell));
    tracing::info!(actor = %ActorPath::supervisor(kind), "actor spawned");
    Ok(cell)
}

fn schedule_restart(myself: &ActorRef<RootMsg>, state: &mut RootState, kind: SupervisorKind) {
    let attempt = state.restarts.entry(kind).or_insert(0);
    let delay = BASE_BACKOFF
        .saturating_mul(2u32.saturating_pow(*attempt))
        .min(MAX_BACKOFF);
    *attempt = attempt.saturating_add(1);
    crate::measure::actor_restarted(kind.name());
    myself.send_after(delay, move || RootMsg::Restart(kind));
}
