//! Which conversation a message belongs to: the one place that opens the current conversation
//! of an identity on a channel or starts a new one, for turns and for every outbound message.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use parley_persistence::conversations::{self, NewConversation, Opened};
use parley_persistence::entities::conversation;
use parley_persistence::{ConnectionTrait, GroupCommit, PersistenceError};
use uuid::Uuid;

/// Where a message goes: an identity on a channel of a workspace.
#[derive(Clone, Copy, Debug)]
pub struct Thread {
    /// The workspace.
    pub workspace_id: i64,
    /// The identity.
    pub identity_id: Uuid,
    /// The channel.
    pub channel_id: Uuid,
}

/// The open conversation of the thread, or a new one when there is none or when it has been
/// idle for `idle_after` or longer (memory and stage carry over; history does not). A new
/// conversation records `assistant_id` as the assistant answering it.
///
/// # Errors
/// Fails on a database error.
pub async fn current(
    db: &impl ConnectionTrait,
    thread: Thread,
    idle_after: chrono::Duration,
    assistant_id: Option<Uuid>,
    now: DateTime<Utc>,
) -> Result<conversation::Model, PersistenceError> {
    Ok(open_or_start(db, thread, idle_after, assistant_id, now)
        .await?
        .conversation)
}

/// As [`current`], for a caller outside a transaction, from what [`find`] (or [`find_each`])
/// found on a read connection: the open conversation, or one started by the database's writer
/// ([`start_by`]), so that a burst of sends to people without an open conversation (a
/// campaign) starts theirs with one statement, and none takes SQLite's write lock beside the
/// writer.
///
/// # Errors
/// Fails on a database error.
pub(crate) async fn open_by(
    writer: &GroupCommit,
    thread: Thread,
    found: Found,
    now: DateTime<Utc>,
) -> Result<conversation::Model, PersistenceError> {
    match found {
        Found::Open(conversation) => Ok(conversation),
        Found::Start { close } => Ok(start_by(writer, thread, close, None, now)
            .await?
            .conversation),
    }
}

/// A thread's current conversation, as [`current`] finds it.
#[derive(Clone, Debug)]
pub(crate) struct Current {
    /// The conversation.
    pub(crate) conversation: conversation::Model,
    /// Whether it was started just now: it has no messages yet.
    pub(crate) started: bool,
}

/// As [`current`], saying whether the conversation was started by this call.
///
/// # Errors
/// Fails on a database error.
pub(crate) async fn open_or_start(
    db: &impl ConnectionTrait,
    thread: Thread,
    idle_after: chrono::Duration,
    assistant_id: Option<Uuid>,
    now: DateTime<Utc>,
) -> Result<Current, PersistenceError> {
    match find(db, thread, idle_after, now).await? {
        Found::Open(conversation) => Ok(Current {
            conversation,
            started: false,
        }),
        Found::Start { close } => start(db, thread, close, assistant_id, now).await,
    }
}

/// What [`find`] found of a thread.
#[derive(Clone, Debug)]
pub(crate) enum Found {
    /// Its open conversation, active within the idle time.
    Open(conversation::Model),
    /// None: a new one is to be started, after closing this idle one.
    Start {
        /// The open conversation that has gone idle.
        close: Option<Uuid>,
    },
}

/// The thread's open conversation if it is still active, read without writing anything.
///
/// # Errors
/// Fails on a database error.
pub(crate) async fn find(
    db: &impl ConnectionTrait,
    thread: Thread,
    idle_after: chrono::Duration,
    now: DateTime<Utc>,
) -> Result<Found, PersistenceError> {
    let (channel_id, identity_id) = (thread.channel_id, thread.identity_id);
    let mut found = find_each(db, channel_id, &[identity_id], idle_after, now).await?;
    Ok(found.take(identity_id))
}

/// As [`find`] for each of `identity_ids` on `channel_id`, with one read (a flow's claim).
///
/// # Errors
/// Fails on a database error.
pub(crate) async fn find_each(
    db: &impl ConnectionTrait,
    channel_id: Uuid,
    identity_ids: &[Uuid],
    idle_after: chrono::Duration,
    now: DateTime<Utc>,
) -> Result<FoundEach, PersistenceError> {
    let open = conversations::open_on(db, channel_id, identity_ids).await?;
    let found = open
        .into_iter()
        .map(|open| {
            let identity_id = open.identity_id;
            let found = if is_idle(&open, idle_after, now) {
                Found::Start {
                    close: Some(open.id),
                }
            } else {
                Found::Open(open)
            };
            (identity_id, found)
        })
        .collect();
    Ok(FoundEach(found))
}

/// What [`find_each`] found of each identity.
#[derive(Debug)]
pub(crate) struct FoundEach(HashMap<Uuid, Found>);

impl FoundEach {
    /// What was found of `identity_id`'s thread, taken out: one without an open conversation
    /// starts one.
    pub(crate) fn take(&mut self, identity_id: Uuid) -> Found {
        self.0
            .remove(&identity_id)
            .unwrap_or(Found::Start { close: None })
    }
}

/// Closes the idle conversation [`find`] found, if any, and starts the thread's next one,
/// answered by `assistant_id`; or takes the one someone else started since [`find`] looked
/// (the database keeps one open conversation per thread).
///
/// # Errors
/// Fails on a database error.
pub(crate) async fn start(
    db: &impl ConnectionTrait,
    thread: Thread,
    close: Option<Uuid>,
    assistant_id: Option<Uuid>,
    now: DateTime<Utc>,
) -> Result<Current, PersistenceError> {
    if let Some(idle) = close {
        conversations::close(db, idle).await?;
    }
    let opened = conversations::start(
        db,
        thread.workspace_id,
        thread.identity_id,
        thread.channel_id,
        assistant_id,
        now,
    )
    .await?;
    Ok(Current::from(opened))
}

/// As [`start`], committed by the database's writer: a thread with no idle conversation to
/// close starts its conversation in one statement with the other new conversations waiting (a
/// burst of first messages); one that closes an idle conversation closes it and starts the next
/// in a transaction of their own.
///
/// # Errors
/// Fails on a database error.
pub(crate) async fn start_by(
    writer: &GroupCommit,
    thread: Thread,
    close: Option<Uuid>,
    assistant_id: Option<Uuid>,
    now: DateTime<Utc>,
) -> Result<Current, PersistenceError> {
    if close.is_some() {
        return writer
            .write_atomic(move |db| Box::pin(start(db, thread, close, assistant_id, now)))
            .await;
    }
    let opened = writer
        .write_merged(NewConversation {
            workspace_id: thread.workspace_id,
            identity_id: thread.identity_id,
            channel_id: thread.channel_id,
            assistant_id,
            now,
        })
        .await?;
    Ok(Current::from(opened))
}

impl From<Opened> for Current {
    fn from(opened: Opened) -> Self {
        match opened {
            Opened::Started(conversation) => Self {
                conversation,
                started: true,
            },
            // Started by someone else meanwhile: it may have messages already.
            Opened::Found(conversation) => Self {
                conversation,
                started: false,
            },
        }
    }
}

/// Whether the conversation has been without messages for `idle_after` or longer, which
/// closes it whatever its stored status says.
pub fn is_idle(
    conversation: &conversation::Model,
    idle_after: chrono::Duration,
    now: DateTime<Utc>,
) -> bool {
    now.signed_duration_since(conversation.last_message_at) >= idle_after
}

#[cfg(test)]
mod tests {
    use parley_persistence::identities::NewPerson;
    use parley_persistence::{ContactKind, ConversationStatus, DatabaseExecutor, Merged, clock};

    use super::*;
    use crate::test_support::{deps, world};

    #[tokio::test]
    async fn conversations_started_together_give_each_thread_one_open_conversation() {
        let (deps, _dir, _model) = deps().await;
        let (db, writer) = (&deps.db, &deps.writer);
        let (ws, channel_id, first, _) = world(db).await;
        let person = NewPerson {
            id: Uuid::now_v7(),
            workspace_id: ws,
            name: None,
            kind: ContactKind::Phone,
            value: "+351910000009".to_owned(),
            now: clock::now(),
        };
        let executor = DatabaseExecutor::Connection(db);
        let second = NewPerson::run_all(&executor, vec![&person])
            .await
            .expect("person")[0]
            .id;
        let new = |identity_id| NewConversation {
            workspace_id: ws,
            identity_id,
            channel_id,
            assistant_id: None,
            now: clock::now(),
        };
        let (a, b, a_again) = (new(first), new(second), new(first));
        let opened = NewConversation::run_all(&executor, vec![&a, &b, &a_again])
            .await
            .expect("started");
        let [
            Opened::Started(of_first),
            Opened::Started(of_second),
            Opened::Found(found),
        ] = &opened[..]
        else {
            panic!("two started, the copy finds the first: {opened:?}");
        };
        assert_eq!(found.id, of_first.id);
        assert_ne!(of_first.id, of_second.id);
        assert_eq!(
            (of_second.identity_id, of_second.status),
            (second, ConversationStatus::Open)
        );

        // Through the writer, a thread with an open conversation gets that one back.
        let thread = Thread {
            workspace_id: ws,
            identity_id: second,
            channel_id,
        };
        let current = start_by(writer, thread, None, None, clock::now())
            .await
            .expect("current");
        assert_eq!(
            (current.conversation.id, current.started),
            (of_second.id, false)
        );
        // Closing the idle one starts the next.
        let next = start_by(writer, thread, Some(of_second.id), None, clock::now())
            .await
            .expect("next");
        assert!(next.started);
        assert_ne!(next.conversation.id, of_second.id);
    }

    #[tokio::test]
    async fn threads_found_together_are_found_as_each_alone() {
        let (deps, _dir, _model) = deps().await;
        let db = &deps.db;
        let (ws, channel_id, active, _) = world(db).await;
        let person = |phone: &str| NewPerson {
            id: Uuid::now_v7(),
            workspace_id: ws,
            name: None,
            kind: ContactKind::Phone,
            value: phone.to_owned(),
            now: clock::now(),
        };
        let (a, b) = (person("+351910000021"), person("+351910000022"));
        let executor = DatabaseExecutor::Connection(db);
        let people = NewPerson::run_all(&executor, vec![&a, &b])
            .await
            .expect("people");
        let (idle, without) = (people[0].id, people[1].id);
        let now = clock::now();
        let idle_after = chrono::Duration::hours(1);
        let open =
            |identity_id, at| conversations::start(db, ws, identity_id, channel_id, None, at);
        let of_active = open(active, now).await.expect("active").conversation();
        let two_hours_ago = now - chrono::Duration::hours(2);
        let of_idle = open(idle, two_hours_ago)
            .await
            .expect("idle")
            .conversation();

        let ids = [active, idle, without];
        let mut each = find_each(db, channel_id, &ids, idle_after, now)
            .await
            .expect("found");
        let together: Vec<Found> = ids.iter().map(|id| each.take(*id)).collect();
        let [
            Found::Open(found_active),
            Found::Start {
                close: Some(closes),
            },
            Found::Start { close: None },
        ] = &together[..]
        else {
            panic!("the active one open, the idle one closed, none started: {together:?}");
        };
        assert_eq!((found_active.id, *closes), (of_active.id, of_idle.id));
        for (id, together) in ids.iter().zip(&together) {
            let thread = Thread {
                workspace_id: ws,
                identity_id: *id,
                channel_id,
            };
            let alone = find(db, thread, idle_after, now).await.expect("alone");
            assert_eq!(format!("{alone:?}"), format!("{together:?}"));
        }
    }
}
