//! Assigning conversations to operators: an operator takes one (on take-over, or by hand), a
//! supervisor gives one to anyone, and an assignment its operator leaves unanswered for the
//! assistant's `assignment_timeout_minutes` returns to the queue. Each change is written with
//! its `conversation.assigned` event and announced to the console's open pages.

use parley_persistence::entities::{conversation, operator};
use parley_persistence::operators::assignments;
use parley_persistence::{DatabaseConnection, EventType, PersistenceError, clock};
use serde_json::json;
use uuid::Uuid;

use crate::changes::{Announcer, Change};
use crate::domain::SweptSettings;
use crate::events::Events;

/// Why an assignment changed, as its event says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Why {
    /// An operator or a supervisor assigned it.
    Assigned,
    /// It was returned to the queue by hand.
    Unassigned,
    /// Its operator left it unanswered too long.
    Timeout,
}

impl Why {
    fn as_str(self) -> &'static str {
        match self {
            Self::Assigned => "assigned",
            Self::Unassigned => "unassigned",
            Self::Timeout => "timeout",
        }
    }
}

/// Assigns `conversation` to `to` (`None`: back to the queue), with its event; answers the row
/// as it is now.
///
/// # Errors
/// The database's.
pub async fn assign(
    db: &DatabaseConnection,
    events: &Events,
    changes: &Announcer,
    conversation: &conversation::Model,
    to: Option<&operator::Model>,
    why: Why,
) -> Result<conversation::Model, PersistenceError> {
    let now = clock::now();
    let event = told(events, conversation, to, why);
    let txn = parley_persistence::begin_write(db).await?;
    let assigned = assignments::assign(&txn, conversation, to.map(|o| o.id), now).await?;
    if let Some(event) = &event {
        event.write(&txn, now).await?;
    }
    txn.commit().await?;
    settled(events, changes, conversation.workspace_id, event.is_some());
    Ok(assigned)
}

/// The `conversation.assigned` event of a change, for the endpoints that take it.
fn told(
    events: &Events,
    conversation: &conversation::Model,
    to: Option<&operator::Model>,
    why: Why,
) -> Option<crate::events::Recorded> {
    events.event(
        conversation.workspace_id,
        EventType::ConversationAssigned,
        || {
            json!({
                "conversation_id": conversation.id,
                "identity_id": conversation.identity_id,
                "channel_id": conversation.channel_id,
                "operator": to.map(|o| json!({"id": o.id, "name": o.name})),
                "why": why.as_str(),
            })
        },
    )
}

fn settled(events: &Events, changes: &Announcer, workspace_id: i64, with_event: bool) {
    if with_event {
        events.wake();
    }
    changes.announce(&Change::Inbox { workspace_id });
}

/// Most assignments one sweep looks at.
const SWEEP_BATCH: u64 = 500;

/// Returns to the queue every conversation of `owned` identities whose operator has left it
/// unanswered for its assistant's `assignment_timeout_minutes`; answers how many.
///
/// # Errors
/// The database's.
pub async fn release_unanswered(
    db: &DatabaseConnection,
    events: &Events,
    changes: &Announcer,
    owned: impl Fn(Uuid) -> bool,
) -> Result<usize, PersistenceError> {
    let now = clock::now();
    // No timeout is shorter than a minute: nothing younger is due.
    let candidates =
        assignments::assigned_before(db, now - chrono::Duration::minutes(1), SWEEP_BATCH).await?;
    let mut settings = SweptSettings::default();
    let mut released = 0;
    for conversation in candidates.into_iter().filter(|c| owned(c.identity_id)) {
        let timeout = settings.of(db, &conversation).await?.assignment_timeout();
        if conversation.assigned_at.is_none_or(|at| at > now - timeout) {
            continue;
        }
        let event = told(events, &conversation, None, Why::Timeout);
        let txn = parley_persistence::begin_write(db).await?;
        if !assignments::release_unanswered(&txn, &conversation).await? {
            continue;
        }
        if let Some(event) = &event {
            event.write(&txn, now).await?;
        }
        txn.commit().await?;
        settled(events, changes, conversation.workspace_id, event.is_some());
        released += 1;
        tracing::info!(conversation_id = %conversation.id, "an unanswered assignment returned to the queue");
    }
    Ok(released)
}
