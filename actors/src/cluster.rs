//! Who owns what when several nodes share one PostgreSQL database (DESIGN §2 "Cluster").
//!
//! Everything owned (an identity's conversation actor, a channel's actor, a flow, a scheduled
//! task, an event endpoint's lane) has a partition: FNV-1a 64 of its UUID's 16 bytes, modulo
//! the partition count. [`Ownership`] is this node's view of the partitions it holds (kept by
//! the membership loop in `runtime/cluster.rs`): registries, sweeps and start-up work ask it
//! before they touch something, and claims carry its [`Fence`] so that a node that lost a
//! lease cannot commit one. On a single node (the default, and always on SQLite) it owns
//! everything and fences nothing. It also reaches the owner of something held elsewhere
//! (`peers.rs`).

mod peers;

use std::collections::HashSet;
use std::hash::Hasher;
use std::sync::{Arc, RwLock};

use parley_persistence::DatabaseConnection;
pub use parley_persistence::cluster::Fence;
use uuid::Uuid;

pub use self::peers::{
    FORWARDED_HEADER, NOT_OWNER, NOT_OWNER_HEADER, NOTIFY_CHANNEL, PeerError, Topic,
};

/// The partition of `id` among `count`: FNV-1a 64 of its bytes as printed, modulo `count`.
pub fn partition_of(id: Uuid, count: u32) -> i32 {
    let mut hasher = fnv::FnvHasher::default();
    hasher.write(id.as_bytes());
    let partition = hasher.finish() % u64::from(count.max(1));
    i32::try_from(partition).unwrap_or(0)
}

/// How many ids [`Ownership::new_owned_id`] draws at most: with a third of the partitions,
/// none of 256 lands in them once in 10^45.
const OWNED_ID_DRAWS: usize = 256;

/// This node's view of what it owns; cheap to clone.
#[derive(Clone, Debug, Default)]
pub struct Ownership {
    /// `None` on a single node, which owns everything.
    cluster: Option<Arc<Clustered>>,
}

#[derive(Debug)]
struct Clustered {
    node_id: Uuid,
    table: RwLock<Table>,
    peers: peers::Peers,
}

/// The partitions held and where the others are reached.
#[derive(Debug, Default)]
struct Table {
    /// The partition count, fixed at the cluster's first start (0 until read).
    count: u32,
    /// The epoch of each partition this node holds.
    epochs: Vec<Option<i64>>,
    /// The advertised URL of each partition's owner, as last read.
    owners: Vec<Option<String>>,
}

impl Ownership {
    /// A single node: owns everything, fences nothing.
    pub fn single() -> Self {
        Self::default()
    }

    /// A cluster member called `node_id`, owning nothing until its first heartbeat; it
    /// reaches the other nodes with `secret` and reads the leases from `db`.
    pub fn clustered(node_id: Uuid, secret: &str, db: DatabaseConnection) -> Self {
        Self {
            cluster: Some(Arc::new(Clustered {
                node_id,
                table: RwLock::new(Table::default()),
                peers: peers::Peers::new(secret, db),
            })),
        }
    }

    /// Whether this node shares the database with others.
    pub fn is_clustered(&self) -> bool {
        self.cluster.is_some()
    }

    /// This node's id in the cluster.
    pub fn node_id(&self) -> Option<Uuid> {
        self.cluster.as_ref().map(|c| c.node_id)
    }

    fn read<T>(&self, f: impl FnOnce(&Table) -> T) -> Option<T> {
        let cluster = self.cluster.as_ref()?;
        let table = match cluster.table.read() {
            Ok(table) => table,
            Err(poisoned) => poisoned.into_inner(),
        };
        Some(f(&table))
    }

    /// How many partitions the cluster has (0 on a single node).
    pub fn partition_count(&self) -> u32 {
        self.read(|t| t.count).unwrap_or(0)
    }

    /// The partition of `id` (`None` on a single node).
    pub fn partition(&self, id: Uuid) -> Option<i32> {
        self.read(|t| partition_of(id, t.count))
    }

    /// Whether this node owns `id` (always, on a single node).
    pub fn owns(&self, id: Uuid) -> bool {
        self.read(|t| t.epoch_of(id).is_some()).unwrap_or(true)
    }

    /// A new UUID v7 for something this node should own (a new WhatsApp sender's identity,
    /// met by the node that owns their channel): on a cluster, drawn again until its
    /// partition is one this node holds, a few draws with a fair share; any, on a single node
    /// or when this node holds nothing.
    pub fn new_owned_id(&self) -> Uuid {
        let mut id = Uuid::now_v7();
        self.read(|t| {
            for _ in 0..OWNED_ID_DRAWS {
                if t.epoch_of(id).is_some() {
                    break;
                }
                id = Uuid::now_v7();
            }
        });
        id
    }

    /// The fence a claim of `id` carries: `None` on a single node; on a cluster, the lease
    /// this node holds for its partition (one that can never match when it holds none).
    pub fn fence(&self, id: Uuid) -> Option<Fence> {
        let cluster = self.cluster.as_ref()?;
        self.read(|t| Fence {
            partition: partition_of(id, t.count),
            node_id: cluster.node_id,
            epoch: t.epoch_of(id).unwrap_or(-1),
        })
    }

    /// The URL of the node that owns `id`, as last read (`None` when unknown or here).
    pub fn owner_url(&self, id: Uuid) -> Option<String> {
        self.read(|t| {
            let partition = usize::try_from(partition_of(id, t.count)).ok()?;
            t.owners.get(partition).cloned().flatten()
        })
        .flatten()
    }

    /// Keeps of `ids` those this node owns.
    pub fn keep_owned<T>(&self, items: Vec<T>, id: impl Fn(&T) -> Uuid) -> Vec<T> {
        if self.cluster.is_none() {
            return items;
        }
        items
            .into_iter()
            .filter(|item| self.owns(id(item)))
            .collect()
    }

    /// Of `partitions`, whether `id` falls in one (always true on a single node).
    pub fn in_partitions(&self, id: Uuid, partitions: &HashSet<i32>) -> bool {
        self.read(|t| partitions.contains(&partition_of(id, t.count)))
            .unwrap_or(true)
    }

    /// The partitions held now, with their epochs.
    pub fn held(&self) -> Vec<(i32, i64)> {
        self.read(|t| {
            t.epochs
                .iter()
                .enumerate()
                .filter_map(|(p, e)| Some((i32::try_from(p).ok()?, (*e)?)))
                .collect()
        })
        .unwrap_or_default()
    }

    /// Sets the partition count (once read from the database).
    pub fn set_count(&self, count: u32) {
        self.write(|t| {
            t.count = count;
            t.epochs = vec![None; count as usize];
            t.owners = vec![None; count as usize];
        });
    }

    /// Records the partitions held now, with their epochs.
    pub fn set_held(&self, held: &[(i32, i64)]) {
        self.write(|t| {
            t.epochs.iter_mut().for_each(|e| *e = None);
            for &(partition, epoch) in held {
                if let Some(slot) = usize::try_from(partition)
                    .ok()
                    .and_then(|p| t.epochs.get_mut(p))
                {
                    *slot = Some(epoch);
                }
            }
        });
    }

    /// Records where each partition's owner is reached.
    pub fn set_owners(&self, owners: &[(i32, String)]) {
        self.write(|t| {
            t.owners.iter_mut().for_each(|o| *o = None);
            for (partition, url) in owners {
                if let Some(slot) = usize::try_from(*partition)
                    .ok()
                    .and_then(|p| t.owners.get_mut(p))
                {
                    *slot = Some(url.clone());
                }
            }
        });
    }

    fn write(&self, f: impl FnOnce(&mut Table)) {
        if let Some(cluster) = &self.cluster {
            let mut table = match cluster.table.write() {
                Ok(table) => table,
                Err(poisoned) => poisoned.into_inner(),
            };
            f(&mut table);
        }
    }
}

impl Table {
    fn epoch_of(&self, id: Uuid) -> Option<i64> {
        let partition = usize::try_from(partition_of(id, self.count)).ok()?;
        self.epochs.get(partition).copied().flatten()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partitions_are_fnv1a_of_the_uuid_bytes_modulo_the_count() {
        // FNV-1a 64 of sixteen zero bytes, worked by hand from its definition.
        let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
        for _ in 0..16 {
            hash ^= 0;
            hash = hash.wrapping_mul(0x0100_0000_01b3);
        }
        let expected = i32::try_from(hash % 64).expect("below 64");
        assert_eq!(partition_of(Uuid::nil(), 64), expected);
        let id = Uuid::now_v7();
        assert!((0..64).contains(&partition_of(id, 64)));
        assert_eq!(partition_of(id, 1), 0);
    }

    #[test]
    fn a_single_node_owns_everything_and_fences_nothing() {
        let single = Ownership::single();
        let id = Uuid::now_v7();
        assert!(single.owns(id));
        assert_eq!(single.fence(id), None);
    }

    #[test]
    fn a_cluster_member_owns_only_the_partitions_it_holds() {
        crate::llm::install_crypto_provider();
        let node = Uuid::now_v7();
        let db = parley_persistence::DatabaseConnection::default();
        let ownership = Ownership::clustered(node, "secret", db);
        ownership.set_count(4);
        let id = Uuid::now_v7();
        let partition = partition_of(id, 4);
        assert!(!ownership.owns(id));
        assert_eq!(ownership.fence(id).map(|f| f.epoch), Some(-1));
        ownership.set_held(&[(partition, 7)]);
        assert!(ownership.owns(id));
        assert_eq!(
            ownership.fence(id),
            Some(Fence {
                partition,
                node_id: node,
                epoch: 7
            })
        );
    }

    #[test]
    fn an_id_drawn_to_be_owned_here_lands_in_a_partition_held_here() {
        crate::llm::install_crypto_provider();
        let db = parley_persistence::DatabaseConnection::default();
        let ownership = Ownership::clustered(Uuid::now_v7(), "secret", db);
        ownership.set_count(16);
        ownership.set_held(&[(3, 1), (11, 1)]);
        for _ in 0..200 {
            let id = ownership.new_owned_id();
            assert!(ownership.owns(id), "{id} in {}", partition_of(id, 16));
            assert_eq!(id.get_version_num(), 7);
        }
        // Holding nothing (draining), it still answers a new id.
        ownership.set_held(&[]);
        assert_eq!(ownership.new_owned_id().get_version_num(), 7);
        assert_eq!(Ownership::single().new_owned_id().get_version_num(), 7);
    }
}
