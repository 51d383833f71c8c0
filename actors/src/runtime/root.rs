//! The root supervisor: starts one supervisor per kind of live work, publishes their handles,
//! and restarts a failed one with a growing backoff while the others carry on.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use ractor::{Actor, ActorCell, ActorProcessingErr, ActorRef, RpcReplyPort, SupervisionEvent};

use crate::channel::ChannelDeps;
use crate::channel::registry::{ChannelRegistry, ChannelRegistryMsg};
use crate::conversation::ConversationDeps;
use crate::conversation::registry::{ConversationRegistry, RegistryMsg};
use crate::events::delivery::{DeliveryDeps, DeliveryMsg, DeliveryWorker};
use crate::flow::FlowRegistryMsg;
use crate::flow::registry::{FlowRegistry, FlowRegistryArgs};
use crate::flow::{FlowDeps, Flows};
use crate::inbound::InboundDeps;
use crate::inbound::worker::{InboundSettings, InboundWorker, InboundWorkerArgs, InboundWorkerMsg};
use crate::media::MediaDeps;
use crate::media::worker::{MediaMsg, MediaWorker};
use crate::scheduler::SchedulerMsg;
use crate::scheduler::TaskDeps;
use crate::scheduler::registry::{SchedulerArgs, SchedulerRegistry};
use crate::tree::{ActorPath, Ending, Slot, SupervisorKind, SupervisorSnapshot, ending};

/// Behaviour of the root supervisor.
pub(crate) struct Root;

/// Where each supervisor is published for the handles built on it.
#[derive(Clone)]
pub(crate) struct Slots {
    pub(crate) channels: Slot<ChannelRegistryMsg>,
    pub(crate) conversations: Slot<RegistryMsg>,
    pub(crate) inbound: Slot<InboundWorkerMsg>,
    pub(crate) flows: Slot<FlowRegistryMsg>,
    pub(crate) scheduler: Slot<SchedulerMsg>,
    pub(crate) events: Slot<DeliveryMsg>,
    pub(crate) media: Slot<MediaMsg>,
}

impl Default for Slots {
    fn default() -> Self {
        Self {
            channels: Slot::new(SupervisorKind::Channels),
            conversations: Slot::new(SupervisorKind::Conversations),
            inbound: Slot::new(SupervisorKind::Inbound),
            flows: Slot::new(SupervisorKind::Flows),
            scheduler: Slot::new(SupervisorKind::Scheduler),
            events: Slot::new(SupervisorKind::Events),
            media: Slot::new(SupervisorKind::Media),
        }
    }
}

impl Slots {
    /// Publishes the supervisor of `kind` started in `cell`, or (with `None`) that it is gone.
    fn set(&self, kind: SupervisorKind, cell: Option<&ActorCell>) {
        match (kind, cell) {
            (SupervisorKind::Channels, Some(cell)) => self.channels.publish_cell(cell),
            (SupervisorKind::Conversations, Some(cell)) => self.conversations.publish_cell(cell),
            (SupervisorKind::Inbound, Some(cell)) => self.inbound.publish_cell(cell),
            (SupervisorKind::Flows, Some(cell)) => self.flows.publish_cell(cell),
            (SupervisorKind::Scheduler, Some(cell)) => self.scheduler.publish_cell(cell),
            (SupervisorKind::Events, Some(cell)) => self.events.publish_cell(cell),
            (SupervisorKind::Media, Some(cell)) => self.media.publish_cell(cell),
            (SupervisorKind::Channels, None) => self.channels.publish(None),
            (SupervisorKind::Conversations, None) => self.conversations.publish(None),
            (SupervisorKind::Inbound, None) => self.inbound.publish(None),
            (SupervisorKind::Flows, None) => self.flows.publish(None),
            (SupervisorKind::Scheduler, None) => self.scheduler.publish(None),
            (SupervisorKind::Events, None) => self.events.publish(None),
            (SupervisorKind::Media, None) => self.media.publish(None),
        }
    }
}

/// What the root starts with: the slots to publish its supervisors in, and what each
/// supervisor is handed at every (re)start.
pub(crate) struct RootArgs {
    pub(crate) slots: Slots,
    pub(crate) conversations: Arc<ConversationDeps>,
    pub(crate) channels: Arc<ChannelDeps>,
    pub(crate) inbound_settings: InboundSettings,
    pub(crate) inbound: InboundDeps,
    pub(crate) flows: FlowDeps,
    pub(crate) flows_handle: Flows,
    pub(crate) tasks: TaskDeps,
    pub(crate) scheduler_sweep: Duration,
    pub(crate) events: Arc<DeliveryDeps>,
    pub(crate) media: Arc<MediaDeps>,
}

/// State of the root.
pub(crate) struct RootState {
    /// Handed to the supervisors at every (re)start, and where they are published.
    args: RootArgs,
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
            args,
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

    #[tracing::instrument(name = "root", skip_all)]
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
        state.args.slots.set(kind, None);
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
    let args = &state.args;
    let root = root.clone();
    let cell = match kind {
        SupervisorKind::Conversations => {
            let deps = args.conversations.clone();
            let (actor, _) = Actor::spawn_linked(None, ConversationRegistry, deps, root).await?;
            actor.get_cell()
        }
        SupervisorKind::Channels => {
            let deps = args.channels.clone();
            let (actor, _) = Actor::spawn_linked(None, ChannelRegistry, deps, root).await?;
            actor.get_cell()
        }
        SupervisorKind::Inbound => {
            let worker = InboundWorkerArgs {
                settings: args.inbound_settings.clone(),
                deps: args.inbound.clone(),
            };
            let (actor, _) = Actor::spawn_linked(None, InboundWorker, worker, root).await?;
            actor.get_cell()
        }
        SupervisorKind::Flows => {
            let registry = FlowRegistryArgs {
                deps: args.flows.clone(),
                flows: args.flows_handle.clone(),
            };
            let (actor, _) = Actor::spawn_linked(None, FlowRegistry, registry, root).await?;
            actor.get_cell()
        }
        SupervisorKind::Scheduler => {
            let scheduler = SchedulerArgs {
                deps: args.tasks.clone(),
                sweep: args.scheduler_sweep,
            };
            let (actor, _) = Actor::spawn_linked(None, SchedulerRegistry, scheduler, root).await?;
            actor.get_cell()
        }
        SupervisorKind::Events => {
            let deps = args.events.clone();
            let (actor, _) = Actor::spawn_linked(None, DeliveryWorker, deps, root).await?;
            actor.get_cell()
        }
        SupervisorKind::Media => {
            let deps = args.media.clone();
            let (actor, _) = Actor::spawn_linked(None, MediaWorker, deps, root).await?;
            actor.get_cell()
        }
    };
    args.slots.set(kind, Some(&cell));
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
