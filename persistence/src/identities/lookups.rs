//! Finding identities by contact point for many callers at once: the lookups that wait while
//! one query runs go together in the next (a burst of WhatsApp messages from many people asks
//! for each sender).

use std::future::Future;

use sea_orm::{
    ColumnTrait, ConnectionTrait, DatabaseConnection, EntityTrait, JoinType, QueryFilter,
    QuerySelect,
};
use tokio::sync::{mpsc, oneshot};

use super::find_by_contact;
use crate::entities::{contact_point, identity};
use crate::values::ContactKind;
use crate::{PersistenceError, Result};

/// Most lookups answered by one query.
const MOST_AT_ONCE: usize = 64;

/// Lookups waiting beyond which callers wait to hand theirs over.
const QUEUE: usize = 4096;

/// Where an identity is found by one of its contact points: the database itself, or
/// [`ContactLookups`] in front of it.
pub trait ByContact: Sync {
    /// The identity owning the contact point `kind`/`value` (already normalised) in the
    /// workspace.
    fn by_contact(
        &self,
        workspace_id: i64,
        kind: ContactKind,
        value: &str,
    ) -> impl Future<Output = Result<Option<identity::Model>>> + Send;
}

impl ByContact for DatabaseConnection {
    fn by_contact(
        &self,
        workspace_id: i64,
        kind: ContactKind,
        value: &str,
    ) -> impl Future<Output = Result<Option<identity::Model>>> + Send {
        find_by_contact(self, workspace_id, kind, value)
    }
}

/// Looks identities up by contact point for many callers: one task takes the lookups waiting
/// (up to 64) and answers those of one workspace and kind with one query. Alone, a lookup is
/// one query as without it. Cheap to clone; the task ends with the last handle.
#[derive(Clone, Debug)]
pub struct ContactLookups {
    asks: mpsc::Sender<Ask>,
}

/// One caller's lookup and where its answer goes.
struct Ask {
    workspace_id: i64,
    kind: ContactKind,
    value: String,
    answer: oneshot::Sender<Result<Option<identity::Model>>>,
}

impl ContactLookups {
    /// Starts the task that answers lookups on `db`'s pool.
    #[must_use]
    pub fn start(db: DatabaseConnection) -> Self {
        let (asks, waiting) = mpsc::channel(QUEUE);
        tokio::spawn(answer_all(db, waiting));
        Self { asks }
    }
}

impl ByContact for ContactLookups {
    async fn by_contact(
        &self,
        workspace_id: i64,
        kind: ContactKind,
        value: &str,
    ) -> Result<Option<identity::Model>> {
        let (answer, answered) = oneshot::channel();
        let ask = Ask {
            workspace_id,
            kind,
            value: value.to_owned(),
            answer,
        };
        self.asks.send(ask).await.map_err(|_| stopped())?;
        answered.await.map_err(|_| stopped())?
    }
}

fn stopped() -> PersistenceError {
    PersistenceError::Database(sea_orm::DbErr::Custom(
        "the contact lookups stopped before answering".to_owned(),
    ))
}

/// Answers the lookups as they come, those waiting together.
async fn answer_all(db: DatabaseConnection, mut waiting: mpsc::Receiver<Ask>) {
    let mut asks = Vec::with_capacity(MOST_AT_ONCE);
    while waiting.recv_many(&mut asks, MOST_AT_ONCE).await > 0 {
        asks.sort_unstable_by_key(|ask| (ask.workspace_id, ask.kind as u8));
        while !asks.is_empty() {
            let (workspace_id, kind) = (asks[0].workspace_id, asks[0].kind);
            let same = asks
                .iter()
                .take_while(|ask| (ask.workspace_id, ask.kind) == (workspace_id, kind))
                .count();
            let group: Vec<Ask> = asks.drain(..same).collect();
            answer_group(&db, workspace_id, kind, group).await;
        }
    }
}

/// Answers lookups of one workspace and kind, several with one query; a lookup alone, or every
/// one of a failed query, runs the single-row query so that each caller gets its own answer.
async fn answer_group(
    db: &DatabaseConnection,
    workspace_id: i64,
    kind: ContactKind,
    group: Vec<Ask>,
) {
    let owners = if group.len() > 1 {
        let values: Vec<&str> = group.iter().map(|ask| ask.value.as_str()).collect();
        owners_of(db, workspace_id, kind, &values).await.ok()
    } else {
        None
    };
    for ask in group {
        let found = match &owners {
            Some(owners) => Ok(owners
                .iter()
                .find(|(value, _)| *value == ask.value)
                .map(|(_, owner)| owner.clone())),
            None => find_by_contact(db, workspace_id, kind, &ask.value).await,
        };
        // The caller may have stopped waiting.
        let _ = ask.answer.send(found);
    }
}

/// The owners of the contact points `kind`/`values` in the workspace, as `(value, identity)`,
/// in one query. The list of values is padded to a power of two (repeating the last) so that
/// the connections keep a few prepared statements for it rather than one per count.
async fn owners_of(
    db: &impl ConnectionTrait,
    workspace_id: i64,
    kind: ContactKind,
    values: &[&str],
) -> Result<Vec<(String, identity::Model)>> {
    let mut padded: Vec<String> = values.iter().map(|&value| value.to_owned()).collect();
    if let Some(last) = padded.last().cloned() {
        padded.resize(padded.len().next_power_of_two(), last);
    }
    let rows = contact_point::Entity::find()
        .join(
            JoinType::InnerJoin,
            contact_point::Entity::belongs_to(identity::Entity)
                .from(contact_point::Column::IdentityId)
                .to(identity::Column::Id)
                .into(),
        )
        .select_also(identity::Entity)
        .filter(contact_point::Column::WorkspaceId.eq(workspace_id))
        .filter(contact_point::Column::Kind.eq(kind))
        .filter(contact_point::Column::Value.is_in(padded))
        .filter(identity::Column::WorkspaceId.eq(workspace_id))
        .all(db)
        .await?;
    Ok(rows
        .into_iter()
        .filter_map(|(contact, owner)| Some((contact.value, owner?)))
        .collect())
}
