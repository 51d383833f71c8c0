//! What one node tells the others through PostgreSQL's `pg_notify`, typed once: each piece of
//! [`News`] is encoded here and decoded here, whoever tells it and whoever hears it. News only
//! hurries things along: what it concerns is in the database already, so news lost on the way
//! (a listener reconnecting) delays work until the owner's next sweep, never loses it.
//!
//! One task publishes at a time, and what is told meanwhile goes out together in its next
//! statement, so a burst of webhooks stored for a channel owned elsewhere is a few statements,
//! not one each.

use std::sync::{Arc, Mutex};

use parley_persistence::{DatabaseConnection, cluster};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::changes::Change;

/// The channel every node listens on for the others' news (`LISTEN parley_cluster`).
pub const NOTIFY_CHANNEL: &str = "parley_cluster";

/// Something another node should know.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "news")]
pub enum News {
    /// A webhook event was stored for a channel: its owner reads it, as fresh as one its own
    /// webhook stored.
    InboundStored {
        /// The channel it arrived on.
        channel_id: Uuid,
        /// The stored event.
        event_id: Uuid,
    },
    /// A flow was created or moved, or a report moved one of its recipients: its owner starts
    /// or tells its actor.
    Flow {
        /// The flow.
        flow_id: Uuid,
    },
    /// A scheduled task was created, changed or is due: its owner looks at it.
    Task {
        /// The task.
        task_id: Uuid,
    },
    /// A node joined or left: the others look at their fair share at once.
    Rebalance,
    /// A change cached facts depend on: every node's listeners hear it.
    Change {
        /// What changed.
        change: Change,
    },
}

/// A piece of news as it travels: who told it, and what.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Told {
    /// The node that told it (a node ignores its own news).
    pub from: Uuid,
    /// The news.
    #[serde(flatten)]
    pub news: News,
}

impl Told {
    /// The payload of a notification.
    pub fn encode(&self) -> String {
        // A value of plain fields and strings always serializes.
        serde_json::to_string(self).unwrap_or_default()
    }

    /// The news a notification's payload carries; `None` for one this release cannot read.
    pub fn decode(payload: &str) -> Option<Self> {
        serde_json::from_str(payload).ok()
    }
}

/// Publishes news for one node: one task at a time, what waits in one statement.
#[derive(Debug)]
pub(super) struct Publisher {
    node_id: Uuid,
    db: DatabaseConnection,
    waiting: Mutex<Waiting>,
}

/// What this node has to tell the others and has not yet.
#[derive(Debug, Default)]
struct Waiting {
    /// Payloads in the order told, each once.
    payloads: Vec<String>,
    /// Whether a task is publishing (it takes what waits before it ends).
    publishing: bool,
}

impl Publisher {
    pub(super) fn new(node_id: Uuid, db: DatabaseConnection) -> Self {
        Self {
            node_id,
            db,
            waiting: Mutex::default(),
        }
    }

    /// Tells every node `news`, in the background; told again while it waits, it goes out
    /// once.
    pub(super) fn tell(self: &Arc<Self>, news: News) {
        let payload = Told {
            from: self.node_id,
            news,
        }
        .encode();
        if self.lock().add(payload) {
            tokio::spawn(Arc::clone(self).publish());
        }
    }

    /// Tells every node `news` now and waits for the statement (a node leaving, whose
    /// runtime has stopped).
    ///
    /// # Errors
    /// The database's.
    pub(super) async fn tell_now(
        &self,
        news: News,
    ) -> Result<(), parley_persistence::PersistenceError> {
        let payload = Told {
            from: self.node_id,
            news,
        }
        .encode();
        cluster::notify(&self.db, NOTIFY_CHANNEL, &[payload]).await
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Waiting> {
        match self.waiting.lock() {
            Ok(waiting) => waiting,
            Err(poisoned) => poisoned.into_inner(),
        }
    }

    /// Publishes what waits until nothing does; the one task doing so at a time.
    async fn publish(self: Arc<Self>) {
        loop {
            let Some(payloads) = self.lock().next() else {
                return;
            };
            if let Err(error) = cluster::notify(&self.db, NOTIFY_CHANNEL, &payloads).await {
                tracing::warn!(%error, news = payloads.len(), "the other nodes could not be told");
            }
        }
    }
}

impl Waiting {
    /// Keeps `payload` to publish (once, however often it is told); answers whether a task
    /// must start publishing.
    fn add(&mut self, payload: String) -> bool {
        if !self.payloads.contains(&payload) {
            self.payloads.push(payload);
        }
        !std::mem::replace(&mut self.publishing, true)
    }

    /// What the publishing task sends next; `None`, and no task publishing any more, when
    /// nothing waits.
    fn next(&mut self) -> Option<Vec<String>> {
        if self.payloads.is_empty() {
            self.publishing = false;
            return None;
        }
        Some(std::mem::take(&mut self.payloads))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_of_news_reads_back_as_it_was_told() {
        let from = Uuid::now_v7();
        let id = Uuid::now_v7();
        for news in [
            News::InboundStored {
                channel_id: id,
                event_id: Uuid::now_v7(),
            },
            News::Flow { flow_id: id },
            News::Task { task_id: id },
            News::Rebalance,
            News::Change {
                change: Change::EventRoutes { workspace_id: 7 },
            },
            News::Change {
                change: Change::Messages {
                    workspace_id: 7,
                    identity_id: id,
                    since: parley_persistence::clock::now(),
                },
            },
        ] {
            let told = Told { from, news };
            let payload = told.encode();
            assert!(payload.len() < 8000, "pg_notify's limit: {payload}");
            assert_eq!(Told::decode(&payload), Some(told));
        }
        assert_eq!(Told::decode("inbound:node:channel:event"), None);
    }

    #[test]
    fn news_told_while_publishing_goes_out_with_the_next_statement_once() {
        let mut waiting = Waiting::default();
        assert!(
            waiting.add("a".to_owned()),
            "the first news starts a publisher"
        );
        assert!(!waiting.add("b".to_owned()), "one publisher at a time");
        assert_eq!(waiting.next(), Some(vec!["a".to_owned(), "b".to_owned()]));
        assert!(!waiting.add("x".to_owned()));
        assert!(!waiting.add("c".to_owned()));
        assert!(!waiting.add("x".to_owned()), "told twice, published once");
        assert_eq!(waiting.next(), Some(vec!["x".to_owned(), "c".to_owned()]));
        assert_eq!(waiting.next(), None, "nothing waits: the publisher ends");
        assert!(
            waiting.add("t".to_owned()),
            "the next news starts one again"
        );
    }
}
