//! The root of the actor tree and the handle the server holds on to.

use std::sync::{Arc, RwLock};
use std::time::Duration;

use ractor::{
    Actor, ActorCell, ActorProcessingErr, ActorRef, RpcReplyPort, SupervisionEvent, call_t,
};
use tokio::task::JoinHandle;

use crate::channel::ChannelDeps;
use crate::channel_registry::{ChannelRegistry, ChannelRegistryMsg, Channels};
use crate::conversation::Deps;
use crate::live::{Ending, ending};
use crate::registry::{ConversationRegistry, Conversations, RegistryMsg};
use crate::supervisor::{Supervisor, SupervisorSnapshot};

/// The four kinds of live work, each under its own supervisor.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SupervisorKind {
    /// One ChannelActor per active channel.
    Channels,
    /// One ConversationActor per live identity.
    Conversations,
    /// One FlowActor per queued, running or paused flow.
    Flows,
    /// One ScheduledTaskActor per pending task.
    Scheduler,
}

impl SupervisorKind {
    /// Every kind, in start order.
    pub const ALL: [Self; 4] = [
        Self::Channels,
        Self::Conversations,
        Self::Flows,
        Self::Scheduler,
    ];

    /// The supervisor's name under the root.
    pub fn name(self) -> &'static str {
        match self {
            Self::Channels => "channels",
            Self::Conversations => "conversations",
            Self::Flows => "flows",
            Self::Scheduler => "scheduler",
        }
    }

    fn path(self) -> String {
        format!("root/{}", self.name())
    }
}

/// Why the runtime could not start or answer.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    /// An actor failed in `pre_start`.
    #[error("actor failed to start: {0}")]
    Spawn(#[from] ractor::SpawnErr),
    /// The root did not answer in time or is gone.
    #[error("actor runtime did not answer: {0}")]
    Unavailable(String),
}

/// The current registries, replaced when their supervisor restarts.
#[derive(Debug, Default)]
struct Registries {
    conversations: RwLock<Option<ActorRef<RegistryMsg>>>,
    channels: RwLock<Option<ActorRef<ChannelRegistryMsg>>>,
}

type RegistrySlot = Arc<Registries>;

/// Handle on the running actor tree.
#[derive(Debug)]
pub struct ActorRuntime {
    root: ActorRef<RootMsg>,
    db: parley_persistence::DatabaseConnection,
    registry: RegistrySlot,
    turn_timeout: Duration,
    /// Taken by the first [`ActorRuntime::shutdown`].
    join: std::sync::Mutex<Option<JoinHandle<()>>>,
}

impl ActorRuntime {
    /// Starts the root supervisor and its four children.
    ///
    /// # Errors
    /// Fails when an actor cannot start.
    pub async fn start(deps: Deps, channel_deps: ChannelDeps) -> Result<Self, RuntimeError> {
        let registry: RegistrySlot = Arc::new(Registries::default());
        let turn_timeout = deps.settings.turn_timeout;
        let db = deps.db.clone();
        let args = RootArgs {
            deps: Arc::new(deps),
            channel_deps: Arc::new(channel_deps),
            registry: registry.clone(),
        };
        let (root, join) = Actor::spawn(None, Root, args).await?;
        tracing::info!(actor = "root", "actor runtime started");
        Ok(Self {
            root,
            db,
            registry,
            turn_timeout,
            join: std::sync::Mutex::new(Some(join)),
        })
    }

    /// The handle on the conversation actors.
    ///
    /// # Errors
    /// Fails while the conversations supervisor is restarting.
    pub fn conversations(&self) -> Result<Conversations, RuntimeError> {
        let slot = self
            .registry
            .conversations
            .read()
            .map_err(|_| RuntimeError::Unavailable("registry lock poisoned".to_owned()))?;
        slot.clone()
            .map(|registry| Conversations::new(registry, self.turn_timeout))
            .ok_or_else(|| {
                RuntimeError::Unavailable("conversations supervisor restarting".to_owned())
            })
    }

    /// The database the actors use.
    pub fn db(&self) -> &parley_persistence::DatabaseConnection {
        &self.db
    }

    /// The handle on the channel actors.
    ///
    /// # Errors
    /// Fails while the channels supervisor is restarting.
    pub fn channels(&self) -> Result<Channels, RuntimeError> {
        let slot = self
            .registry
            .channels
            .read()
            .map_err(|_| RuntimeError::Unavailable("registry lock poisoned".to_owned()))?;
        slot.clone()
            .map(Channels::new)
            .ok_or_else(|| RuntimeError::Unavailable("channels supervisor restarting".to_owned()))
    }

    /// The supervisors and how many actors each runs, for operators.
    ///
    /// # Errors
    /// Fails when the root does not answer within five seconds.
    pub async fn tree(&self) -> Result<Vec<SupervisorSnapshot>, RuntimeError> {
        call_t!(self.root, RootMsg::Tree, 5_000)
            .map_err(|e| RuntimeError::Unavailable(e.to_string()))
    }

    /// Stops every actor, children first, waiting at most `timeout`. Later calls do nothing.
    pub async fn shutdown(&self, timeout: Duration) {
        let join = match self.join.lock() {
            Ok(mut guard) => guard.take(),
            Err(poisoned) => poisoned.into_inner().take(),
        };
        let Some(join) = join else {
            return;
        };
        if let Err(error) = self
            .root
            .stop_and_wait(Some("shutdown".to_owned()), Some(timeout))
            .await
        {
            tracing::warn!(%error, "actor runtime did not stop in time");
        }
        // The root's task has ended or been told to; its result carries nothing we need.
        let _ = join.await;
        tracing::info!(actor = "root", "actor runtime stopped");
    }

    #[cfg(test)]
    fn root(&self) -> &ActorRef<RootMsg> {
        &self.root
    }
}

/// Behaviour of the root supervisor.
struct Root;

/// What the root starts with.
struct RootArgs {
    deps: Arc<Deps>,
    channel_deps: Arc<ChannelDeps>,
    registry: RegistrySlot,
}

/// State of the root.
struct RootState {
    /// Handed to the conversations supervisor at every (re)start.
    deps: Arc<Deps>,
    /// Handed to the channels supervisor at every (re)start.
    channel_deps: Arc<ChannelDeps>,
    /// Where the live conversations registry is published for the HTTP layer.
    registry: RegistrySlot,
    /// The live child supervisors; a failed one is replaced after a backoff.
    children: Vec<(SupervisorKind, ActorCell)>,
    /// Consecutive restarts per kind, to grow the backoff for a supervisor that keeps failing.
    restarts: std::collections::HashMap<SupervisorKind, u32>,
    /// Set once the root is stopping, so that children ending then are not restarted.
    stopping: bool,
}

/// Messages the root handles.
enum RootMsg {
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
            channel_deps: args.channel_deps,
            registry: args.registry,
            children: Vec::with_capacity(SupervisorKind::ALL.len()),
            restarts: std::collections::HashMap::new(),
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
                        path: kind.path(),
                        live_children: cell.get_children().len(),
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
                        tracing::warn!(actor = %kind.path(), "actor restarted");
                        state.children.push((kind, cell));
                    }
                    Err(error) => {
                        tracing::error!(actor = %kind.path(), %error, "restart failed");
                        schedule_restart(&myself, state, kind);
                    }
                }
            }
            #[cfg(test)]
            RootMsg::CrashChild(kind) => {
                if let Some((_, cell)) = state.children.iter().find(|(k, _)| *k == kind) {
                    cell.send_message(crate::supervisor::SupervisorMsg::Crash)?;
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
        let failure = match ending {
            Ending::Stopped(reason) => reason,
            Ending::Failed(error) => Some(error),
        };
        let Some(index) = state
            .children
            .iter()
            .position(|(_, child)| child.get_id() == cell.get_id())
        else {
            return Ok(());
        };
        let (kind, _) = state.children.remove(index);
        if kind == SupervisorKind::Conversations
            && let Ok(mut slot) = state.registry.conversations.write()
        {
            *slot = None;
        }
        if kind == SupervisorKind::Channels
            && let Ok(mut slot) = state.registry.channels.write()
        {
            *slot = None;
        }
        if state.stopping {
            tracing::info!(actor = %kind.path(), "actor stopped");
            return Ok(());
        }
        tracing::error!(actor = %kind.path(), reason = failure.as_deref().unwrap_or("stopped"), "actor failed");
        schedule_restart(&myself, state, kind);
        Ok(())
    }
}

async fn spawn_child(
    root: &ActorCell,
    kind: SupervisorKind,
    state: &RootState,
) -> Result<ActorCell, ractor::SpawnErr> {
    let cell = match kind {
        SupervisorKind::Conversations => {
            let (registry, _) =
                Actor::spawn_linked(None, ConversationRegistry, state.deps.clone(), root.clone())
                    .await?;
            if let Ok(mut slot) = state.registry.conversations.write() {
                *slot = Some(registry.clone());
            }
            registry.get_cell()
        }
        SupervisorKind::Channels => {
            let (registry, _) = Actor::spawn_linked(
                None,
                ChannelRegistry,
                state.channel_deps.clone(),
                root.clone(),
            )
            .await?;
            if let Ok(mut slot) = state.registry.channels.write() {
                *slot = Some(registry.clone());
            }
            registry.get_cell()
        }
        SupervisorKind::Flows | SupervisorKind::Scheduler => {
            let (child, _) =
                Actor::spawn_linked(None, Supervisor, kind.path(), root.clone()).await?;
            child.get_cell()
        }
    };
    tracing::info!(actor = %kind.path(), "actor spawned");
    Ok(cell)
}

fn schedule_restart(myself: &ActorRef<RootMsg>, state: &mut RootState, kind: SupervisorKind) {
    let attempt = state.restarts.entry(kind).or_insert(0);
    let delay = BASE_BACKOFF
        .saturating_mul(2u32.saturating_pow(*attempt))
        .min(MAX_BACKOFF);
    *attempt = attempt.saturating_add(1);
    myself.send_after(delay, move || RootMsg::Restart(kind));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{channel_deps, deps};

    async fn paths(runtime: &ActorRuntime) -> Vec<String> {
        let mut paths: Vec<String> = runtime
            .tree()
            .await
            .expect("tree")
            .into_iter()
            .map(|s| s.path)
            .collect();
        paths.sort();
        paths
    }

    #[tokio::test]
    async fn the_runtime_starts_the_four_supervisors() {
        let (deps, _dir, _model) = deps().await;
        let channels = channel_deps(&deps);
        let runtime = ActorRuntime::start(deps, channels).await.expect("start");
        assert_eq!(
            paths(&runtime).await,
            [
                "root/channels",
                "root/conversations",
                "root/flows",
                "root/scheduler"
            ]
        );
        runtime.shutdown(Duration::from_secs(5)).await;
    }

    #[tokio::test]
    async fn a_failed_supervisor_is_restarted_and_the_others_are_untouched() {
        let (deps, _dir, _model) = deps().await;
        let channels = channel_deps(&deps);
        let runtime = ActorRuntime::start(deps, channels).await.expect("start");
        let ids = |runtime: &ActorRuntime| {
            let mut ids: Vec<_> = runtime
                .root()
                .get_children()
                .iter()
                .map(ActorCell::get_id)
                .collect();
            ids.sort();
            ids
        };
        let before = ids(&runtime);
        runtime
            .root()
            .send_message(RootMsg::CrashChild(SupervisorKind::Flows))
            .expect("send");

        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        let after = loop {
            let now = ids(&runtime);
            if now.len() == before.len() && now != before {
                break now;
            }
            assert!(tokio::time::Instant::now() < deadline, "not restarted");
            tokio::time::sleep(Duration::from_millis(10)).await;
        };
        let kept = before.iter().filter(|id| after.contains(id)).count();
        assert_eq!(
            kept,
            before.len() - 1,
            "only the failed supervisor is replaced"
        );
        assert!(paths(&runtime).await.contains(&"root/flows".to_owned()));
        runtime.shutdown(Duration::from_secs(5)).await;
    }

    #[tokio::test]
    async fn shutdown_stops_every_actor() {
        let (deps, _dir, _model) = deps().await;
        let channels = channel_deps(&deps);
        let runtime = ActorRuntime::start(deps, channels).await.expect("start");
        let root = runtime.root().clone();
        runtime.shutdown(Duration::from_secs(5)).await;
        assert_eq!(root.get_status(), ractor::ActorStatus::Stopped);
    }
}
