//! Joining a cluster at start-up (DESIGN §2 "Cluster"): the refusals that keep a node from
//! joining one it cannot serve, and the membership it runs under.

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::bail;
use parley_actors::cluster::Placement;
use parley_actors::runtime::{ClusterSettings, Membership};
use parley_persistence::DatabaseConnection;

use crate::config::{MIN_SECRET_LEN, Settings};

/// Refuses a cluster this node could not serve, before anything touches the database: on
/// SQLite, without a shared secret, or without the secret key every node shares.
///
/// # Errors
/// The refusal, as a sentence saying what to set.
pub(super) fn refuse_unservable(settings: &Settings) -> anyhow::Result<()> {
    let cluster = &settings.cluster;
    if !cluster.enabled {
        return Ok(());
    }
    if !settings.effective_database_url().starts_with("postgres") {
        bail!(
            "PARLEY_CLUSTER=true needs PostgreSQL (PARLEY_DATABASE_URL=postgres://…): SQLite is \
             one process's database, so other nodes could not share it. Run one node on SQLite, \
             or several on one PostgreSQL database."
        );
    }
    if shared_secret(settings).is_none() {
        bail!(
            "PARLEY_CLUSTER_SECRET must be set, to the same value of at least {MIN_SECRET_LEN} \
             characters on every node: the nodes' requests to each other carry it."
        );
    }
    if settings.secret_key.is_none() {
        bail!(
            "PARLEY_SECRET_KEY must be set, to the same key on every node of a cluster: what one \
             node seals (channel tokens, MCP headers) the others open."
        );
    }
    Ok(())
}

fn shared_secret(settings: &Settings) -> Option<String> {
    settings
        .cluster
        .secret
        .as_ref()
        .map(|s| s.expose().to_owned())
        .filter(|s| s.len() >= MIN_SECRET_LEN)
}

/// This node's placement: everything runs here on a single node; on a cluster, the fair share
/// of the partitions it took as it joined, with the membership that keeps it.
///
/// # Errors
/// As [`refuse_unservable`]; refuses a cluster without a way for the other nodes to reach
/// this one; the database's errors.
pub(super) async fn join(
    settings: &Settings,
    db: &DatabaseConnection,
    bound: SocketAddr,
) -> anyhow::Result<(Placement, Option<Arc<Membership>>)> {
    let cluster = &settings.cluster;
    if !cluster.enabled {
        return Ok((Placement::single(), None));
    }
    refuse_unservable(settings)?;
    let secret = shared_secret(settings).unwrap_or_default();
    let node_url = match &cluster.node_url {
        Some(url) => url.trim_end_matches('/').to_owned(),
        None if !bound.ip().is_unspecified() => format!("http://{bound}"),
        None => bail!(
            "PARLEY_NODE_URL must say how the other nodes reach this one (e.g. \
             http://10.0.0.5:8080) when it listens on every interface ({bound})."
        ),
    };
    let node_id = uuid::Uuid::now_v7();
    let placement = Placement::clustered(node_id, &secret, db.clone());
    let membership = Membership::join(
        db.clone(),
        placement.clone(),
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
        partitions = placement.held().len(),
        "joined the cluster"
    );
    Ok((placement, Some(membership)))
}
