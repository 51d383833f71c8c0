//! A cluster node's membership (DESIGN §2 "Cluster"): it heartbeats in `cluster_nodes`, renews
//! its partition leases, takes free or expired partitions up to its fair share
//! (`ceil(partitions / alive nodes)`), hands extras back (its actors stop first, the lease is
//! released at the next beat), and tells the registries when what it owns changed, so that a
//! takeover resumes exactly as a restart does. It also listens for the other nodes' news
//! (`LISTEN parley_cluster`): events stored for its channels, flows and tasks created
//! elsewhere, changes to cached facts, and nodes joining or leaving.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use parley_persistence::{DatabaseConnection, PersistenceError, cluster};
use tokio::sync::Notify;
use uuid::Uuid;

use super::ActorRuntime;
use crate::cluster::{NOTIFY_CHANNEL, News, Placement};

/// How a node takes part in the cluster.
#[derive(Clone, Debug)]
pub struct ClusterSettings {
    /// How the other nodes reach this one (`PARLEY_NODE_URL`).
    pub node_url: String,
    /// Partitions at the cluster's first start (fixed afterwards).
    pub partitions: u32,
    /// How often the node heartbeats and renews its leases.
    pub heartbeat: Duration,
    /// How long a lease (and a heartbeat) stands without renewal.
    pub lease_ttl: Duration,
}

/// A node's place in the cluster; [`Membership::join`] before the actor runtime starts,
/// [`Membership::run`] once it has, [`Membership::leave`] after it stopped.
#[derive(Debug)]
pub struct Membership {
    db: DatabaseConnection,
    placement: Placement,
    settings: ClusterSettings,
    state: Mutex<Beat>,
    /// Wakes the heartbeat loop at once (another node joined or left).
    nudge: Notify,
    tasks: Mutex<Vec<tokio::task::JoinHandle<()>>>,
}

/// What the loop remembers between beats.
#[derive(Debug, Default)]
struct Beat {
    /// The partitions held, with their epochs, as of the last beat.
    held: HashMap<i32, i64>,
    /// Extras given up at the last beat: their actors were stopped; released at this one.
    handing_back: Vec<i32>,
    /// Set once the node is leaving: it takes nothing more.
    leaving: bool,
}

/// What one beat changed.
#[derive(Debug, Default)]
struct Moved {
    /// Partitions taken (or taken again under a new epoch): resumed as after a stop.
    gained: HashSet<i32>,
    /// Partitions no longer held.
    lost: usize,
}

impl Membership {
    /// Joins: fixes the partition count at the cluster's first start, heartbeats, and takes
    /// this node's fair share of the partitions, so that the runtime starts with them.
    ///
    /// # Errors
    /// The database's.
    pub async fn join(
        db: DatabaseConnection,
        placement: Placement,
        settings: ClusterSettings,
    ) -> Result<Arc<Self>, PersistenceError> {
        let wanted = i32::try_from(settings.partitions.max(1)).unwrap_or(64);
        let count = cluster::fix_partitions(&db, wanted).await?;
        if count != wanted {
            tracing::warn!(
                stored = count,
                configured = wanted,
                "the cluster's partition count was fixed at its first start; the stored one stands"
            );
        }
        placement.set_count(u32::try_from(count).unwrap_or(64));
        // Every label's line from the start, at 0: a scrape shows no move as none, not as
        // nothing known.
        crate::measure::cluster_takeovers("first", 0);
        crate::measure::cluster_takeovers("moved", 0);
        let membership = Arc::new(Self {
            db,
            placement,
            settings,
            state: Mutex::new(Beat::default()),
            nudge: Notify::new(),
            tasks: Mutex::new(Vec::new()),
        });
        let moved = membership.beat().await?;
        ownership_log(&membership.placement, &moved);
        membership.placement.tell(News::Rebalance);
        Ok(membership)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Beat> {
        match self.state.lock() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        }
    }

    fn ttl_ms(&self) -> u64 {
        u64::try_from(self.settings.lease_ttl.as_millis()).unwrap_or(10_000)
    }

    /// One heartbeat: renew, release what was handed back, take up to the fair share (or
    /// give extras up), and record what is held.
    async fn beat(&self) -> Result<Moved, PersistenceError> {
        let Some(node_id) = self.placement.node_id() else {
            return Ok(Moved::default());
        };
        let ttl = self.ttl_ms();
        cluster::heartbeat(&self.db, node_id, &self.settings.node_url).await?;
        let (handing_back, leaving, before) = {
            let mut state = self.lock();
            let handing_back = std::mem::take(&mut state.handing_back);
            (handing_back, state.leaving, state.held.clone())
        };
        cluster::release(&self.db, node_id, &handing_back).await?;
        let mut held: HashMap<i32, i64> = cluster::renew(&self.db, node_id, ttl)
            .await?
            .into_iter()
            .map(|h| (h.partition, h.epoch))
            .collect();
        let count = i64::from(self.placement.partition_count());
        let alive = cluster::alive_nodes(&self.db, ttl).await?.max(1);
        let share = (count + alive - 1) / alive;
        let have = i64::try_from(held.len()).unwrap_or(i64::MAX);
        let mut giving = Vec::new();
        if leaving {
            giving.extend(held.keys().copied());
        } else if have < share {
            let taken = cluster::take(&self.db, node_id, ttl, share - have).await?;
            let first = taken.iter().filter(|t| t.epoch == 1).count();
            crate::measure::cluster_takeovers("first", first);
            crate::measure::cluster_takeovers("moved", taken.len() - first);
            held.extend(taken.into_iter().map(|t| (t.partition, t.epoch)));
        } else if have > share {
            let mut mine: Vec<i32> = held.keys().copied().collect();
            mine.sort_unstable();
            let extra = usize::try_from(have - share).unwrap_or(0);
            giving.extend(mine.into_iter().rev().take(extra));
        }
        for partition in &giving {
            held.remove(partition);
        }
        let moved = Moved {
            gained: held
                .iter()
                .filter(|(p, e)| before.get(p) != Some(e))
                .map(|(p, _)| *p)
                .collect(),
            lost: before.keys().filter(|p| !held.contains_key(p)).count(),
        };
        {
            let mut state = self.lock();
            state.handing_back = giving;
            state.held.clone_from(&held);
        }
        let pairs: Vec<(i32, i64)> = held.into_iter().collect();
        crate::measure::cluster_partitions(pairs.len());
        self.placement.set_held(&pairs);
        self.placement.refresh_owners().await;
        Ok(moved)
    }

    /// Runs the heartbeat loop and the listener until [`Membership::leave`].
    pub fn run(self: &Arc<Self>, runtime: Arc<ActorRuntime>) {
        let beats = tokio::spawn(self.clone().beats(runtime.clone()));
        let listener = tokio::spawn(self.clone().listen(runtime));
        let mut tasks = match self.tasks.lock() {
            Ok(tasks) => tasks,
            Err(poisoned) => poisoned.into_inner(),
        };
        tasks.push(beats);
        tasks.push(listener);
    }

    async fn beats(self: Arc<Self>, runtime: Arc<ActorRuntime>) {
        loop {
            tokio::select! {
                () = tokio::time::sleep(self.settings.heartbeat) => {}
                () = self.nudge.notified() => {}
            }
            match self.beat().await {
                Ok(moved) => {
                    ownership_log(&self.placement, &moved);
                    apply(&runtime, &self.placement, &moved).await;
                }
                Err(error) => tracing::warn!(%error, "the cluster heartbeat failed"),
            }
        }
    }

    async fn listen(self: Arc<Self>, runtime: Arc<ActorRuntime>) {
        let mut listener = loop {
            match cluster::listen(&self.db, NOTIFY_CHANNEL).await {
                Ok(listener) => break listener,
                Err(error) => tracing::warn!(%error, "could not listen for the other nodes"),
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        };
        loop {
            match listener.recv().await {
                Ok(notification) => self.heard(&runtime, notification.payload()).await,
                Err(error) => {
                    // The listener connects again on the next receive; what was missed is
                    // found by the sweeps.
                    tracing::warn!(%error, "the cluster's notifications were interrupted");
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
            }
        }
    }

    /// Acts on another node's news; what this node does not own is left to its owner.
    async fn heard(&self, runtime: &ActorRuntime, payload: &str) {
        let Some(news) = self.placement.heard(payload) else {
            return;
        };
        let owned = |id: &Uuid| self.placement.owns(*id);
        match news {
            News::InboundStored {
                channel_id,
                event_id,
            } if owned(&channel_id) => runtime.inbound().sweep_now(Some(event_id)),
            // Created, moved, or a report moved one of its recipients: its actor starts or
            // looks again.
            News::Flow { flow_id } if owned(&flow_id) => {
                runtime.flows().changed(flow_id);
                runtime.flows().reported(flow_id);
            }
            News::Task { task_id } if owned(&task_id) => runtime.scheduler().changed(task_id),
            News::Rebalance => self.nudge.notify_one(),
            News::Change { change } => runtime.changes().tell_here(&change),
            News::InboundStored { .. } | News::Flow { .. } | News::Task { .. } => {}
        }
    }

    /// Leaves the cluster after the runtime stopped: every lease is released at once and the
    /// others are told to take them.
    pub async fn leave(&self) {
        self.lock().leaving = true;
        let tasks = match self.tasks.lock() {
            Ok(mut tasks) => std::mem::take(&mut *tasks),
            Err(poisoned) => std::mem::take(&mut *poisoned.into_inner()),
        };
        for task in tasks {
            task.abort();
        }
        if let Some(node_id) = self.placement.node_id() {
            self.placement.set_held(&[]);
            if let Err(error) = cluster::leave(&self.db, node_id).await {
                tracing::warn!(%error, "the partitions were not released; they expire instead");
                return;
            }
            if let Err(error) = self.placement.tell_now(News::Rebalance).await {
                tracing::warn!(%error, "the other nodes were not told this one left");
            }
            tracing::info!(%node_id, "left the cluster; its partitions are free");
        }
    }

    /// Marks the node as leaving: it counts no more towards the others' share, takes nothing
    /// more, and gives up what it holds at its next beat (its actors stop; the leases are
    /// released by [`Membership::leave`] once the runtime stopped, or by the beat after).
    ///
    /// # Errors
    /// The database's.
    pub async fn drain(&self) -> Result<(), PersistenceError> {
        self.lock().leaving = true;
        self.nudge.notify_one();
        match self.placement.node_id() {
            Some(node_id) => cluster::drain(&self.db, node_id).await,
            None => Ok(()),
        }
    }
}

fn ownership_log(placement: &Placement, moved: &Moved) {
    if !moved.gained.is_empty() || moved.lost > 0 {
        tracing::info!(
            gained = moved.gained.len(),
            lost = moved.lost,
            held = placement.held().len(),
            "cluster partitions moved"
        );
    }
}

/// Tells the registries what moved: actors of what is no longer owned stop, and what was
/// gained is resumed as after a stop (messages caught mid-send failed `interrupted`, pending
/// ones sent, events swept, flows and tasks started). Every registry also looks again at each
/// beat, so that news missed while the listener reconnected is found within a beat.
async fn apply(runtime: &ActorRuntime, placement: &Placement, moved: &Moved) {
    runtime.channels().rebalance();
    runtime.flows().rebalance();
    if moved.gained.is_empty() && moved.lost == 0 {
        return;
    }
    runtime.conversations().rebalance();
    let gained = Arc::new(moved.gained.clone());
    runtime.scheduler().rebalance(gained.clone());
    if !gained.is_empty() {
        match parley_persistence::channels::all_ids(runtime.db()).await {
            Ok(ids) => {
                let taken: Vec<Uuid> = ids
                    .into_iter()
                    .filter(|id| placement.in_partitions(*id, &gained))
                    .collect();
                if let Err(error) = runtime.resume_channels(Some(taken)).await {
                    tracing::warn!(%error, "the taken-over channels' messages were not resumed");
                }
            }
            Err(error) => tracing::warn!(%error, "the taken-over channels could not be read"),
        }
        runtime.inbound().sweep_now(None);
    }
}
