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

/// How many UUID v7s [`PartitionTable::new_id_beside`] draws at most; each is tried with every
/// value of its last byte, so that with a power-of-two count (64 by default) the first draw
/// always lands, and with any count up to 1,024 all of them miss less than once in 10^15.
const BESIDE_DRAWS: usize = 128;

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

    /// A new UUID v7 in the same partition as `other`, so that whoever owns one owns the
    /// other, through every rebalance: a new WhatsApp sender's identity is drawn beside its
    /// channel, and its conversation actor then lives with the channel's actor for good. Any
    /// UUID v7 on a single node (which owns everything) or before the count is known.
    ///
    /// Only the id's last byte is chosen (its random part: the id stays a UUID v7, ordered by
    /// its time), starting from the drawn value, so that ids drawn in the same millisecond
    /// still differ in their other random bits.
    pub fn new_id_beside(&self, other: Uuid) -> Uuid {
        let drawn = Uuid::now_v7();
        if self.node_id.is_none() || self.count == 0 {
            return drawn;
        }
        let target = partition_of(other, self.count);
        let mut bytes = drawn.into_bytes();
        for _ in 0..BESIDE_DRAWS {
            let first = bytes[15];
            for step in 0..=u8::MAX {
                bytes[15] = first.wrapping_add(step);
                let id = Uuid::from_bytes(bytes);
                if partition_of(id, self.count) == target {
                    return id;
                }
            }
            bytes = Uuid::now_v7().into_bytes();
        }
        drawn
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
        assert_eq!(single.new_id_beside(id).get_version_num(), 7);
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
    fn an_id_drawn_beside_another_lands_in_its_partition_whoever_holds_it() {
        let mut table = PartitionTable::member(Uuid::now_v7());
        for count in [64, 16, 100, 7, 1] {
            table.set_count(count);
            table.set_held(&[(0, 1)]);
            let mut drawn = HashSet::new();
            for _ in 0..500 {
                let channel = Uuid::now_v7();
                let id = table.new_id_beside(channel);
                assert_eq!(
                    partition_of(id, count),
                    partition_of(channel, count),
                    "{id} beside {channel} among {count}"
                );
                assert_eq!(id.get_version_num(), 7);
                assert_eq!(id.get_variant(), uuid::Variant::RFC4122);
                assert!(drawn.insert(id), "{id} drawn twice");
            }
        }
        // Before the count is known, and on a single node, any UUID v7.
        let unknown = PartitionTable::member(Uuid::now_v7());
        assert_eq!(unknown.new_id_beside(Uuid::nil()).get_version_num(), 7);
    }

    #[test]
    fn ids_drawn_beside_one_another_keep_their_time_order() {
        let mut table = PartitionTable::member(Uuid::now_v7());
        table.set_count(64);
        let channel = Uuid::now_v7();
        let first = table.new_id_beside(channel);
        std::thread::sleep(std::time::Duration::from_millis(2));
        let second = table.new_id_beside(channel);
        assert!(first < second, "{first} then {second}");
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
