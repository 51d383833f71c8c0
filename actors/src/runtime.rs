//! The top floor: builds the handles every part of the tree talks through, starts the root
//! supervisor, and holds the tree for the server ([`ActorRuntime`]). Nothing below imports it;
//! each actor gets the narrow dependencies it uses (a sender, a writer, the registry it talks
//! to) from here.
//!
//! ```text
//! root
//! ├── channels        one ChannelActor per active channel
//! ├── conversations   one ConversationActor per live identity
//! ├── inbound         the bounded worker answering stored webhook events
//! ├── flows           one FlowActor per queued/running/paused flow
//! ├── scheduler       one ScheduledTaskActor per task due soon
//! └── events          the worker delivering event webhooks
//! ```

mod cluster;
pub mod peer;
mod resume;
mod root;
mod wire;

pub use self::cluster::{ClusterSettings, Membership};

use std::sync::Arc;
use std::time::Duration;

use parley_persistence::channels::VerifiedNumber;
use parley_persistence::{DatabaseConnection, GroupCommit};
use ractor::{ActorRef, call_t};
use uuid::Uuid;

use self::root::{Root, RootMsg, Slots};
use self::wire::{Handles, wire};
use crate::changes::Announcer;
use crate::channel::{ChannelDeps, Channels};
use crate::cluster::Placement;
use crate::conversation::{ConversationDeps, Conversations};
use crate::events::Events;
use crate::events::delivery::DeliveryDeps;
use crate::flow::Flows;
use crate::inbound::Inbound;
use crate::inbound::worker::InboundSettings;
use crate::mcp::McpHub;
use crate::outbound::{Outbox, Reports};
use crate::scheduler::Scheduler;
use crate::store::Store;
use crate::tree::{ActorPath, RuntimeError, SupervisorKind, SupervisorSnapshot};
use crate::whatsapp::GraphError;

/// Everything the actors need, built once from configuration: each part holds the same
/// placement, routes and announcer, handed to it when it was built.
#[derive(Clone, Debug)]
pub struct RuntimeDeps {
    /// Where work runs: every handle, registry and sweep asks it.
    pub placement: Placement,
    /// Where writes announce what they changed (and, on a cluster, publish it to the others).
    pub changes: Announcer,
    /// What conversation actors need.
    pub conversations: ConversationDeps,
    /// What channel actors need.
    pub channels: ChannelDeps,
    /// How the inbound worker paces itself.
    pub inbound: InboundSettings,
    /// How often the scheduler sweeps the tasks table (tasks due within it get an actor).
    pub scheduler_sweep: Duration,
    /// Runs kept per task; older ones are deleted as new ones are recorded.
    pub scheduler_runs_kept: u64,
    /// What the event webhooks' delivery actor needs (its `events` is the routes every
    /// writer of a fact shares).
    pub events: DeliveryDeps,
    /// What the media worker needs (its store is the one `GET /media/{id}` reads).
    pub media: crate::media::MediaDeps,
}

/// Handle on the running actor tree.
#[derive(Debug)]
pub struct ActorRuntime {
    root: ActorRef<RootMsg>,
    handles: Handles,
    placement: Placement,
    db: DatabaseConnection,
    writer: GroupCommit,
    mcp: Arc<McpHub>,
    /// Meta's Graph API, for calls that come before any channel actor exists.
    graph: crate::whatsapp::GraphClient,
    /// Where media files are kept.
    media: crate::media::MediaStore,
    /// Taken by the first [`ActorRuntime::shutdown`].
    join: std::sync::Mutex<Option<tokio::task::JoinHandle<()>>>,
}

impl ActorRuntime {
    /// Builds the handles, starts the root supervisor and its children.
    ///
    /// # Errors
    /// Fails when an actor cannot start.
    pub async fn start(deps: RuntimeDeps) -> Result<Self, RuntimeError> {
        // The delivery actor is published where the routes' handle wakes it.
        let slots = Slots {
            events: deps.events.events.slot().clone(),
            ..Slots::default()
        };
        deps.events
            .events
            .reload(&deps.conversations.db, None)
            .await
            .map_err(|e| RuntimeError::Unavailable(format!("the event webhooks: {e}")))?;
        let (handles, args) = wire(&deps, &slots);
        let (root, join) = ractor::Actor::spawn(None, Root, args).await?;
        tracing::info!(actor = %ActorPath::root(), "actor runtime started");
        Ok(Self {
            root,
            handles,
            placement: deps.placement.clone(),
            db: deps.conversations.db.clone(),
            writer: deps.conversations.writer.clone(),
            mcp: deps.conversations.mcp.clone(),
            graph: deps.channels.graph.clone(),
            media: deps.media.store.clone(),
            join: std::sync::Mutex::new(Some(join)),
        })
    }

    /// The conversation actors.
    pub fn conversations(&self) -> &Conversations {
        &self.handles.conversations
    }

    /// The channel actors.
    pub fn channels(&self) -> &Channels {
        &self.handles.channels
    }

    /// The flow actors; flows are created through them.
    pub fn flows(&self) -> &Flows {
        &self.handles.flows
    }

    /// The scheduler.
    pub fn scheduler(&self) -> &Scheduler {
        &self.handles.scheduler
    }

    /// The inbound worker, which answers stored webhook events.
    pub fn inbound(&self) -> &Inbound {
        &self.handles.inbound
    }

    /// The one way to send a message to a person.
    pub fn outbox(&self) -> &Outbox {
        &self.handles.outbox
    }

    /// Writes that change what actors cache, each announcing itself.
    pub fn store(&self) -> &Store {
        &self.handles.store
    }

    /// Where changes are announced; the front door's caches listen here too.
    pub fn changes(&self) -> &Announcer {
        &self.handles.changes
    }

    /// Which endpoints take which events; told when endpoints change.
    pub fn events(&self) -> &Events {
        &self.handles.events
    }

    /// Applies Meta's delivery reports.
    pub fn reports(&self) -> &Reports {
        &self.handles.reports
    }

    /// This node's id in a cluster (`None` on a single node).
    pub fn node_id(&self) -> Option<Uuid> {
        self.placement.node_id()
    }

    /// The MCP servers' client: listing tools for the API; turns use the same one.
    pub fn mcp(&self) -> Arc<McpHub> {
        self.mcp.clone()
    }

    /// Where media files are kept.
    pub fn media(&self) -> &crate::media::MediaStore {
        &self.media
    }

    /// Meta's Graph API, for what goes to Meta before any actor is involved (an upload).
    pub fn graph(&self) -> &crate::whatsapp::GraphClient {
        &self.graph
    }

    /// The database the actors use.
    pub fn db(&self) -> &DatabaseConnection {
        &self.db
    }

    /// The database's writer: writes handed to it are committed with others' (group commit).
    pub fn writer(&self) -> &GroupCommit {
        &self.writer
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
        let answer = self.graph.number(token, phone_number_id).await?;
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
            let (live, resting) = self.handles.conversations.held_in(workspace).await?;
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
        let handles = &self.handles;
        let mut snapshots = Vec::with_capacity(SupervisorKind::ALL.len());
        for kind in SupervisorKind::ALL {
            let live = match kind {
                SupervisorKind::Channels => handles.channels.live_in(ws).await?,
                // Counted with the resting identities, below.
                SupervisorKind::Conversations => 0,
                SupervisorKind::Inbound => handles.inbound.running_in(ws).await?,
                SupervisorKind::Flows => handles.flows.live_in(ws).await?,
                SupervisorKind::Scheduler => handles.scheduler.live_in(ws).await?,
                // One worker for every workspace.
                SupervisorKind::Events | SupervisorKind::Media => 0,
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
mod tests;
