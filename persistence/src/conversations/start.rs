//! Starting a thread's open conversation: alone, or by the database's writer with the other
//! new conversations waiting (a burst of first messages).

use chrono::{DateTime, Utc};
use sea_orm::sea_query::{Expr, OnConflict};
use sea_orm::{ConnectionTrait, DatabaseExecutor, EntityTrait};
use uuid::Uuid;

use crate::entities::conversation;
use crate::group_commit::inserted_ids;
use crate::values::{ConversationMode, ConversationStatus};
use crate::{Merged, PersistenceError, Result, Writes};

/// What [`start`] left open.
#[derive(Clone, Debug)]
pub enum Opened {
    /// A conversation it started.
    Started(conversation::Model),
    /// The open conversation someone else started first.
    Found(conversation::Model),
}

impl Opened {
    /// The open conversation, whoever started it.
    pub fn conversation(self) -> conversation::Model {
        match self {
            Self::Started(conversation) | Self::Found(conversation) => conversation,
        }
    }
}

/// Tries [`start`] makes while the open conversation that refused its start is closed before
/// it can be read (a concurrent close of an idle one, say).
const START_TRIES: usize = 3;

/// Starts the open conversation of an identity on a channel, unless it has one already (the
/// database keeps one at most, by a partial unique index): then it answers that one. Two
/// callers that found none and start at once get the same conversation.
///
/// # Errors
/// Fails on a database error.
pub async fn start(
    db: &impl ConnectionTrait,
    workspace_id: i64,
    identity_id: Uuid,
    channel_id: Uuid,
    assistant_id: Option<Uuid>,
    now: DateTime<Utc>,
) -> Result<Opened> {
    let new = NewConversation {
        workspace_id,
        identity_id,
        channel_id,
        assistant_id,
        now,
    };
    for _ in 0..START_TRIES {
        let started = new.row();
        let inserted =
            conversation::Entity::insert(conversation::ActiveModel::from(started.clone()))
                .on_conflict(one_open())
                .exec_without_returning(db)
                .await?;
        if inserted > 0 {
            // Every column is given, the times at storage precision: the row is as inserted.
            return Ok(Opened::Started(started));
        }
        if let Some(open) = super::open_on(db, channel_id, &[identity_id]).await?.pop() {
            return Ok(Opened::Found(open));
        }
    }
    Err(PersistenceError::Vanished(
        "the open conversation that refused a new one was closed each time".to_owned(),
    ))
}

/// A thread's new conversation, as [`start`] starts it, for the database's writer to start with
/// the others waiting: one INSERT for all of them. A piece whose thread has an open conversation
/// already (started by another piece of the same statement, or before) answers that one, as
/// [`start`] would.
#[derive(Clone, Copy, Debug)]
pub struct NewConversation {
    /// The workspace.
    pub workspace_id: i64,
    /// The identity.
    pub identity_id: Uuid,
    /// The channel.
    pub channel_id: Uuid,
    /// The assistant answering it.
    pub assistant_id: Option<Uuid>,
    /// When it starts.
    pub now: DateTime<Utc>,
}

impl NewConversation {
    /// Its row, every column given (the times at storage precision), under a fresh id.
    fn row(&self) -> conversation::Model {
        let now = crate::clock::at_storage_precision(self.now);
        conversation::Model {
            id: Uuid::now_v7(),
            workspace_id: self.workspace_id,
            identity_id: self.identity_id,
            channel_id: self.channel_id,
            assistant_id: self.assistant_id,
            status: ConversationStatus::Open,
            started_at: now,
            last_message_at: now,
            mode: ConversationMode::Assistant,
            mode_changed_at: None,
            handoff_reason: None,
            human_active_at: None,
            prompt_tokens: 0,
            completion_tokens: 0,
            assigned_operator_id: None,
            assigned_at: None,
        }
    }
}

impl Merged for NewConversation {
    type Answer = Opened;

    fn run_all<'e>(
        db: &'e DatabaseExecutor<'e>,
        pieces: Vec<&'e Self>,
    ) -> Writes<'e, Vec<Self::Answer>> {
        Box::pin(start_all(db, pieces))
    }
}

/// Starts the conversations of `pieces` in one statement; a piece whose row the statement
/// refused starts (or finds) its conversation as [`start`] does.
async fn start_all(
    db: &impl ConnectionTrait,
    pieces: Vec<&NewConversation>,
) -> Result<Vec<Opened>> {
    let rows: Vec<conversation::Model> = pieces.iter().map(|piece| piece.row()).collect();
    let insert = conversation::Entity::insert_many(
        rows.iter().cloned().map(conversation::ActiveModel::from),
    )
    .on_conflict(one_open());
    let inserted = inserted_ids(db, insert).await?;
    let mut opened = Vec::with_capacity(rows.len());
    for (piece, row) in pieces.into_iter().zip(rows) {
        opened.push(if inserted.contains(&row.id) {
            Opened::Started(row)
        } else {
            let (ws, identity, channel) = (piece.workspace_id, piece.identity_id, piece.channel_id);
            start(db, ws, identity, channel, piece.assistant_id, piece.now).await?
        });
    }
    Ok(opened)
}

/// The database's rule of one open conversation per thread, as an INSERT's conflict clause:
/// a row that would break it is not inserted.
fn one_open() -> OnConflict {
    OnConflict::columns([
        conversation::Column::IdentityId,
        conversation::Column::ChannelId,
    ])
    // The index's predicate, as a literal for PostgreSQL to match it.
    .target_and_where(Expr::cust("status = 'open'"))
    .do_nothing()
    .to_owned()
}
