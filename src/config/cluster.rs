//! `[cluster]`: several nodes on one PostgreSQL database (DESIGN §2 "Cluster").

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::Secret;

/// `[cluster]`.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(default)]
pub struct ClusterConfig {
    /// `PARLEY_CLUSTER`: share the database with other nodes (PostgreSQL only).
    pub enabled: bool,
    /// `PARLEY_NODE_URL`: how the other nodes reach this one; defaults to the bound address
    /// when it is a specific one.
    pub node_url: Option<String>,
    /// `PARLEY_CLUSTER_SECRET`: what the nodes' requests to each other carry (at least 16
    /// characters, the same on every node).
    pub secret: Option<Secret>,
    /// `PARLEY_CLUSTER_PARTITIONS`: partitions, fixed at the cluster's first start.
    pub partitions: u32,
    /// `PARLEY_CLUSTER_HEARTBEAT_MS`: how often a node heartbeats and renews its leases.
    pub heartbeat_ms: u64,
    /// `PARLEY_CLUSTER_LEASE_TTL_SECS`: how long a lease stands without renewal.
    pub lease_ttl_secs: u64,
}

impl Default for ClusterConfig {
    fn default() -> Self {
        Self {
            enabled: false,
            node_url: None,
            secret: None,
            partitions: 64,
            heartbeat_ms: 2_000,
            lease_ttl_secs: 10,
        }
    }
}

/// The shortest cluster secret accepted.
pub const MIN_SECRET_LEN: usize = 16;

impl ClusterConfig {
    /// The heartbeat period.
    pub fn heartbeat(&self) -> Duration {
        Duration::from_millis(self.heartbeat_ms.max(100))
    }

    /// The lease time.
    pub fn lease_ttl(&self) -> Duration {
        Duration::from_secs(self.lease_ttl_secs.max(1))
    }
}
