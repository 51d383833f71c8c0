//! What the operator console reads: a workspace's conversations with their person and last
//! message in a few statements, and cheap marks of activity that tell a live page when to
//! read again.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use sea_orm::{
    ColumnTrait, Condition, ConnectionTrait, EntityTrait, PaginatorTrait, QueryFilter, QueryOrder,
    QuerySelect,
};
use uuid::Uuid;

use crate::Result;
use crate::entities::{contact_point, conversation, identity, message};
use crate::values::{ContactKind, ConversationMode, ConversationStatus, MessageStatus, Role};

/// Whose conversations the inbox shows.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Assigned {
    /// Everyone's, and those of no one.
    #[default]
    All,
    /// Those assigned to this operator.
    To(Uuid),
    /// Those assigned to no one: the queue.
    NoOne,
}

/// Which conversations the inbox shows.
#[derive(Clone, Debug)]
pub struct InboxFilter {
    /// Only this channel's.
    pub channel_id: Option<Uuid>,
    /// Only those answered this way.
    pub mode: Option<ConversationMode>,
    /// `Some(true)`: only open ones; `Some(false)`: only closed ones. A conversation without a
    /// message since `idle_since` counts as closed, whatever its row says.
    pub open: Option<bool>,
    /// The start of the idle window (now − the idle time).
    pub idle_since: DateTime<Utc>,
    /// Whose.
    pub assigned: Assigned,
    /// Words the person's name, a phone or e-mail, or a message of the conversation holds
    /// (any case).
    pub search: Option<String>,
}

/// One line of the inbox.
#[derive(Clone, Debug)]
pub struct InboxRow {
    /// The conversation.
    pub conversation: conversation::Model,
    /// The person's name, when known.
    pub name: Option<String>,
    /// The person's primary phone (or any phone), when they have one.
    pub phone: Option<String>,
    /// The conversation's newest message.
    pub last_message: Option<message::Model>,
}

/// The workspace's conversations matching `filter`, most recently active first, at most
/// `limit`: four statements whatever the count.
///
/// # Errors
/// Fails on a database error.
pub async fn inbox(
    db: &impl ConnectionTrait,
    workspace_id: i64,
    filter: InboxFilter,
    limit: u64,
) -> Result<Vec<InboxRow>> {
    let mut query =
        conversation::Entity::find().filter(conversation::Column::WorkspaceId.eq(workspace_id));
    if let Some(channel_id) = filter.channel_id {
        query = query.filter(conversation::Column::ChannelId.eq(channel_id));
    }
    if let Some(mode) = filter.mode {
        query = query.filter(conversation::Column::Mode.eq(mode));
    }
    query = match filter.assigned {
        Assigned::All => query,
        Assigned::To(operator_id) => {
            query.filter(conversation::Column::AssignedOperatorId.eq(operator_id))
        }
        Assigned::NoOne => query.filter(conversation::Column::AssignedOperatorId.is_null()),
    };
    if let Some(words) = filter.search.as_deref().filter(|w| !w.trim().is_empty()) {
        query = query.filter(searched(workspace_id, words));
    }
    query = match filter.open {
        Some(true) => query
            .filter(conversation::Column::Status.eq(ConversationStatus::Open))
            .filter(conversation::Column::LastMessageAt.gt(filter.idle_since)),
        Some(false) => query.filter(
            Condition::any()
                .add(conversation::Column::Status.eq(ConversationStatus::Closed))
                .add(conversation::Column::LastMessageAt.lte(filter.idle_since)),
        ),
        None => query,
    };
    let conversations = query
        .order_by_desc(conversation::Column::LastMessageAt)
        .order_by_desc(conversation::Column::Id)
        .limit(limit)
        .all(db)
        .await?;
    if conversations.is_empty() {
        return Ok(Vec::new());
    }
    let identity_ids: Vec<Uuid> = conversations.iter().map(|c| c.identity_id).collect();
    let names: HashMap<Uuid, Option<String>> = identity::Entity::find()
        .filter(identity::Column::Id.is_in(identity_ids.iter().copied()))
        .all(db)
        .await?
        .into_iter()
        .map(|i| (i.id, i.name))
        .collect();
    let mut phones: HashMap<Uuid, (bool, String)> = HashMap::new();
    for point in crate::identities::contacts_of(db, &identity_ids).await? {
        if point.kind != ContactKind::Phone {
            continue;
        }
        // The primary phone wins; otherwise the first one found.
        let better = phones
            .get(&point.identity_id)
            .is_none_or(|(primary, _)| point.is_primary && !primary);
        if better {
            phones.insert(point.identity_id, (point.is_primary, point.value));
        }
    }
    let last = last_messages(db, &conversations).await?;
    Ok(conversations
        .into_iter()
        .map(|conversation| InboxRow {
            name: names.get(&conversation.identity_id).cloned().flatten(),
            phone: phones
                .get(&conversation.identity_id)
                .map(|(_, phone)| phone.clone()),
            last_message: last.get(&conversation.id).cloned(),
            conversation,
        })
        .collect())
}

/// The conversations of `workspace_id` whose person's name, phone or e-mail, or one of whose
/// messages between the person and the business, holds `words` (any case).
fn searched(workspace_id: i64, words: &str) -> Condition {
    use sea_orm::sea_query::{Expr, ExprTrait, Func, LikeExpr, Query};
    let pattern = format!("%{}%", escape_like(&words.trim().to_lowercase()));
    let holds = |column: sea_orm::sea_query::SimpleExpr| {
        Expr::expr(Func::lower(column)).like(LikeExpr::new(pattern.clone()).escape('\\'))
    };
    let named = Query::select()
        .column(identity::Column::Id)
        .from(identity::Entity)
        .and_where(identity::Column::WorkspaceId.eq(workspace_id))
        .and_where(holds(Expr::col(identity::Column::Name)))
        .to_owned();
    let reached = Query::select()
        .column(contact_point::Column::IdentityId)
        .from(contact_point::Entity)
        .and_where(contact_point::Column::WorkspaceId.eq(workspace_id))
        .and_where(holds(Expr::col(contact_point::Column::Value)))
        .to_owned();
    let said = Query::select()
        .column(message::Column::ConversationId)
        .from(message::Entity)
        .and_where(message::Column::WorkspaceId.eq(workspace_id))
        .and_where(message::Column::Role.is_in([Role::User, Role::Assistant, Role::Operator]))
        .and_where(holds(Expr::col(message::Column::Content)))
        .to_owned();
    Condition::any()
        .add(conversation::Column::IdentityId.in_subquery(named))
        .add(conversation::Column::IdentityId.in_subquery(reached))
        .add(conversation::Column::Id.in_subquery(said))
}

/// `text` with LIKE's wildcards and its escape character taken literally.
fn escape_like(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for c in text.chars() {
        if matches!(c, '%' | '_' | '\\') {
            escaped.push('\\');
        }
        escaped.push(c);
    }
    escaped
}

/// The newest message of each of `conversations`: the database keeps `last_message_at` at its
/// newest message's `created_at`, so one statement finds them (the newest id wins a tie).
async fn last_messages(
    db: &impl ConnectionTrait,
    conversations: &[conversation::Model],
) -> Result<HashMap<Uuid, message::Model>> {
    let ids: Vec<Uuid> = conversations.iter().map(|c| c.id).collect();
    let times: Vec<DateTime<Utc>> = conversations.iter().map(|c| c.last_message_at).collect();
    let wanted: HashMap<Uuid, DateTime<Utc>> = conversations
        .iter()
        .map(|c| (c.id, c.last_message_at))
        .collect();
    let mut last: HashMap<Uuid, message::Model> = HashMap::new();
    for m in message::Entity::find()
        .filter(message::Column::ConversationId.is_in(ids))
        .filter(message::Column::CreatedAt.is_in(times))
        .order_by_asc(message::Column::Id)
        .all(db)
        .await?
    {
        if wanted.get(&m.conversation_id) == Some(&m.created_at) {
            last.insert(m.conversation_id, m);
        }
    }
    // A note for the model (a person handled the conversation) or a tool's part is not what a
    // person reads as the last message: the newest message between the person and the
    // business is, read for those few conversations alone.
    let internal: Vec<Uuid> = last
        .iter()
        .filter(|(_, m)| !m.reached_person())
        .map(|(id, _)| *id)
        .collect();
    for conversation_id in internal {
        let shown = message::Entity::find()
            .filter(message::Column::ConversationId.eq(conversation_id))
            .filter(message::Column::Role.is_in([Role::User, Role::Assistant, Role::Operator]))
            .filter(message::Column::ToolCalls.is_null())
            .order_by_desc(message::Column::CreatedAt)
            .order_by_desc(message::Column::Id)
            .one(db)
            .await?;
        match shown {
            Some(m) => last.insert(conversation_id, m),
            None => last.remove(&conversation_id),
        };
    }
    Ok(last)
}

/// When the workspace's newest message was stored: a page listing its conversations reads
/// again when this moves. One index lookup.
///
/// # Errors
/// Fails on a database error.
pub async fn workspace_mark(
    db: &impl ConnectionTrait,
    workspace_id: i64,
) -> Result<(Option<DateTime<Utc>>, Option<DateTime<Utc>>, u64)> {
    let newest = conversation::Entity::find()
        .select_only()
        .column(conversation::Column::LastMessageAt)
        .filter(conversation::Column::WorkspaceId.eq(workspace_id))
        .order_by_desc(conversation::Column::LastMessageAt)
        .limit(1)
        .into_tuple::<DateTime<Utc>>()
        .one(db)
        .await?;
    // Assignments move the inbox too: when the newest was made, and how many stand.
    let assigned = conversation::Entity::find()
        .filter(conversation::Column::WorkspaceId.eq(workspace_id))
        .filter(conversation::Column::AssignedOperatorId.is_not_null());
    let latest = assigned
        .clone()
        .select_only()
        .column(conversation::Column::AssignedAt)
        .order_by_desc(conversation::Column::AssignedAt)
        .limit(1)
        .into_tuple::<Option<DateTime<Utc>>>()
        .one(db)
        .await?
        .flatten();
    let count = assigned.count(db).await?;
    Ok((newest, latest, count))
}

/// How many of the conversation's messages stand at each status, and how the conversation is
/// answered: a page showing it reads again when this changes (a message arrived, one was
/// delivered or read, a person took over).
///
/// # Errors
/// Fails on a database error.
pub async fn conversation_mark(
    db: &impl ConnectionTrait,
    conversation_id: Uuid,
) -> Result<Vec<(String, i64)>> {
    let mut mark: Vec<(String, i64)> = message::Entity::find()
        .select_only()
        .column(message::Column::Status)
        .column_as(message::Column::Id.count(), "n")
        .filter(message::Column::ConversationId.eq(conversation_id))
        .group_by(message::Column::Status)
        .into_tuple::<(MessageStatus, i64)>()
        .all(db)
        .await?
        .into_iter()
        .map(|(status, n)| (status.as_str().to_owned(), n))
        .collect();
    if let Some((mode, assigned)) = conversation::Entity::find_by_id(conversation_id)
        .select_only()
        .column(conversation::Column::Mode)
        .column(conversation::Column::AssignedOperatorId)
        .into_tuple::<(ConversationMode, Option<Uuid>)>()
        .one(db)
        .await?
    {
        mark.push((format!("mode:{}", mode.as_str()), 0));
        mark.push((format!("assigned:{}", assigned.unwrap_or_default()), 0));
    }
    let notes = crate::entities::conversation_note::Entity::find()
        .filter(crate::entities::conversation_note::Column::ConversationId.eq(conversation_id))
        .count(db)
        .await?;
    mark.push(("notes".to_owned(), i64::try_from(notes).unwrap_or(i64::MAX)));
    mark.sort();
    Ok(mark)
}
