//! Who a conversation is assigned to: set by an operator (themselves on take-over, anyone by
//! a supervisor), cleared when the assignee leaves it unanswered too long.

use chrono::{DateTime, Utc};
use sea_orm::sea_query::Expr;
use sea_orm::{ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter, QueryOrder, QuerySelect};
use uuid::Uuid;

use crate::Result;
use crate::entities::{conversation, message};

/// Assigns `conversation` to `operator_id` (`None`: back to the queue) at `now`; answers the
/// row as it is now.
///
/// # Errors
/// [`crate::PersistenceError::Vanished`] when the conversation is gone.
pub async fn assign(
    db: &impl ConnectionTrait,
    conversation: &conversation::Model,
    operator_id: Option<Uuid>,
    now: DateTime<Utc>,
) -> Result<conversation::Model> {
    let at = operator_id.map(|_| crate::clock::at_storage_precision(now));
    let updated = conversation::Entity::update_many()
        .col_expr(
            conversation::Column::AssignedOperatorId,
            Expr::value(operator_id),
        )
        .col_expr(conversation::Column::AssignedAt, Expr::value(at))
        .filter(conversation::Column::Id.eq(conversation.id))
        .exec(db)
        .await?;
    if updated.rows_affected == 0 {
        return Err(crate::PersistenceError::Vanished(
            "the conversation was deleted".to_owned(),
        ));
    }
    Ok(conversation::Model {
        assigned_operator_id: operator_id,
        assigned_at: at,
        ..conversation.clone()
    })
}

/// Conversations assigned before `before` whose assignee has not written in them since,
/// oldest assignment first, at most `limit`: those a sweep looks at.
///
/// # Errors
/// Fails on a database error.
pub async fn assigned_before(
    db: &impl ConnectionTrait,
    before: DateTime<Utc>,
    limit: u64,
) -> Result<Vec<conversation::Model>> {
    Ok(conversation::Entity::find()
        .filter(conversation::Column::AssignedOperatorId.is_not_null())
        .filter(conversation::Column::AssignedAt.lt(before))
        .filter(Expr::cust(
            "NOT EXISTS (SELECT 1 FROM messages m WHERE m.conversation_id = conversations.id \
             AND m.operator_id = conversations.assigned_operator_id \
             AND m.created_at >= conversations.assigned_at)",
        ))
        .order_by_asc(conversation::Column::AssignedAt)
        .limit(limit)
        .all(db)
        .await?)
}

/// Returns `conversation` to the queue if it is still assigned as it was and its assignee has
/// not written in it since the assignment; answers whether it did.
///
/// # Errors
/// Fails on a database error.
pub async fn release_unanswered(
    db: &impl ConnectionTrait,
    conversation: &conversation::Model,
) -> Result<bool> {
    let (Some(operator_id), Some(at)) =
        (conversation.assigned_operator_id, conversation.assigned_at)
    else {
        return Ok(false);
    };
    let answered = message::Entity::find()
        .select_only()
        .column(message::Column::Id)
        .filter(message::Column::ConversationId.eq(conversation.id))
        .filter(message::Column::OperatorId.eq(operator_id))
        .filter(message::Column::CreatedAt.gte(at))
        .limit(1)
        .into_tuple::<Uuid>()
        .one(db)
        .await?
        .is_some();
    if answered {
        return Ok(false);
    }
    let released = conversation::Entity::update_many()
        .col_expr(
            conversation::Column::AssignedOperatorId,
            Expr::value(Option::<Uuid>::None),
        )
        .col_expr(
            conversation::Column::AssignedAt,
            Expr::value(Option::<DateTime<Utc>>::None),
        )
        .filter(conversation::Column::Id.eq(conversation.id))
        .filter(conversation::Column::AssignedOperatorId.eq(operator_id))
        .filter(conversation::Column::AssignedAt.eq(at))
        .exec(db)
        .await?;
    Ok(released.rows_affected == 1)
}
