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
mod root;

pub use self::cluster::{ClusterSettings, Membership};

use std::sync::Arc;
use std::time::Duration;

use parley_persistence::channels::VerifiedNumber;
use parley_persistence::identities::ContactLookups;
use parley_persistence::{
    DatabaseConnection, GroupCommit, MessageStatus, PersistenceError, deliveries,
};
use ractor::{ActorRef, call_t};
use uuid::Uuid;

use self::root::{Root, RootArgs, RootMsg, Slots};
use crate::changes::Announcer;
use crate::channel::{ChannelDeps, Channels};
use crate::conversation::ConversationDeps;
use crate::conversation::registry::Conversations;
use crate::events::delivery::DeliveryDeps;
use crate::events::{Events, MessageTold};
use crate::flow::{FlowDeps, Flows};
use crate::inbound::InboundDeps;
use crate::inbound::worker::{Inbound, InboundSettings};
use crate::mcp::McpHub;
use crate::outbound::{Outbox, Reports};
use crate::scheduler::{Scheduler, TaskDeps};
use crate::store::Store;
use crate::tree::{ActorPath, RuntimeError, SupervisorKind, SupervisorSnapshot};
use crate::whatsapp::GraphError;

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
    /// Runs kept per task; older ones are deleted as new ones are recorded.
    pub scheduler_runs_kept: u64,
    /// What the event webhooks' delivery actor needs (its `events` is the routes every
    /// writer of a fact shares).
    pub events: DeliveryDeps,
}

/// The handles of the running tree, each reaching its supervisor's successor after a restart.
#[derive(Clone, Debug)]
struct Handles {
    conversations: Conversations,
    channels: Channels,
    inbound: Inbound,
    flows: Flows,
    scheduler: Scheduler,
    outbox: Outbox,
    store: Store,
    changes: Announcer,
    reports: Reports,
    events: Events,
}

/// Handle on the running actor tree.
#[derive(Debug)]
pub struct ActorRuntime {
    root: ActorRef<RootMsg>,
    handles: Handles,
    db: DatabaseConnection,
    writer: GroupCommit,
    mcp: Arc<McpHub>,
    /// Meta's Graph API, for calls that come before any channel actor exists.
    graph: crate::whatsapp::GraphClient,
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
            db: deps.conversations.db.clone(),
            writer: deps.conversations.writer.clone(),
            mcp: deps.conversations.mcp.clone(),
            graph: deps.channels.graph.clone(),
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

    /// Which partitions this node owns (everything, on a single node), and how the owners of
    /// the rest are reached.
    pub fn ownership(&self) -> &crate::cluster::Ownership {
        self.handles.conversations.ownership()
    }

    /// The MCP servers' client: listing tools for the API; turns use the same one.
    pub fn mcp(&self) -> Arc<McpHub> {
        self.mcp.clone()
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

    /// After a restart: outbound messages caught mid-send are failed (`interrupted`, never
    /// sent twice), and outbound messages stored but not yet sent are sent, as what they are
    /// (a template stays a template). Unanswered webhook events are picked up by the inbound
    /// worker, however many there are.
    ///
    /// # Errors
    /// Fails on a database error.
    pub async fn resume(&self) -> Result<(), PersistenceError> {
        let ownership = self.ownership();
        if !ownership.is_clustered() {
            return self.resume_channels(None).await;
        }
        // A cluster node resumes the channels it owns; those it takes over later are
        // resumed by the membership loop.
        let ids = parley_persistence::channels::all_ids(&self.db).await?;
        self.resume_channels(Some(ownership.keep_owned(ids, |id| *id)))
            .await
    }

    /// Resumes the outbound side of `channels` (all, for `None`): messages caught mid-send
    /// are failed `interrupted`, those pending are sent.
    ///
    /// # Errors
    /// Fails on a database error.
    pub async fn resume_channels(
        &self,
        channels: Option<Vec<Uuid>>,
    ) -> Result<(), PersistenceError> {
        let interrupted = self.fail_interrupted(channels.as_deref()).await?;
        if interrupted > 0 {
            tracing::warn!(
                interrupted,
                "outbound messages caught mid-send at the last stop were marked failed"
            );
        }
        self.handles.outbox.resume_pending(channels);
        Ok(())
    }

    /// Fails the messages a stop caught mid-send (on `channels`, or all), each with its
    /// `message.failed` event, in one transaction; answers how many.
    async fn fail_interrupted(&self, channels: Option<&[Uuid]>) -> Result<usize, PersistenceError> {
        let events = &self.handles.events;
        let now = parley_persistence::clock::now();
        let txn = parley_persistence::begin_write(&self.db).await?;
        let caught = deliveries::fail_interrupted(&txn, channels).await?;
        let mut told = false;
        for message in &caught {
            let identity_id = crate::whatsapp::Outgoing::from_stored(message.outbound.as_ref())
                .and_then(|outgoing| outgoing.identity_id);
            let error = deliveries::interrupted_error();
            let about = MessageTold {
                workspace_id: message.workspace_id,
                message_id: message.id,
                channel_id: message.channel_id,
                identity_id,
                platform_message_id: message.platform_message_id.as_deref(),
                error: Some(&error),
            };
            let event = events.message(MessageStatus::Failed, about);
            if let Some(event) = event {
                event.write(&txn, now).await?;
                told = true;
            }
        }
        txn.commit().await?;
        if told {
            events.wake();
        }
        Ok(caught.len())
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
                SupervisorKind::Events => 0,
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

/// Builds every handle on `slots` and what the root hands each supervisor when it starts it.
fn wire(deps: &RuntimeDeps, slots: &Slots) -> (Handles, RootArgs) {
    let db = deps.conversations.db.clone();
    let settings = &deps.conversations.settings;
    let changes = Announcer::new(deps.channels.ownership.clone());
    let channels = Channels::new(slots.channels.clone(), deps.channels.ownership.clone());
    let conversations = Conversations::new(
        slots.conversations.clone(),
        settings.turn_timeout,
        deps.conversations.announced.clone(),
        deps.conversations.ownership.clone(),
    );
    changes.listen(Arc::new(conversations.clone()));
    changes.listen(Arc::new(channels.clone()));
    let outbox = Outbox::new(
        db.clone(),
        deps.conversations.writer.clone(),
        channels.clone(),
        changes.clone(),
        settings.idle_after,
        deps.conversations.events.clone(),
    );
    let ownership = deps.channels.ownership.clone();
    let flows = Flows::new(slots.flows.clone(), db.clone(), ownership.clone());
    let store = Store::new(db.clone(), changes.clone(), deps.conversations.mcp.clone());
    let handles = Handles {
        conversations: conversations.clone(),
        inbound: Inbound::new(slots.inbound.clone(), ownership.clone()),
        scheduler: Scheduler::new(slots.scheduler.clone(), ownership.clone()),
        reports: Reports::start(
            db.clone(),
            Arc::new(flows.clone()),
            deps.conversations.events.clone(),
        ),
        channels,
        outbox: outbox.clone(),
        store: store.clone(),
        changes,
        flows: flows.clone(),
        events: deps.events.events.clone(),
    };
    let args = RootArgs {
        slots: slots.clone(),
        conversations: Arc::new(deps.conversations.clone()),
        channels: Arc::new(deps.channels.clone()),
        inbound_settings: deps.inbound.clone(),
        inbound: InboundDeps {
            db: db.clone(),
            writer: deps.conversations.writer.clone(),
            lookups: ContactLookups::start(db.clone()),
            conversations: conversations.clone(),
            outbox: outbox.clone(),
            stop_words: deps.inbound.stop_words.clone().into(),
        },
        flows: FlowDeps {
            db: db.clone(),
            outbox: outbox.clone(),
            started_at: parley_persistence::clock::now(),
            ownership,
        },
        flows_handle: flows.clone(),
        tasks: TaskDeps {
            db,
            outbox,
            conversations,
            flows,
            store,
            runs_kept: deps.scheduler_runs_kept,
        },
        scheduler_sweep: deps.scheduler_sweep,
        events: Arc::new(deps.events.clone()),
    };
    (handles, args)
}

#[cfg(test)]
mod tests;
