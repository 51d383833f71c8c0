//! Joining a cluster at start-up (DESIGN §2 "Cluster"): the refusals that keep a node from
//! joining one it cannot serve, and the membership it runs under.

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::bail;
use parley_actors::cluster::Ownership;
use parley_actors::runtime::{ClusterSettings, Membership};
use parley_persistence::DatabaseConnection;

use crate::config::{MIN_SECRET_LEN, Settings};

/// This node's ownership: everything on a single node; on a cluster, the fair share it took
/// as it joined, with the membership that keeps it.
///
/// # Errors
/// Refuses a cluster on SQLite, without a shared secret or secret key, or without a way for
/// the other nodes to reach this one; the database's errors.
pub(super) async fn join(
    settings: &Settings,
    db: &DatabaseConnection,
    bound: SocketAddr,
) -> anyhow::Result<(Ownership, Option<Arc<Membership>>)> {
    let cluster = &settings.cluster;
    if !cluster.enabled {
        return Ok((Ownership::single(), None));
    }
    if !settings.effective_database_url().starts_with("postgres") {
        bail!(
            "PARLEY_CLUSTER=true needs PostgreSQL (PARLEY_DATABASE_URL=postgres://…): SQLite is \
             one process's database, so other nodes could not share it. Run one node on SQLite, \
             or several on one PostgreSQL database."
        );
    }
    let secret = cluster
        .secret
        .as_ref()
        .map(|s| s.expose().to_owned())
        .filter(|s| s.len() >= MIN_SECRET_LEN);
    let Some(secret) = secret else {
        bail!(
            "PARLEY_CLUSTER_SECRET must be set, to the same value of at least {MIN_SECRET_LEN} \
             characters on every node: the nodes' requests to each other carry it."
        );
    };
    if settings.secret_key.is_none() {
        bail!(
            "PARLEY_SECRET_KEY must be set, to the same key on every node of a cluster: what one \
             node seals (channel tokens, MCP headers) the others open."
        );
    }
    let node_url = match &cluster.node_url {
        Some(url) => url.trim_end_matches('/').to_owned(),
        None if !bound.ip().is_unspecified() => format!("http://{bound}"),
        None => bail!(
            "PARLEY_NODE_URL must say how the other nodes reach this one (e.g. \
             http://10.0.0.5:8080) when it listens on every interface ({bound})."
        ),
    };
    let node_id = uuid::Uuid::now_v7();
    let ownership = Ownership::clustered(node_id, &secret, db.clone());
    let membership = Membership::join(
        db.clone(),
        ownership.clone(),
        ClusterSettings {
            node_url: node_url.clone(),
            partitions: cluster.partitions,
            heartbeat: cluster.heartbeat(),
            lease_ttl: cluster.lease_ttl(),
        },
    )
    .await?;
    tracing::info!(
        %node_id,
        url = %node_url,
        partitions = ownership.held().len(),
        "joined the cluster"
    );
    Ok((ownership, Some(membership)))
}
