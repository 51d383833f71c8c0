//! Conversations (an identity's thread on one channel) and their messages.

use chrono::{DateTime, Utc};
use sea_orm::{ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter, QueryOrder};
use serde_json::Value;
use uuid::Uuid;

use crate::entities::{conversation, message};
use crate::page::fetch_page;
use crate::values::{ConversationMode, ConversationStatus, Direction, MessageStatus, Role};
use crate::{Page, Paged, Result};

mod append;
mod start;

pub use self::append::{append_message, store_message, store_messages};
pub use self::start::{NewConversation, Opened, start};

/// Which conversations to list.
#[derive(Clone, Copy, Debug, Default)]
pub struct ConversationFilter {
    /// Only this identity's.
    pub identity_id: Option<Uuid>,
    /// Only this channel's.
    pub channel_id: Option<Uuid>,
    /// Only those answered this way.
    pub mode: Option<ConversationMode>,
}

/// The workspace's conversations, most recently active first.
///
/// # Errors
/// Fails on a database error.
pub async fn list(
    db: &impl ConnectionTrait,
    workspace_id: i64,
    filter: ConversationFilter,
    page: Page,
) -> Result<Paged<conversation::Model>> {
    let mut query =
        conversation::Entity::find().filter(conversation::Column::WorkspaceId.eq(workspace_id));
    if let Some(identity_id) = filter.identity_id {
        query = query.filter(conversation::Column::IdentityId.eq(identity_id));
    }
    if let Some(channel_id) = filter.channel_id {
        query = query.filter(conversation::Column::ChannelId.eq(channel_id));
    }
    if let Some(mode) = filter.mode {
        query = query.filter(conversation::Column::Mode.eq(mode));
    }
    let query = query
        .order_by_desc(conversation::Column::LastMessageAt)
        .order_by_desc(conversation::Column::Id);
    fetch_page(db, query, page).await
}

/// The conversation `id` of the workspace.
///
/// # Errors
/// Fails on a database error.
pub async fn find(
    db: &impl ConnectionTrait,
    workspace_id: i64,
    id: Uuid,
) -> Result<Option<conversation::Model>> {
    Ok(conversation::Entity::find_by_id(id)
        .filter(conversation::Column::WorkspaceId.eq(workspace_id))
        .one(db)
        .await?)
}

/// A message to store.
#[derive(Clone, Debug)]
pub struct NewMessage {
    /// Its id when the caller chose it (a task run or a flow recipient names the message it
    /// sends, so that a restart can tell whether it was stored); a fresh one otherwise.
    pub id: Option<Uuid>,
    /// Which way it goes.
    pub direction: Direction,
    /// Who wrote it.
    pub role: Role,
    /// Text content.
    pub content: String,
    /// Initial status.
    pub status: MessageStatus,
    /// WhatsApp message id, when known.
    pub platform_message_id: Option<String>,
    /// Token usage of the model call that produced it.
    pub usage: Option<Value>,
    /// Tool calls the assistant asked for.
    pub tool_calls: Option<Value>,
    /// The call a tool result answers.
    pub tool_call_id: Option<String>,
    /// Why it failed, when it did.
    pub error: Option<Value>,
    /// For a reply, the inbound message it answers.
    pub reply_to_message_id: Option<Uuid>,
    /// For an outbound message, what goes on the wire.
    pub outbound: Option<Value>,
    /// What an API caller attached to an inbound message.
    pub metadata: Option<Value>,
    /// For an operator's message, the operator who wrote it.
    pub operator_id: Option<Uuid>,
    /// The files it carries, stored with it in one transaction.
    pub attachments: Vec<crate::attachments::NewAttachment>,
}

impl NewMessage {
    /// A message from the person, as received.
    pub fn from_person(content: String) -> Self {
        Self::new(
            Direction::Inbound,
            Role::User,
            content,
            MessageStatus::Received,
        )
    }

    /// A message of the assistant (or the business) to the person, in `status`.
    pub fn to_person(content: String, status: MessageStatus) -> Self {
        Self::new(Direction::Outbound, Role::Assistant, content, status)
    }

    /// A tool's result for the call `call_id`, kept in the thread for the model.
    pub fn tool_result(call_id: String, content: String) -> Self {
        Self {
            tool_call_id: Some(call_id),
            ..Self::new(
                Direction::Outbound,
                Role::Tool,
                content,
                MessageStatus::Sent,
            )
        }
    }

    fn new(direction: Direction, role: Role, content: String, status: MessageStatus) -> Self {
        Self {
            id: None,
            direction,
            role,
            content,
            status,
            platform_message_id: None,
            usage: None,
            tool_calls: None,
            tool_call_id: None,
            error: None,
            reply_to_message_id: None,
            outbound: None,
            metadata: None,
            operator_id: None,
            attachments: Vec::new(),
        }
    }
}

/// The messages of a conversation, oldest first.
///
/// # Errors
/// Fails on a database error.
pub async fn messages(
    db: &impl ConnectionTrait,
    conversation_id: Uuid,
    page: Page,
) -> Result<Paged<message::Model>> {
    let query = message::Entity::find()
        .filter(message::Column::ConversationId.eq(conversation_id))
        .order_by_asc(message::Column::CreatedAt)
        .order_by_asc(message::Column::Id);
    fetch_page(db, query, page).await
}

/// The most recently active conversation of `identity_id` on `channel_id`.
///
/// # Errors
/// Fails on a database error.
pub async fn latest_for(
    db: &impl ConnectionTrait,
    identity_id: Uuid,
    channel_id: Uuid,
) -> Result<Option<conversation::Model>> {
    Ok(conversation::Entity::find()
        .filter(conversation::Column::IdentityId.eq(identity_id))
        .filter(conversation::Column::ChannelId.eq(channel_id))
        .order_by_desc(conversation::Column::LastMessageAt)
        .order_by_desc(conversation::Column::Id)
        .one(db)
        .await?)
}

/// The open conversations of `identity_ids` on `channel_id`, at most one each (the database
/// keeps one open conversation per identity and channel): one read for a batch of sends (a
/// flow's claim), by the index of open conversations.
///
/// # Errors
/// Fails on a database error.
pub async fn open_on(
    db: &impl ConnectionTrait,
    channel_id: Uuid,
    identity_ids: &[Uuid],
) -> Result<Vec<conversation::Model>> {
    if identity_ids.is_empty() {
        return Ok(Vec::new());
    }
    Ok(conversation::Entity::find()
        .filter(conversation::Column::IdentityId.is_in(identity_ids.iter().copied()))
        .filter(conversation::Column::ChannelId.eq(channel_id))
        .filter(conversation::Column::Status.eq(ConversationStatus::Open))
        .all(db)
        .await?)
}

/// Marks a conversation closed; the next message starts a new one.
///
/// # Errors
/// Fails on a database error.
pub async fn close(db: &impl ConnectionTrait, id: Uuid) -> Result<()> {
    conversation::Entity::update_many()
        .col_expr(
            conversation::Column::Status,
            sea_orm::sea_query::Expr::value(ConversationStatus::Closed),
        )
        .filter(conversation::Column::Id.eq(id))
        .exec(db)
        .await?;
    Ok(())
}

/// The last `limit` messages of a conversation, oldest first.
///
/// # Errors
/// Fails on a database error.
pub async fn recent_messages(
    db: &impl ConnectionTrait,
    conversation_id: Uuid,
    limit: u64,
) -> Result<Vec<message::Model>> {
    use sea_orm::QuerySelect;
    let mut newest_first = message::Entity::find()
        .filter(message::Column::ConversationId.eq(conversation_id))
        .order_by_desc(message::Column::CreatedAt)
        .order_by_desc(message::Column::Id)
        .limit(limit)
        .all(db)
        .await?;
    newest_first.reverse();
    Ok(newest_first)
}

/// The `limit` messages of a conversation just before message `before` (all but none when
/// `None`: the newest), oldest first: one page of its history, read backwards.
///
/// # Errors
/// Fails on a database error.
pub async fn messages_before(
    db: &impl ConnectionTrait,
    conversation_id: Uuid,
    before: Option<&message::Model>,
    limit: u64,
) -> Result<Vec<message::Model>> {
    use sea_orm::{Condition, QuerySelect};
    let mut query =
        message::Entity::find().filter(message::Column::ConversationId.eq(conversation_id));
    if let Some(before) = before {
        query = query.filter(
            Condition::any()
                .add(message::Column::CreatedAt.lt(before.created_at))
                .add(
                    Condition::all()
                        .add(message::Column::CreatedAt.eq(before.created_at))
                        .add(message::Column::Id.lt(before.id)),
                ),
        );
    }
    let mut newest_first = query
        .order_by_desc(message::Column::CreatedAt)
        .order_by_desc(message::Column::Id)
        .limit(limit)
        .all(db)
        .await?;
    newest_first.reverse();
    Ok(newest_first)
}

/// The messages of a conversation created at or after `since`, oldest first: what a
/// conversation actor adds to the history it keeps.
///
/// # Errors
/// Fails on a database error.
pub async fn messages_since(
    db: &impl ConnectionTrait,
    conversation_id: Uuid,
    since: DateTime<Utc>,
) -> Result<Vec<message::Model>> {
    Ok(message::Entity::find()
        .filter(message::Column::ConversationId.eq(conversation_id))
        .filter(message::Column::CreatedAt.gte(since))
        .order_by_asc(message::Column::CreatedAt)
        .order_by_asc(message::Column::Id)
        .all(db)
        .await?)
}

/// A conversation by id, whatever its workspace; for background work.
///
/// # Errors
/// Fails on a database error.
pub async fn find_in_any_workspace(
    db: &impl ConnectionTrait,
    id: Uuid,
) -> Result<Option<conversation::Model>> {
    Ok(conversation::Entity::find_by_id(id).one(db).await?)
}

/// A message by id.
///
/// # Errors
/// Fails on a database error.
pub async fn find_message(db: &impl ConnectionTrait, id: Uuid) -> Result<Option<message::Model>> {
    Ok(message::Entity::find_by_id(id).one(db).await?)
}
