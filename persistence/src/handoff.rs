//! Who answers a conversation: handing it to a person, a person's activity while it is theirs,
//! and giving it back to the assistant (with a note for the model), by request or after the
//! person has been quiet too long. The identity's conversation actor is the only caller that
//! changes `mode`, so that a message racing a handoff is answered before it or not at all.

use chrono::{DateTime, Utc};
use sea_orm::sea_query::Expr;
use sea_orm::{ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter, QueryOrder, QuerySelect};
use uuid::Uuid;

use crate::Result;
use crate::conversations::{NewMessage, append_message};
use crate::entities::{conversation, message};
use crate::values::{ConversationMode, ConversationStatus, Direction, MessageStatus, Role};

/// Hands `conversation` to a person from `now`, for `reason`; answers the row as it is now.
/// A conversation a person has already is answered as it is (the handoff is idempotent).
///
/// # Errors
/// Fails on a database error.
pub async fn hand_over(
    db: &impl ConnectionTrait,
    conversation: &conversation::Model,
    reason: Option<String>,
    now: DateTime<Utc>,
) -> Result<conversation::Model> {
    if conversation.mode == ConversationMode::Human {
        return Ok(conversation.clone());
    }
    let now = crate::clock::at_storage_precision(now);
    conversation::Entity::update_many()
        .col_expr(
            conversation::Column::Mode,
            Expr::value(ConversationMode::Human),
        )
        .col_expr(conversation::Column::ModeChangedAt, Expr::value(now))
        .col_expr(
            conversation::Column::HandoffReason,
            Expr::value(reason.clone()),
        )
        .col_expr(conversation::Column::HumanActiveAt, Expr::value(now))
        .filter(conversation::Column::Id.eq(conversation.id))
        .exec(db)
        .await?;
    Ok(conversation::Model {
        mode: ConversationMode::Human,
        mode_changed_at: Some(now),
        handoff_reason: reason,
        human_active_at: Some(now),
        ..conversation.clone()
    })
}

/// Gives `conversation` back to the assistant at `now` and stores `note` in it for the model
/// (role `system`), in one transaction the caller holds; only if a person still has it and,
/// with `quiet_before`, has not acted in it since. Answers the row as it is now and the note,
/// or `None` when nothing changed.
///
/// # Errors
/// Fails on a database error.
pub async fn give_back(
    db: &impl crate::one_call::Executor,
    conversation: &conversation::Model,
    note: String,
    quiet_before: Option<DateTime<Utc>>,
    now: DateTime<Utc>,
) -> Result<Option<(conversation::Model, message::Model)>> {
    let now = crate::clock::at_storage_precision(now);
    let mut update = conversation::Entity::update_many()
        .col_expr(
            conversation::Column::Mode,
            Expr::value(ConversationMode::Assistant),
        )
        .col_expr(conversation::Column::ModeChangedAt, Expr::value(now))
        .col_expr(
            conversation::Column::HumanActiveAt,
            Expr::value(Option::<DateTime<Utc>>::None),
        )
        .filter(conversation::Column::Id.eq(conversation.id))
        .filter(conversation::Column::Mode.eq(ConversationMode::Human));
    if let Some(before) = quiet_before {
        update = update.filter(conversation::Column::HumanActiveAt.lt(before));
    }
    if update.exec(db).await?.rows_affected == 0 {
        return Ok(None);
    }
    let note = NewMessage {
        direction: Direction::Outbound,
        role: Role::System,
        ..NewMessage::to_person(note, MessageStatus::Sent)
    };
    let stored = append_message(db, conversation, note, now).await?;
    let back = conversation::Model {
        mode: ConversationMode::Assistant,
        mode_changed_at: Some(now),
        human_active_at: None,
        last_message_at: stored.created_at,
        ..conversation.clone()
    };
    Ok(Some((back, stored)))
}

/// Records that a person acted in conversation `id` at `now` (an operator's message), which
/// puts its automatic return to the assistant off; nothing when the assistant has it.
///
/// # Errors
/// Fails on a database error.
pub async fn person_acted(db: &impl ConnectionTrait, id: Uuid, now: DateTime<Utc>) -> Result<()> {
    conversation::Entity::update_many()
        .col_expr(
            conversation::Column::HumanActiveAt,
            Expr::value(crate::clock::at_storage_precision(now)),
        )
        .filter(conversation::Column::Id.eq(id))
        .filter(conversation::Column::Mode.eq(ConversationMode::Human))
        .exec(db)
        .await?;
    Ok(())
}

/// Open conversations a person has and has not acted in since before `before`, quietest
/// first, at most `limit`: those the sweep looks at for their automatic return.
///
/// # Errors
/// Fails on a database error.
pub async fn quiet_since(
    db: &impl ConnectionTrait,
    before: DateTime<Utc>,
    limit: u64,
) -> Result<Vec<conversation::Model>> {
    Ok(conversation::Entity::find()
        // A literal, for PostgreSQL to match the partial index's predicate.
        .filter(Expr::cust("mode = 'human'"))
        .filter(conversation::Column::HumanActiveAt.lt(before))
        .filter(conversation::Column::Status.eq(ConversationStatus::Open))
        .order_by_asc(conversation::Column::HumanActiveAt)
        .limit(limit)
        .all(db)
        .await?)
}
