//! Reaching the node that owns something: its advertised URL from the leases, a request
//! carrying the cluster's shared secret, and one retry after `not_owner` with the leases read
//! again (DESIGN §2 "Routing").

use std::sync::{Arc, Mutex};
use std::time::Duration;

use parley_persistence::{DatabaseConnection, cluster};
use serde_json::Value;
use uuid::Uuid;

use super::Ownership;

/// The header a node's request to another carries: the cluster's shared secret. A request
/// with it is answered where it lands, never forwarded again.
pub const FORWARDED_HEADER: &str = "x-parley-cluster-secret";

/// The error code of a node that does not own what it was asked about (503).
pub const NOT_OWNER: &str = "not_owner";

/// The header a 503 `not_owner` carries, so that a forwarder knows it without reading the
/// body.
pub const NOT_OWNER_HEADER: &str = "x-parley-not-owner";

/// The channel every node listens on for the others' news (`LISTEN parley_cluster`).
pub const NOTIFY_CHANNEL: &str = "parley_cluster";

/// What one node tells the others through `pg_notify` (the payload is `topic:id`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Topic {
    /// A webhook event was stored for a channel (`channel-id:event-id`): its owner sweeps it,
    /// as fresh as one its own webhook stored.
    Inbound,
    /// A flow (id) was created or changed status: its owner starts or tells its actor.
    Flow,
    /// A scheduled task (id) was created, changed or is due: its owner looks at it.
    Task,
    /// Event deliveries were written: every node wakes its delivery worker.
    Events,
    /// A node joined or left: the others look at their fair share at once.
    Rebalance,
    /// A change cached facts depend on (the id is unused; the payload after the colon is
    /// the change, as JSON).
    Change,
}

impl Topic {
    /// Its name in a payload.
    pub fn name(self) -> &'static str {
        match self {
            Self::Inbound => "inbound",
            Self::Flow => "flow",
            Self::Task => "task",
            Self::Events => "events",
            Self::Rebalance => "rebalance",
            Self::Change => "change",
        }
    }

    /// The topic named `name`.
    pub fn parse(name: &str) -> Option<Self> {
        [
            Self::Inbound,
            Self::Flow,
            Self::Task,
            Self::Events,
            Self::Rebalance,
            Self::Change,
        ]
        .into_iter()
        .find(|t| t.name() == name)
    }
}

/// Why the owner could not answer.
#[derive(Clone, Debug, thiserror::Error)]
pub enum PeerError {
    /// No node holds the partition now (a takeover is under way), or this is a single node.
    #[error("no node owns it right now")]
    NoOwner,
    /// The owner could not be reached or failed.
    #[error("the owning node did not answer: {0}")]
    Unreachable(String),
}

/// The client of the other nodes.
#[derive(Debug)]
pub(super) struct Peers {
    client: reqwest::Client,
    secret: Arc<str>,
    db: DatabaseConnection,
    news: Mutex<News>,
}

/// What this node has to tell the others and has not yet: published by one task at a time,
/// all that waits in one statement. Each webhook stored for a channel owned elsewhere is news
/// for its owner: those of a burst go out together while the statement before is on its way,
/// not one statement (and one commit) per webhook.
#[derive(Debug, Default)]
struct News {
    /// Payloads in the order told, each once.
    waiting: Vec<String>,
    /// Whether a task is publishing (it takes what waits before it ends).
    publishing: bool,
}

impl Peers {
    pub(super) fn new(secret: &str, db: DatabaseConnection) -> Self {
        let client = reqwest::Client::builder()
            .tcp_nodelay(true)
            .pool_idle_timeout(Duration::from_secs(60))
            .build()
            .unwrap_or_default();
        Self {
            client,
            secret: secret.into(),
            db,
            news: Mutex::default(),
        }
    }
}

impl Ownership {
    fn peers(&self) -> Option<&Peers> {
        self.cluster.as_ref().map(|c| &c.peers)
    }

    /// The HTTP client and the shared secret other nodes are reached with (`None` on a
    /// single node).
    pub fn peer_client(&self) -> Option<(&reqwest::Client, &str)> {
        self.peers().map(|p| (&p.client, &*p.secret))
    }

    /// Whether `given` is the cluster's shared secret (never, on a single node).
    pub fn is_peer_secret(&self, given: &[u8]) -> bool {
        use subtle::ConstantTimeEq;
        self.peers()
            .is_some_and(|p| bool::from(p.secret.as_bytes().ct_eq(given)))
    }

    /// Tells the other nodes `topic` about `id` (in the background; nothing waits for it).
    /// What it concerns is in the database already, so a lost notification only delays it
    /// until the owner's next sweep.
    pub fn tell_owner(&self, topic: Topic, id: impl std::fmt::Display) {
        self.tell(topic, id.to_string());
    }

    /// Tells every node `topic` with `payload` (sent as `topic:node-id:payload`, so that a
    /// node knows its own news). News told while earlier news is being published goes out
    /// with the next statement, once however often it was told.
    pub fn tell(&self, topic: Topic, payload: String) {
        let Some(cluster) = self.cluster.as_ref() else {
            return;
        };
        let payload = format!("{}:{}:{payload}", topic.name(), cluster.node_id);
        if lock(&cluster.peers.news).add(payload) {
            tokio::spawn(publish(Arc::clone(cluster)));
        }
    }

    /// The database the leases are read from (a single node has none here).
    pub fn database(&self) -> Option<&DatabaseConnection> {
        self.peers().map(|p| &p.db)
    }

    /// Reads where every partition's owner is reached again.
    pub async fn refresh_owners(&self) {
        let Some(peers) = self.peers() else { return };
        match cluster::owners(&peers.db).await {
            Ok(owners) => {
                let owners: Vec<(i32, String)> = owners
                    .into_iter()
                    .map(|o| (o.partition, o.advertise_url))
                    .collect();
                self.set_owners(&owners);
            }
            Err(error) => tracing::warn!(%error, "the partitions' owners could not be read"),
        }
    }

    /// The owner's URL for `id`, the leases read again once when it is unknown.
    ///
    /// # Errors
    /// [`PeerError::NoOwner`] when no node holds its partition.
    pub async fn owner_url_fresh(&self, id: Uuid) -> Result<String, PeerError> {
        if let Some(url) = self.owner_url(id) {
            return Ok(url);
        }
        self.refresh_owners().await;
        self.owner_url(id).ok_or(PeerError::NoOwner)
    }

    /// Posts `body` to `path` on the owner of `id` and answers its JSON; after `not_owner`,
    /// reads the leases again and tries once more.
    ///
    /// # Errors
    /// [`PeerError`] when no owner answered.
    pub async fn post_to_owner(
        &self,
        id: Uuid,
        path: &str,
        body: &Value,
    ) -> Result<Value, PeerError> {
        let Some(peers) = self.peers() else {
            return Err(PeerError::NoOwner);
        };
        for attempt in 0..2 {
            let url = self.owner_url_fresh(id).await?;
            let sent = peers
                .client
                .post(format!("{}{path}", url.trim_end_matches('/')))
                .header(FORWARDED_HEADER, &*peers.secret)
                .json(body)
                .send()
                .await;
            let response = match sent {
                Ok(response) => response,
                // The owner as last read is gone (a takeover under way): read the leases
                // again and try the new owner once.
                Err(_) if attempt == 0 => {
                    self.refresh_owners().await;
                    continue;
                }
                Err(error) => return Err(PeerError::Unreachable(error.to_string())),
            };
            let status = response.status();
            let not_owner = response.headers().contains_key(NOT_OWNER_HEADER);
            let answer: Value = response
                .json()
                .await
                .map_err(|e| PeerError::Unreachable(e.to_string()))?;
            if status.is_success() {
                return Ok(answer);
            }
            if status.as_u16() == 503 && not_owner && attempt == 0 {
                crate::measure::cluster_not_owner_retry();
                self.refresh_owners().await;
                continue;
            }
            return Err(PeerError::Unreachable(format!("{status}: {answer}")));
        }
        Err(PeerError::NoOwner)
    }
}

impl News {
    /// Keeps `payload` to publish (once, however often it is told); answers whether a task
    /// must start publishing.
    fn add(&mut self, payload: String) -> bool {
        if !self.waiting.contains(&payload) {
            self.waiting.push(payload);
        }
        !std::mem::replace(&mut self.publishing, true)
    }

    /// What the publishing task sends next; `None`, and no task publishing any more, when
    /// nothing waits.
    fn next(&mut self) -> Option<Vec<String>> {
        if self.waiting.is_empty() {
            self.publishing = false;
            return None;
        }
        Some(std::mem::take(&mut self.waiting))
    }
}

/// Publishes what waits until nothing does; the one task doing so at a time.
async fn publish(cluster: Arc<super::Clustered>) {
    loop {
        let Some(waiting) = lock(&cluster.peers.news).next() else {
            return;
        };
        if let Err(error) = cluster::notify(&cluster.peers.db, NOTIFY_CHANNEL, &waiting).await {
            tracing::warn!(%error, news = waiting.len(), "the other nodes could not be told");
        }
    }
}

fn lock(news: &Mutex<News>) -> std::sync::MutexGuard<'_, News> {
    match news.lock() {
        Ok(news) => news,
        Err(poisoned) => poisoned.into_inner(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn news_told_while_publishing_goes_out_with_the_next_statement_once() {
        let mut news = News::default();
        assert!(
            news.add("inbound:n:a".to_owned()),
            "the first news starts a publisher"
        );
        assert!(
            !news.add("inbound:n:b".to_owned()),
            "one publisher at a time"
        );
        assert_eq!(
            news.next(),
            Some(vec!["inbound:n:a".to_owned(), "inbound:n:b".to_owned()])
        );
        assert!(!news.add("change:n:x".to_owned()));
        assert!(!news.add("inbound:n:c".to_owned()));
        assert!(
            !news.add("change:n:x".to_owned()),
            "told twice, published once"
        );
        assert_eq!(
            news.next(),
            Some(vec!["change:n:x".to_owned(), "inbound:n:c".to_owned()])
        );
        assert_eq!(news.next(), None, "nothing waits: the publisher ends");
        assert!(
            news.add("task:n:t".to_owned()),
            "the next news starts one again"
        );
    }
}
