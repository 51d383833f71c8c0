//! Placement: where work runs when several nodes share one PostgreSQL database (DESIGN §2
//! "Cluster", "Placement in one home"). This module alone decides it.
//!
//! Everything owned (an identity's conversation actor, a channel's actor, a flow, a scheduled
//! task, an event endpoint's lane) has a partition: FNV-1a 64 of its UUID's 16 bytes, modulo
//! the partition count. Three parts:
//!
//! - [`PartitionTable`] (`table.rs`): which partitions this node holds and where the others'
//!   owners are reached; pure, kept by the membership loop (`runtime/cluster.rs`).
//! - the peer client (`peers.rs`): a [`Call`] run on the node that owns its id, through the
//!   one peer route, with the only retry after `not_owner`.
//! - [`News`] (`news.rs`): what one node tells the others, typed, encoded and decoded once.
//!
//! [`Placement`] holds the three. A registry handle asks it to run a call ([`Placement::call`],
//! [`Placement::stream`]) or to pass something on ([`Placement::notify`]), giving the local
//! part and the call that reaches the owner: the placement picks. Registries and sweeps read
//! the table to keep only what this node owns, and claims carry its [`Fence`]. On a single
//! node (the default, and always on SQLite) the table owns everything and fences nothing, and
//! every choice is a branch.

mod news;
mod peers;
mod table;

use std::collections::HashSet;
use std::sync::{Arc, RwLock};

use parley_persistence::{DatabaseConnection, PersistenceError, cluster};
use tokio::sync::mpsc;
use uuid::Uuid;

pub use self::news::{NOTIFY_CHANNEL, News, Told};
pub use self::peers::{
    Call, NOT_OWNER, NOT_OWNER_HEADER, PEER_ROUTE, PEER_SECRET_HEADER, PeerError, StreamLine,
    StreamedCall,
};
pub use self::table::{Fence, PartitionTable, partition_of};
use crate::changes::{Beyond, Change};

/// Where work runs; cheap to clone.
#[derive(Clone, Debug)]
pub struct Placement {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    table: RwLock<PartitionTable>,
    /// `None` on a single node.
    cluster: Option<Clustered>,
}

/// What a cluster member has beyond its table.
#[derive(Debug)]
struct Clustered {
    /// The leases and the owners' URLs are read from it.
    db: DatabaseConnection,
    peers: peers::Peers,
    news: Arc<news::Publisher>,
}

/// A streamed call's answer on the owner: one JSON line per piece, then the answer's.
pub type LineStream = std::pin::Pin<Box<dyn futures_util::Stream<Item = String> + Send>>;

fn line<T: serde::Serialize>(value: &T) -> String {
    let mut line = serde_json::to_string(value).unwrap_or_default();
    line.push('\n');
    line
}

/// Why the owner did not answer a call sent to this node: it does not own the id (any more).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NotOwnerHere;

impl Placement {
    /// A single node: owns everything, fences nothing, tells no one.
    pub fn single() -> Self {
        Self {
            inner: Arc::new(Inner {
                table: RwLock::new(PartitionTable::single()),
                cluster: None,
            }),
        }
    }

    /// A cluster member called `node_id`, owning nothing until its first heartbeat; it
    /// reaches the other nodes with `secret` and reads the leases from `db`.
    pub fn clustered(node_id: Uuid, secret: &str, db: DatabaseConnection) -> Self {
        Self {
            inner: Arc::new(Inner {
                table: RwLock::new(PartitionTable::member(node_id)),
                cluster: Some(Clustered {
                    peers: peers::Peers::new(secret),
                    news: Arc::new(news::Publisher::new(node_id, db.clone())),
                    db,
                }),
            }),
        }
    }

    fn read<T>(&self, f: impl FnOnce(&PartitionTable) -> T) -> T {
        match self.inner.table.read() {
            Ok(table) => f(&table),
            Err(poisoned) => f(&poisoned.into_inner()),
        }
    }

    fn write(&self, f: impl FnOnce(&mut PartitionTable)) {
        match self.inner.table.write() {
            Ok(mut table) => f(&mut table),
            Err(poisoned) => f(&mut poisoned.into_inner()),
        }
    }

    // --- Choosing where work runs -----------------------------------------------------------

    /// Runs `call` where it belongs: `here` (this node's part) when this node owns the call's
    /// id, or on its owner through the peer route. A `here` that finds the id moved between
    /// the check and the work (a rebalance) is followed by the owner's answer.
    pub async fn call<C: Call>(
        &self,
        call: &C,
        here: impl Future<Output = C::Answer>,
    ) -> C::Answer {
        match self.here_first(call, here).await {
            Some(answer) => answer,
            None => self.at_owner(call).await,
        }
    }

    /// As [`Placement::call`], for a call whose pieces `sink` hears as they come, wherever it
    /// runs (`here` is given the same sink).
    pub async fn stream<C: StreamedCall>(
        &self,
        call: &C,
        sink: &mpsc::Sender<C::Line>,
        here: impl Future<Output = C::Answer>,
    ) -> C::Answer {
        match self.here_first(call, here).await {
            Some(answer) => answer,
            None => self.streamed_at_owner(call, sink).await,
        }
    }

    /// `here`'s answer when this node owns the call's id and still did when it ran; `None`
    /// when the owner elsewhere must answer.
    async fn here_first<C: Call>(
        &self,
        call: &C,
        here: impl Future<Output = C::Answer>,
    ) -> Option<C::Answer> {
        if !self.owns(call.owner_key()) {
            return None;
        }
        let answer = here.await;
        (!C::is_not_owner(&answer)).then_some(answer)
    }

    /// Runs `here` when this node owns `id`; otherwise tells the others `news` (its owner
    /// acts on it). For what needs no answer: a flow or task that changed, an event to read.
    pub fn notify(&self, id: Uuid, here: impl FnOnce(), news: impl FnOnce() -> News) {
        if self.owns(id) {
            here();
        } else {
            self.tell(news());
        }
    }

    /// Runs `here` when this node owns `id`; nothing otherwise (its owner does it).
    pub fn only_here(&self, id: Uuid, here: impl FnOnce()) {
        if self.owns(id) {
            here();
        }
    }

    /// On the owner, the answer to a call another node sent: `here` when this node owns the
    /// call's id (still, after `here` ran), [`NotOwnerHere`] otherwise, so that the caller
    /// reads the leases again and asks the new owner.
    ///
    /// # Errors
    /// [`NotOwnerHere`] (see above).
    pub async fn serve<C: Call>(
        &self,
        call: &C,
        here: impl Future<Output = C::Answer>,
    ) -> Result<C::Wire, NotOwnerHere> {
        if !self.owns(call.owner_key()) {
            return Err(NotOwnerHere);
        }
        let answer = here.await;
        if C::is_not_owner(&answer) {
            return Err(NotOwnerHere);
        }
        Ok(C::into_wire(answer))
    }

    /// On the owner, a streamed call another node sent: `here` runs in a task of its own (a
    /// caller that goes away does not stop it) and is given the sink of its pieces; the answer
    /// is one JSON line per piece, then the last line with the answer. [`NotOwnerHere`] when
    /// this node does not own the call's id.
    ///
    /// # Errors
    /// [`NotOwnerHere`] (see above).
    pub fn serve_streamed<C, F>(
        &self,
        call: &C,
        here: impl FnOnce(mpsc::Sender<C::Line>) -> F,
    ) -> Result<LineStream, NotOwnerHere>
    where
        C: StreamedCall,
        C::Answer: 'static,
        C::Wire: 'static,
        F: Future<Output = C::Answer> + Send + 'static,
    {
        if !self.owns(call.owner_key()) {
            return Err(NotOwnerHere);
        }
        let (sink, pieces) = mpsc::channel::<C::Line>(256);
        let task = tokio::spawn(here(sink));
        let relay = futures_util::stream::unfold(Some((pieces, task)), |relay| async move {
            let (mut pieces, task) = relay?;
            if let Some(piece) = pieces.recv().await {
                let line = line(&StreamLine::<C::Line, C::Wire>::Line(piece));
                return Some((line, Some((pieces, task))));
            }
            let answer = match task.await {
                Ok(answer) => C::into_wire(answer),
                Err(error) => {
                    C::into_wire(C::unreachable(PeerError::Unreachable(error.to_string())))
                }
            };
            Some((line(&StreamLine::<C::Line, C::Wire>::End(answer)), None))
        });
        Ok(Box::pin(relay))
    }

    /// Whether `given` is the cluster's shared secret (never, on a single node).
    pub fn is_peer_secret(&self, given: &[u8]) -> bool {
        self.inner
            .cluster
            .as_ref()
            .is_some_and(|c| c.peers.accepts(given))
    }

    // --- The table, for registries, sweeps and claims ---------------------------------------

    /// Whether this node owns `id` (always, on a single node).
    pub fn owns(&self, id: Uuid) -> bool {
        self.read(|t| t.owns(id))
    }

    /// The fence a claim of `id` carries (`None` on a single node).
    pub fn fence(&self, id: Uuid) -> Option<Fence> {
        self.read(|t| t.fence(id))
    }

    /// A new UUID v7 in the partition of `other`, so that the two always share an owner (see
    /// [`PartitionTable::new_id_beside`]).
    pub fn new_id_beside(&self, other: Uuid) -> Uuid {
        self.read(|t| t.new_id_beside(other))
    }

    /// Keeps of `items` those this node owns.
    pub fn keep_owned<T>(&self, items: Vec<T>, id: impl Fn(&T) -> Uuid) -> Vec<T> {
        if !self.is_clustered() {
            return items;
        }
        self.read(|t| items.into_iter().filter(|item| t.owns(id(item))).collect())
    }

    /// Of `partitions`, whether `id` falls in one (always true on a single node).
    pub fn in_partitions(&self, id: Uuid, partitions: &HashSet<i32>) -> bool {
        self.read(|t| t.in_partitions(id, partitions))
    }

    /// Whether this node shares the database with others.
    pub fn is_clustered(&self) -> bool {
        self.inner.cluster.is_some()
    }

    /// This node's id in the cluster (`None` on a single node).
    pub fn node_id(&self) -> Option<Uuid> {
        self.read(PartitionTable::node_id)
    }

    // --- Kept by the membership loop --------------------------------------------------------

    /// How many partitions the cluster has (0 on a single node).
    pub fn partition_count(&self) -> u32 {
        self.read(PartitionTable::count)
    }

    /// The partitions held now, with their epochs.
    pub fn held(&self) -> Vec<(i32, i64)> {
        self.read(PartitionTable::held)
    }

    /// Sets the partition count (once read from the database).
    pub fn set_count(&self, count: u32) {
        self.write(|t| t.set_count(count));
    }

    /// Records the partitions held now, with their epochs.
    pub fn set_held(&self, held: &[(i32, i64)]) {
        self.write(|t| t.set_held(held));
    }

    /// Reads where every partition's owner is reached again.
    pub async fn refresh_owners(&self) {
        let Some(cluster) = self.inner.cluster.as_ref() else {
            return;
        };
        match cluster::owners(&cluster.db).await {
            Ok(owners) => {
                let owners: Vec<(i32, String)> = owners
                    .into_iter()
                    .map(|o| (o.partition, o.advertise_url))
                    .collect();
                self.write(|t| t.set_owners(&owners));
            }
            Err(error) => tracing::warn!(%error, "the partitions' owners could not be read"),
        }
    }

    // --- News -------------------------------------------------------------------------------

    /// Tells every other node `news` (in the background; nothing waits for it). Nothing, on a
    /// single node.
    pub fn tell(&self, news: News) {
        if let Some(cluster) = self.inner.cluster.as_ref() {
            cluster.news.tell(news);
        }
    }

    /// Tells every other node `news` now, waiting for it to be published (a node leaving).
    ///
    /// # Errors
    /// The database's.
    pub async fn tell_now(&self, news: News) -> Result<(), PersistenceError> {
        match self.inner.cluster.as_ref() {
            Some(cluster) => cluster.news.tell_now(news).await,
            None => Ok(()),
        }
    }

    /// The news another node told (`None` for this node's own, or news this release cannot
    /// read).
    pub fn heard(&self, payload: &str) -> Option<News> {
        let told = Told::decode(payload)?;
        (Some(told.from) != self.node_id()).then_some(told.news)
    }
}

impl Beyond for Placement {
    /// Publishes `change` to the other nodes, whose listeners hear it as this node's did;
    /// messages stored for an identity owned here matter only to its actor here.
    fn publish(&self, change: &Change) {
        if !self.is_clustered() {
            return;
        }
        if let Change::Messages { identity_id, .. } = change
            && self.owns(*identity_id)
        {
            return;
        }
        self.tell(News::Change {
            change: change.clone(),
        });
    }
}
