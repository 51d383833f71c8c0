//! The partition table: which partitions this node holds (with the epoch of each lease) and
//! where the others' owners are reached, as the membership loop last read them. Pure: no
//! network, no database, no lock; [`super::Placement`] holds it behind one.

use std::collections::HashSet;
use std::hash::Hasher;

pub use parley_persistence::cluster::Fence;
use uuid::Uuid;

/// The partition of `id` among `count`: FNV-1a 64 of its bytes as printed, modulo `count`.
pub fn partition_of(id: Uuid, count: u32) -> i32 {
    let mut hasher = fnv::FnvHasher::default();
    hasher.write(id.as_bytes());
    let partition = hasher.finish() % u64::from(count.max(1));
    i32::try_from(partition).unwrap_or(0)
}

/// How many ids [`PartitionTable::new_owned_id`] draws at most: with a third of the
/// partitions, none of 256 lands in them once in 10^45.
const OWNED_ID_DRAWS: usize = 256;

/// One node's view of the partitions; a single node's owns everything.
#[derive(Clone, Debug, Default)]
pub struct PartitionTable {
    /// This node's id in a cluster; `None` on a single node, which owns everything and fences
    /// nothing.
    node_id: Option<Uuid>,
    /// The partition count, fixed at the cluster's first start (0 until read).
    count: u32,
    /// The epoch of each partition this node holds.
    epochs: Vec<Option<i64>>,
    /// The advertised URL of each partition's owner, as last read.
    owners: Vec<Option<String>>,
}

impl PartitionTable {
    /// A single node's table: it owns everything.
    pub fn single() -> Self {
        Self::default()
    }

    /// The table of cluster member `node_id`, holding nothing until its first heartbeat.
    pub fn member(node_id: Uuid) -> Self {
        Self {
            node_id: Some(node_id),
            ..Self::default()
        }
    }

    /// This node's id in the cluster (`None` on a single node).
    pub fn node_id(&self) -> Option<Uuid> {
        self.node_id
    }

    /// How many partitions the cluster has (0 on a single node).
    pub fn count(&self) -> u32 {
        self.count
    }

    fn epoch_of(&self, id: Uuid) -> Option<i64> {
        let partition = usize::try_from(partition_of(id, self.count)).ok()?;
        self.epochs.get(partition).copied().flatten()
    }

    /// Whether this node owns `id` (always, on a single node).
    pub fn owns(&self, id: Uuid) -> bool {
        self.node_id.is_none() || self.epoch_of(id).is_some()
    }

    /// The URL of the node that owns `id`, as last read (`None` when unknown, or on a single
    /// node).
    pub fn owner_of(&self, id: Uuid) -> Option<&str> {
        self.node_id?;
        let partition = usize::try_from(partition_of(id, self.count)).ok()?;
        self.owners.get(partition)?.as_deref()
    }

    /// The fence a claim of `id` carries: `None` on a single node; on a cluster, the lease
    /// this node holds for its partition (one that can never match when it holds none).
    pub fn fence(&self, id: Uuid) -> Option<Fence> {
        Some(Fence {
            partition: partition_of(id, self.count),
            node_id: self.node_id?,
            epoch: self.epoch_of(id).unwrap_or(-1),
        })
    }

    /// A new UUID v7 for something this node should own (a new WhatsApp sender's identity,
    /// met by the node that owns their channel): on a cluster, drawn again until its
    /// partition is one this node holds, a few draws with a fair share; any, on a single node
    /// or when this node holds nothing.
    pub fn new_owned_id(&self) -> Uuid {
        let mut id = Uuid::now_v7();
        if self.node_id.is_some() {
            for _ in 0..OWNED_ID_DRAWS {
                if self.epoch_of(id).is_some() {
                    break;
                }
                id = Uuid::now_v7();
            }
        }
        id
    }

    /// Of `partitions`, whether `id` falls in one (always true on a single node).
    pub fn in_partitions(&self, id: Uuid, partitions: &HashSet<i32>) -> bool {
        self.node_id.is_none() || partitions.contains(&partition_of(id, self.count))
    }

    /// The partitions held now, with their epochs (none on a single node).
    pub fn held(&self) -> Vec<(i32, i64)> {
        self.epochs
            .iter()
            .enumerate()
            .filter_map(|(p, e)| Some((i32::try_from(p).ok()?, (*e)?)))
            .collect()
    }

    /// Sets the partition count (once read from the database); nothing is held yet.
    pub fn set_count(&mut self, count: u32) {
        self.count = count;
        self.epochs = vec![None; count as usize];
        self.owners = vec![None; count as usize];
    }

    /// Records the partitions held now, with their epochs.
    pub fn set_held(&mut self, held: &[(i32, i64)]) {
        self.epochs.iter_mut().for_each(|e| *e = None);
        for &(partition, epoch) in held {
            if let Some(slot) = slot(&mut self.epochs, partition) {
                *slot = Some(epoch);
            }
        }
    }

    /// Records where each partition's owner is reached.
    pub fn set_owners(&mut self, owners: &[(i32, String)]) {
        self.owners.iter_mut().for_each(|o| *o = None);
        for (partition, url) in owners {
            if let Some(slot) = slot(&mut self.owners, *partition) {
                *slot = Some(url.clone());
            }
        }
    }
}

fn slot<T>(slots: &mut [Option<T>], partition: i32) -> Option<&mut Option<T>> {
    usize::try_from(partition)
        .ok()
        .and_then(|p| slots.get_mut(p))
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
        let single = PartitionTable::single();
        let id = Uuid::now_v7();
        assert!(single.owns(id));
        assert_eq!(single.fence(id), None);
        assert_eq!(single.owner_of(id), None);
        assert_eq!(single.new_owned_id().get_version_num(), 7);
    }

    #[test]
    fn a_cluster_member_owns_only_the_partitions_it_holds() {
        let node = Uuid::now_v7();
        let mut table = PartitionTable::member(node);
        table.set_count(4);
        let id = Uuid::now_v7();
        let partition = partition_of(id, 4);
        assert!(!table.owns(id));
        assert_eq!(table.fence(id).map(|f| f.epoch), Some(-1));
        table.set_held(&[(partition, 7)]);
        assert!(table.owns(id));
        assert_eq!(
            table.fence(id),
            Some(Fence {
                partition,
                node_id: node,
                epoch: 7
            })
        );
        table.set_owners(&[(partition, "http://10.0.0.5:8080".to_owned())]);
        assert_eq!(table.owner_of(id), Some("http://10.0.0.5:8080"));
        table.set_held(&[]);
        assert!(!table.owns(id), "a lease given up is not held");
    }

    #[test]
    fn an_id_drawn_to_be_owned_here_lands_in_a_partition_held_here() {
        let mut table = PartitionTable::member(Uuid::now_v7());
        table.set_count(16);
        table.set_held(&[(3, 1), (11, 1)]);
        for _ in 0..200 {
            let id = table.new_owned_id();
            assert!(table.owns(id), "{id} in {}", partition_of(id, 16));
            assert_eq!(id.get_version_num(), 7);
        }
        // Holding nothing (draining), it still answers a new id.
        table.set_held(&[]);
        assert_eq!(table.new_owned_id().get_version_num(), 7);
    }

    #[test]
    fn whether_an_id_falls_in_some_partitions_is_read_from_the_count() {
        let mut table = PartitionTable::member(Uuid::now_v7());
        table.set_count(8);
        let id = Uuid::now_v7();
        let gained: HashSet<i32> = [partition_of(id, 8)].into();
        assert!(table.in_partitions(id, &gained));
        assert!(!table.in_partitions(id, &HashSet::new()));
        assert!(PartitionTable::single().in_partitions(id, &HashSet::new()));
    }
}
