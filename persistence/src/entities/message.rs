//! One message of a conversation, in either direction.

use sea_orm::entity::prelude::*;

use crate::values::{Direction, MessageStatus, Role};

/// One row of `messages`.
#[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
#[sea_orm(table_name = "messages")]
pub struct Model {
    /// UUID v7, so messages sort by creation.
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: Uuid,
    /// Owning workspace.
    pub workspace_id: i64,
    /// The conversation.
    pub conversation_id: Uuid,
    /// The channel, for the uniqueness of platform ids.
    pub channel_id: Uuid,
    /// Which way it went.
    pub direction: Direction,
    /// Who wrote it.
    pub role: Role,
    /// Text content.
    #[sea_orm(column_type = "Text")]
    pub content: String,
    /// Where it stands.
    pub status: MessageStatus,
    /// WhatsApp message id (`wamid…`); unique per channel.
    pub platform_message_id: Option<String>,
    /// Failure code and title, when failed.
    pub error: Option<Json>,
    /// Token usage of the model call that produced it.
    pub usage: Option<Json>,
    /// Tool calls requested by the assistant in this message.
    pub tool_calls: Option<Json>,
    /// For a tool result, the call it answers.
    pub tool_call_id: Option<String>,
    /// When it was stored.
    pub created_at: DateTimeUtc,
    /// For a reply, the inbound message it answers; a processed webhook event has one.
    pub reply_to_message_id: Option<Uuid>,
    /// For an outbound message, what goes on the wire (recipient, text or template), so that
    /// one left pending at a stop is sent again as what it was.
    pub outbound: Option<Json>,
    /// What an API caller attached to an inbound message (the chat call's `metadata`).
    pub metadata: Option<Json>,
    /// For an operator's message, the operator who wrote it (`None` for a key's session or
    /// the API).
    pub operator_id: Option<Uuid>,
}

/// Relations are expressed through explicit queries.
#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}

impl Model {
    /// Whether it went between Parley and the person: the person's messages, and what the
    /// assistant, a template or an operator said to them. The assistant's tool requests, the
    /// tools' results and notes for the model never left Parley: they have no direction or
    /// delivery status to show.
    pub fn reached_person(&self) -> bool {
        match self.role {
            Role::User | Role::Operator => true,
            Role::Assistant => self.tool_calls.is_none(),
            Role::Tool | Role::System => false,
        }
    }
}

/// The messages at `status`, one of the two the status index holds (`pending`, `sending`):
/// the index is partial, and a plan made once for any bound status can use it only when the
/// query repeats its condition word for word (migration `m20261127_000016`).
pub(crate) fn at_indexed_status(status: MessageStatus) -> sea_orm::Condition {
    debug_assert!(matches!(
        status,
        MessageStatus::Pending | MessageStatus::Sending
    ));
    sea_orm::Condition::all()
        .add(Column::Status.eq(status))
        .add(Expr::cust("status IN ('pending', 'sending')"))
}

#[cfg(test)]
mod tests {
    use sea_orm::{DbBackend, EntityTrait, QueryFilter, QueryTrait};

    use super::*;
    use crate::test_support::{indexes_of, migrated_for_plans, plan_of};

    /// The three partial indexes serve the queries they are there for: the scans for replies
    /// waiting or in flight, a platform id's message, a message's replies.
    #[tokio::test]
    async fn the_partial_indexes_serve_their_queries() {
        let (_dir, db) = migrated_for_plans().await;
        let names = indexes_of(&db, "messages").await;
        assert!(
            !names.contains(&"messages_status_idx".to_owned()),
            "{names:?}"
        );
        assert!(
            !names.contains(&"messages_reply_to_message_id_idx".to_owned()),
            "{names:?}"
        );
        let id = Uuid::now_v7();
        for status in [MessageStatus::Pending, MessageStatus::Sending] {
            let scan = Entity::find().filter(at_indexed_status(status));
            let plan = plan_of(&db, scan.build(DbBackend::Sqlite)).await;
            assert!(
                plan.contains("USING INDEX messages_waiting_status_idx"),
                "{plan}"
            );
        }
        let by_platform = Entity::find()
            .filter(Column::ChannelId.eq(id))
            .filter(Column::PlatformMessageId.eq("wamid.1"));
        let plan = plan_of(&db, by_platform.build(DbBackend::Sqlite)).await;
        assert!(plan.contains("messages_platform_id_key"), "{plan}");
        let replies = Entity::find().filter(Column::ReplyToMessageId.eq(id));
        let plan = plan_of(&db, replies.build(DbBackend::Sqlite)).await;
        assert!(plan.contains("messages_replies_idx"), "{plan}");
    }
}
