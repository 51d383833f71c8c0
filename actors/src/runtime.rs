//! The actor tree and the one handle the server holds on to, [`ActorRuntime`]. Everything the
//! rest of Parley asks of live actors goes through its methods: conversations, channels, the
//! outbox, inbound events, cache changes and the operator's view of the tree.
//!
//! ```text
//! root
//! ├── channels        one ChannelActor per active channel
//! ├── conversations   one ConversationActor per live identity
//! ├── inbound         the bounded worker answering stored webhook events
//! ├── flows           one FlowActor per queued/running/paused flow
//! └── scheduler       one ScheduledTaskActor per task due soon
//! ```

mod behind;
mod live;
mod path;
mod root;
mod supervisor;

use std::sync::{Arc, RwLock};
use std::time::Duration;

use parley_persistence::entities::webhook_event;
use parley_persistence::{DatabaseConnection, GroupCommit, PersistenceError, deliveries};
use ractor::{ActorRef, call_t};

pub use self::behind::{BEHIND_BY, spawn_behind};
pub(crate) use self::live::{Ending, LiveActors, ending};
pub use self::path::ActorPath;
use self::root::{Root, RootArgs, RootMsg};
pub use self::supervisor::SupervisorSnapshot;
use crate::changes::Change;
use crate::channel::ChannelDeps;
use crate::channel::registry::{ChannelRegistryMsg, Channels};
use crate::conversation::ConversationDeps;
use crate::conversation::registry::{Conversations, RegistryMsg};
use crate::flow::registry::{FlowRegistryMsg, Flows};
use crate::inbound::worker::{InboundSettings, InboundWorkerMsg};
use crate::mcp::McpHub;
use crate::outbound::Outbox;
use crate::schedule::registry::{Scheduler, SchedulerMsg};
use crate::whatsapp::status::StatusReport;
use crate::whatsapp::{GraphClient, GraphError};
use parley_persistence::channels::VerifiedNumber;
use uuid::Uuid;

/// The kinds of live work, each under its own supervisor.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SupervisorKind {
    /// One ChannelActor per active channel.
    Channels,
    /// One ConversationActor per live identity.
    Conversations,
    /// The worker that answers stored webhook events, a bounded number at a time.
    Inbound,
    /// One FlowActor per queued, running or paused flow.
    Flows,
    /// One ScheduledTaskActor per task due soon.
    Scheduler,
}

impl SupervisorKind {
    /// Every kind, in start order: the inbound worker talks to conversations and channels.
    pub const ALL: [Self; 5] = [
        Self::Channels,
        Self::Conversations,
        Self::Inbound,
        Self::Flows,
        Self::Scheduler,
    ];

    /// The supervisor's name under the root.
    pub fn name(self) -> &'static str {
        match self {
            Self::Channels => "channels",
            Self::Conversations => "conversations",
            Self::Inbound => "inbound",
            Self::Flows => "flows",
            Self::Scheduler => "scheduler",
        }
    }
}

/// Why the runtime could not start or answer.
#[derive(Clone, Debug, thiserror::Error)]
pub enum RuntimeError {
    /// An actor failed to start.
    #[error("actor failed to start: {0}")]
    Spawn(String),
    /// The supervisor is being restarted after a failure.
    #[error("the {} supervisor is restarting", .0.name())]
    Restarting(SupervisorKind),
    /// An actor did not answer in time or is gone.
    #[error("actor runtime did not answer: {0}")]
    Unavailable(String),
}

impl From<ractor::SpawnErr> for RuntimeError {
    fn from(error: ractor::SpawnErr) -> Self {
        Self::Spawn(error.to_string())
    }
}

/// Everything the actors need, built once from configuration.
#[derive(Clone, Debug)]
pub struct RuntimeDeps {
    /// What conversation actors need.
    pub conversations: ConversationDeps,
    /// What channel actors need.
    pub channels: ChannelDeps,
    /// How the inbound worker paces itself.
    pub inbound: InboundSettings,
    /// How often the scheduler sweeps the tasks table (tasks due within it get an actor).
    pub scheduler_sweep: Duration,
}

/// The live supervisors' handles, replaced when a supervisor restarts, and what is needed to
/// reach them. Shared by the runtime, the outbox and the inbound worker.
#[derive(Debug)]
pub(crate) struct Handles {
    pub(crate) db: DatabaseConnection,
    /// The database's writer (group commit).
    pub(crate) writer: GroupCommit,
    /// Meta's Graph API, for calls that come before any channel actor exists.
    graph: GraphClient,
    /// The MCP servers' client.
    mcp: Arc<McpHub>,
    pub(crate) turn_timeout: Duration,
    pub(crate) idle_after: chrono::Duration,
    /// The conversation registry's count of applied changes.
    announced: Arc<crate::conversation::registry::Announced>,
    conversations: RwLock<Option<ActorRef<RegistryMsg>>>,
    channels: RwLock<Option<ActorRef<ChannelRegistryMsg>>>,
    inbound: RwLock<Option<ActorRef<InboundWorkerMsg>>>,
    flows: RwLock<Option<ActorRef<FlowRegistryMsg>>>,
    scheduler: RwLock<Option<ActorRef<SchedulerMsg>>>,
}

impl Handles {
    pub(crate) fn new(deps: &RuntimeDeps) -> Self {
        Self {
            db: deps.conversations.db.clone(),
            writer: deps.conversations.writer.clone(),
            graph: deps.channels.graph.clone(),
            mcp: deps.conversations.mcp.clone(),
            turn_timeout: deps.conversations.settings.turn_timeout,
            idle_after: deps.conversations.settings.idle_after,
            announced: deps.conversations.announced.clone(),
            conversations: RwLock::new(None),
            channels: RwLock::new(None),
            inbound: RwLock::new(None),
            flows: RwLock::new(None),
            scheduler: RwLock::new(None),
        }
    }

    fn read<T: Clone>(slot: &RwLock<Option<T>>, kind: SupervisorKind) -> Result<T, RuntimeError> {
        let guard = slot
            .read()
            .map_err(|_| RuntimeError::Unavailable("a handle lock is poisoned".to_owned()))?;
        guard.clone().ok_or(RuntimeError::Restarting(kind))
    }

    fn publish<T>(slot: &RwLock<Option<T>>, value: Option<T>) {
        match slot.write() {
            Ok(mut guard) => *guard = value,
            Err(poisoned) => *poisoned.into_inner() = value,
        }
    }

    /// The handle on the conversation actors.
    pub(crate) fn conversations(&self) -> Result<Conversations, RuntimeError> {
        Self::read(&self.conversations, SupervisorKind::Conversations)
            .map(|registry| Conversations::new(registry, self.turn_timeout, self.announced.clone()))
    }

    /// Tells the identity's conversation actor (if live) that messages were stored for it
    /// elsewhere, the first of them at `since`, so that its next turn reads them.
    pub(crate) fn stored_messages(
        &self,
        workspace_id: i64,
        identity_id: uuid::Uuid,
        since: chrono::DateTime<chrono::Utc>,
    ) {
        if let Ok(conversations) = self.conversations() {
            conversations.changed(&crate::changes::Change::Messages {
                workspace_id,
                identity_id,
                since,
            });
        }
    }

    /// The handle on the channel actors.
    pub(crate) fn channels(&self) -> Result<Channels, RuntimeError> {
        Self::read(&self.channels, SupervisorKind::Channels).map(Channels::new)
    }

    /// The handle on the flow actors.
    pub(crate) fn flows(&self) -> Result<Flows, RuntimeError> {
        Self::read(&self.flows, SupervisorKind::Flows).map(Flows::new)
    }

    /// The handle on the scheduler.
    pub(crate) fn scheduler(&self) -> Result<Scheduler, RuntimeError> {
        Self::read(&self.scheduler, SupervisorKind::Scheduler).map(Scheduler::new)
    }

    fn inbound(&self) -> Result<ActorRef<InboundWorkerMsg>, RuntimeError> {
        Self::read(&self.inbound, SupervisorKind::Inbound)
    }

    /// Records (or, with `None`, forgets) the live supervisor of `kind`.
    pub(crate) fn set(&self, kind: SupervisorKind, cell: Option<&ractor::ActorCell>) {
        match kind {
            SupervisorKind::Conversations => {
                Self::publish(&self.conversations, cell.map(|c| c.clone().into()));
            }
            SupervisorKind::Channels => {
                Self::publish(&self.channels, cell.map(|c| c.clone().into()));
            }
            SupervisorKind::Inbound => {
                Self::publish(&self.inbound, cell.map(|c| c.clone().into()));
            }
            SupervisorKind::Flows => {
                Self::publish(&self.flows, cell.map(|c| c.clone().into()));
            }
            SupervisorKind::Scheduler => {
                Self::publish(&self.scheduler, cell.map(|c| c.clone().into()));
            }
        }
    }
}

/// Handle on the running actor tree.
#[derive(Debug)]
pub struct ActorRuntime {
    root: ActorRef<RootMsg>,
    handles: Arc<Handles>,
    /// Taken by the first [`ActorRuntime::shutdown`].
    join: std::sync::Mutex<Option<tokio::task::JoinHandle<()>>>,
}

impl ActorRuntime {
    /// Starts the root supervisor and its children.
    ///
    /// # Errors
    /// Fails when an actor cannot start.
    pub async fn start(deps: RuntimeDeps) -> Result<Self, RuntimeError> {
        let handles = Arc::new(Handles::new(&deps));
        let args = RootArgs {
            deps: Arc::new(deps),
            handles: handles.clone(),
        };
        let (root, join) = ractor::Actor::spawn(None, Root, args).await?;
        tracing::info!(actor = %ActorPath::root(), "actor runtime started");
        Ok(Self {
            root,
            handles,
            join: std::sync::Mutex::new(Some(join)),
        })
    }

    /// The handle on the conversation actors.
    ///
    /// # Errors
    /// Fails while the conversations supervisor is restarting.
    pub fn conversations(&self) -> Result<Conversations, RuntimeError> {
        self.handles.conversations()
    }

    /// The handle on the channel actors.
    ///
    /// # Errors
    /// Fails while the channels supervisor is restarting.
    pub fn channels(&self) -> Result<Channels, RuntimeError> {
        self.handles.channels()
    }

    /// The handle on the flow actors.
    ///
    /// # Errors
    /// Fails while the flows supervisor is restarting.
    pub fn flows(&self) -> Result<Flows, RuntimeError> {
        self.handles.flows()
    }

    /// Applies a delivery report Meta sent about a message of `channel_id`: the message's
    /// status moves forward, and so does a flow recipient's (whose flow hears of it); Meta's
    /// 131050 (the person stopped marketing messages) opts the identity out. `true` when the
    /// message's status moved.
    ///
    /// # Errors
    /// Fails on a database error.
    pub async fn apply_status(
        &self,
        channel_id: Uuid,
        report: &StatusReport,
    ) -> Result<bool, PersistenceError> {
        crate::flow::apply_report(&self.handles, channel_id, report).await
    }

    /// The handle on the scheduler.
    ///
    /// # Errors
    /// Fails while the scheduler is restarting.
    pub fn scheduler(&self) -> Result<Scheduler, RuntimeError> {
        self.handles.scheduler()
    }

    /// Creates a flow (and starts it when queued).
    ///
    /// # Errors
    /// Why it was not created.
    pub async fn create_flow(
        &self,
        request: crate::flow::FlowRequest,
    ) -> Result<parley_persistence::entities::flow::Model, crate::flow::CreateFlowError> {
        crate::flow::create(&self.handles, request).await
    }

    /// The one way to send a message to a person.
    pub fn outbox(&self) -> Outbox {
        Outbox::new(self.handles.clone())
    }

    /// The MCP servers' client: listing tools for the API; turns use the same one.
    pub fn mcp(&self) -> Arc<McpHub> {
        self.handles.mcp.clone()
    }

    /// The database the actors use.
    pub fn db(&self) -> &DatabaseConnection {
        &self.handles.db
    }

    /// Asks Meta about `phone_number_id` with `token`, before a live channel is created or
    /// given new credentials: only a token that holds the number may claim it.
    ///
    /// # Errors
    /// Meta's refusal (190 or 100 for credentials that do not hold the number), or why Meta
    /// could not be asked.
    pub async fn verify_number(
        &self,
        token: &str,
        phone_number_id: &str,
    ) -> Result<VerifiedNumber, GraphError> {
        let answer = self.handles.graph.number(token, phone_number_id).await?;
        if answer["id"].as_str() != Some(phone_number_id) {
            return Err(GraphError::Malformed(
                "Meta answered for another number".to_owned(),
            ));
        }
        Ok(VerifiedNumber {
            display_phone_number: answer["display_phone_number"].as_str().map(str::to_owned),
            verified_name: answer["verified_name"].as_str().map(str::to_owned),
        })
    }

    /// The database's writer: writes handed to it are committed with others' (group commit).
    pub fn writer(&self) -> &GroupCommit {
        &self.handles.writer
    }

    /// Hands a freshly stored webhook event to the inbound worker. Nothing is lost when the
    /// worker is busy or restarting: the event is in the database and the worker reads it
    /// from there.
    pub fn dispatch(&self, event: webhook_event::Model) {
        match self.handles.inbound() {
            Ok(worker) => {
                let _ = worker.send_message(InboundWorkerMsg::Stored(Box::new(event)));
            }
            Err(error) => {
                tracing::warn!(%error, event_id = %event.id, "event left for the inbound worker's next sweep")
            }
        }
    }

    /// Something actors may cache changed: every actor that holds it reloads before its next
    /// use. The one place where writes tell the live actors.
    pub fn changed(&self, change: Change) {
        if let Ok(conversations) = self.handles.conversations() {
            conversations.changed(&change);
        }
        if let Ok(channels) = self.handles.channels() {
            channels.changed(&change);
        }
    }

    /// After a restart: outbound messages caught mid-send are failed (`interrupted`, never
    /// sent twice), and outbound messages stored but not yet sent are sent, as what they are
    /// (a template stays a template). Unanswered webhook events are picked up by the inbound
    /// worker, however many there are.
    ///
    /// # Errors
    /// Fails on a database error.
    pub async fn resume(&self) -> Result<(), PersistenceError> {
        let interrupted = deliveries::fail_interrupted(&self.handles.db).await?;
        if interrupted > 0 {
            tracing::warn!(
                interrupted,
                "outbound messages caught mid-send at the last stop were marked failed"
            );
        }
        self.outbox().resume_pending();
        Ok(())
    }

    /// The supervisors and how many actors each runs, for operators.
    ///
    /// # Errors
    /// Fails when the root does not answer within five seconds.
    pub async fn tree(&self) -> Result<Vec<SupervisorSnapshot>, RuntimeError> {
        let mut snapshots = call_t!(self.root, RootMsg::Tree, 5_000)
            .map_err(|e| RuntimeError::Unavailable(e.to_string()))?;
        self.add_resting(&mut snapshots, None).await?;
        Ok(snapshots)
    }

    /// Fills in how many identities have a live actor and how many rest under
    /// `root/conversations`, from one answer of its registry, so that the two add up while
    /// actors rest (the root's count of children, or a count asked for apart, would count an
    /// actor resting in between twice).
    async fn add_resting(
        &self,
        snapshots: &mut [SupervisorSnapshot],
        workspace: Option<i64>,
    ) -> Result<(), RuntimeError> {
        let path = ActorPath::supervisor(SupervisorKind::Conversations).to_string();
        if let Some(conversations) = snapshots.iter_mut().find(|s| s.path == path) {
            let (live, resting) = self.handles.conversations()?.held_in(workspace).await?;
            conversations.live_children = live;
            conversations.resting = Some(resting);
        }
        Ok(())
    }

    /// The supervisors and how many of their actors belong to `workspace`: a workspace
    /// admin's view of the tree, in the same shape as [`ActorRuntime::tree`].
    ///
    /// # Errors
    /// Fails when a supervisor does not answer within five seconds.
    pub async fn tree_of(
        &self,
        workspace_id: i64,
    ) -> Result<Vec<SupervisorSnapshot>, RuntimeError> {
        let ws = Some(workspace_id);
        let mut snapshots = Vec::with_capacity(SupervisorKind::ALL.len());
        for kind in SupervisorKind::ALL {
            let live = match kind {
                SupervisorKind::Channels => self.handles.channels()?.live_in(ws).await?,
                // Counted with the resting identities, below.
                SupervisorKind::Conversations => 0,
                SupervisorKind::Inbound => {
                    let worker = self.handles.inbound()?;
                    call_t!(worker, InboundWorkerMsg::Count, 5_000, ws)
                        .map_err(|e| RuntimeError::Unavailable(e.to_string()))?
                }
                SupervisorKind::Flows => self.handles.flows()?.live_in(ws).await?,
                SupervisorKind::Scheduler => self.handles.scheduler()?.live_in(ws).await?,
            };
            snapshots.push(SupervisorSnapshot {
                path: ActorPath::supervisor(kind).to_string(),
                live_children: live,
                resting: None,
            });
        }
        self.add_resting(&mut snapshots, ws).await?;
        Ok(snapshots)
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
        tracing::info!(actor = %ActorPath::root(), "actor runtime stopped");
    }

    #[cfg(test)]
    pub(crate) fn root(&self) -> &ActorRef<RootMsg> {
        &self.root
    }
}

#[cfg(test)]
mod tests {
    use ractor::ActorCell;

    use super::*;
    use crate::test_support::runtime_deps;

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
    async fn the_runtime_starts_every_supervisor() {
        let (deps, _dir, _model) = runtime_deps().await;
        let runtime = ActorRuntime::start(deps).await.expect("start");
        assert_eq!(
            paths(&runtime).await,
            [
                "root/channels",
                "root/conversations",
                "root/flows",
                "root/inbound",
                "root/scheduler"
            ]
        );
        runtime.shutdown(Duration::from_secs(5)).await;
    }

    #[tokio::test]
    async fn a_failed_supervisor_is_restarted_and_the_others_are_untouched() {
        let (deps, _dir, _model) = runtime_deps().await;
        let runtime = ActorRuntime::start(deps).await.expect("start");
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
            .send_message(RootMsg::CrashChild(SupervisorKind::Scheduler))
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
        assert!(paths(&runtime).await.contains(&"root/scheduler".to_owned()));
        runtime.shutdown(Duration::from_secs(5)).await;
    }

    #[tokio::test]
    async fn shutdown_stops_every_actor() {
        let (deps, _dir, _model) = runtime_deps().await;
        let runtime = ActorRuntime::start(deps).await.expect("start");
        let root = runtime.root().clone();
        runtime.shutdown(Duration::from_secs(5)).await;
        assert_eq!(root.get_status(), ractor::ActorStatus::Stopped);
    }
}
