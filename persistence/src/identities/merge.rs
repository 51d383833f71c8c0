//! Merging one identity into another: everything of the source moves to the target, which
//! wins where both hold the same fact. Two people who talked to the same business usually
//! both have a conversation open on its channel, and were often recipients of the same flow:
//! those are settled first (one open conversation per channel, one recipient per flow), so
//! the merge never trips over the uniqueness the product depends on.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use sea_orm::sea_query::{Alias, Expr, ExprTrait, Func, Query};
use sea_orm::{ActiveModelTrait, ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter, Set};
use uuid::Uuid;

use super::contacts_of;
use crate::Result;
use crate::entities::{
    attachment, contact_point, conversation, flow_recipient, identity, identity_stage,
    memory_entry, scheduled_task,
};
use crate::values::{ContactKind, ConversationMode, ConversationStatus, RecipientStatus};

/// Moves everything of `source` to `target` and deletes `source`: contact points,
/// conversations with their messages (where both have one open on a channel, the one written
/// to last stays open, holding the other's handoff to a person if only that one had it, and
/// the other is closed), stage history, memory (the target's entry wins on the same key), flow
/// recipients (where both were sent the same flow, the one that got further stays), the
/// scheduled tasks addressed to the source, and the fields the target lacks (name, external
/// id, stage, metadata keys). Run it in a transaction.
///
/// # Errors
/// Fails on a database error.
pub async fn merge(
    db: &impl ConnectionTrait,
    target: identity::Model,
    source: identity::Model,
    now: DateTime<Utc>,
) -> Result<identity::Model> {
    contact_point::Entity::update_many()
        .col_expr(contact_point::Column::IdentityId, target.id.into())
        .col_expr(contact_point::Column::IsPrimary, false.into())
        .filter(contact_point::Column::IdentityId.eq(source.id))
        .exec(db)
        .await?;
    ensure_primaries(db, target.id).await?;
    settle_open_conversations(db, target.id, source.id).await?;
    conversation::Entity::update_many()
        .col_expr(conversation::Column::IdentityId, target.id.into())
        .filter(conversation::Column::IdentityId.eq(source.id))
        .exec(db)
        .await?;
    // The files go with the conversations (deleting the survivor deletes them).
    attachment::Entity::update_many()
        .col_expr(attachment::Column::IdentityId, target.id.into())
        .filter(attachment::Column::IdentityId.eq(source.id))
        .exec(db)
        .await?;
    settle_flow_recipients(db, target.id, source.id).await?;
    flow_recipient::Entity::update_many()
        .col_expr(flow_recipient::Column::IdentityId, target.id.into())
        .filter(flow_recipient::Column::IdentityId.eq(source.id))
        .exec(db)
        .await?;
    readdress_tasks(db, target.workspace_id, source.id, target.id).await?;
    identity_stage::Entity::update_many()
        .col_expr(identity_stage::Column::IdentityId, target.id.into())
        .filter(identity_stage::Column::IdentityId.eq(source.id))
        .exec(db)
        .await?;
    let target_keys = Query::select()
        .column(memory_entry::Column::Key)
        .from(memory_entry::Entity)
        .and_where(memory_entry::Column::IdentityId.eq(target.id))
        .to_owned();
    memory_entry::Entity::update_many()
        .col_expr(memory_entry::Column::IdentityId, target.id.into())
        .filter(memory_entry::Column::IdentityId.eq(source.id))
        .filter(memory_entry::Column::Key.not_in_subquery(target_keys))
        .exec(db)
        .await?;
    // What is left of the source (its losing memory entries) goes with it.
    memory_entry::Entity::delete_many()
        .filter(memory_entry::Column::IdentityId.eq(source.id))
        .exec(db)
        .await?;
    identity::Entity::delete_by_id(source.id).exec(db).await?;

    let mut metadata = source.metadata.clone();
    if let (Some(into), Some(from)) = (metadata.as_object_mut(), target.metadata.as_object()) {
        into.extend(from.clone());
    }
    let mut active: identity::ActiveModel = target.clone().into();
    if target.name.is_none() {
        active.name = Set(source.name);
    }
    if target.external_id.is_none() {
        active.external_id = Set(source.external_id);
    }
    if target.stage_id.is_none() {
        active.stage_id = Set(source.stage_id);
    }
    active.metadata = Set(metadata);
    active.updated_at = Set(now);
    Ok(active.update(db).await?)
}

/// Where both identities have a conversation open on a channel, the one written to last stays
/// open and the other is closed (its messages stay readable); a handoff to a person of the
/// closed one is kept on the open one when that one had none.
async fn settle_open_conversations(
    db: &impl ConnectionTrait,
    target: Uuid,
    source: Uuid,
) -> Result<()> {
    let open = conversation::Entity::find()
        .filter(conversation::Column::IdentityId.is_in([target, source]))
        .filter(conversation::Column::Status.eq(ConversationStatus::Open))
        .all(db)
        .await?;
    let mut by_channel: HashMap<Uuid, Vec<conversation::Model>> = HashMap::new();
    for conversation in open {
        by_channel
            .entry(conversation.channel_id)
            .or_default()
            .push(conversation);
    }
    for (_, mut both) in by_channel.into_iter().filter(|(_, c)| c.len() > 1) {
        both.sort_by_key(|c| c.last_message_at);
        let (Some(kept), Some(closed)) = (both.pop(), both.pop()) else {
            continue;
        };
        let mut closing: conversation::ActiveModel = closed.clone().into();
        closing.status = Set(ConversationStatus::Closed);
        closing.update(db).await?;
        if closed.mode == ConversationMode::Human && kept.mode == ConversationMode::Assistant {
            let mut keeping: conversation::ActiveModel = kept.into();
            keeping.mode = Set(closed.mode);
            keeping.mode_changed_at = Set(closed.mode_changed_at);
            keeping.handoff_reason = Set(closed.handoff_reason);
            keeping.human_active_at = Set(closed.human_active_at);
            keeping.update(db).await?;
        }
    }
    Ok(())
}

/// How far a flow recipient got: of two recipients of one flow, the further stays.
fn progress(status: RecipientStatus) -> u8 {
    match status {
        RecipientStatus::Read => 6,
        RecipientStatus::Delivered => 5,
        RecipientStatus::Sent => 4,
        RecipientStatus::Sending => 3,
        RecipientStatus::Failed => 2,
        RecipientStatus::Pending => 1,
        RecipientStatus::Skipped => 0,
    }
}

/// Where both identities are recipients of one flow, the one that got further stays (the
/// other is deleted): a flow holds one recipient per person.
async fn settle_flow_recipients(
    db: &impl ConnectionTrait,
    target: Uuid,
    source: Uuid,
) -> Result<()> {
    let rows = flow_recipient::Entity::find()
        .filter(flow_recipient::Column::IdentityId.is_in([target, source]))
        .all(db)
        .await?;
    let mut by_flow: HashMap<Uuid, Vec<flow_recipient::Model>> = HashMap::new();
    for row in rows {
        by_flow.entry(row.flow_id).or_default().push(row);
    }
    for (_, mut both) in by_flow.into_iter().filter(|(_, r)| r.len() > 1) {
        both.sort_by_key(|r| (progress(r.status), r.identity_id == target));
        let dropped: Vec<Uuid> = both.iter().rev().skip(1).map(|r| r.id).collect();
        flow_recipient::Entity::delete_many()
            .filter(flow_recipient::Column::Id.is_in(dropped))
            .exec(db)
            .await?;
    }
    Ok(())
}

/// Scheduled tasks of the workspace addressed to `source` (their payload's `identity_id`) are
/// addressed to `target` instead.
async fn readdress_tasks(
    db: &impl ConnectionTrait,
    workspace_id: i64,
    source: Uuid,
    target: Uuid,
) -> Result<()> {
    let payload_text = Func::cast_as(
        Expr::col(scheduled_task::Column::Payload),
        Alias::new("TEXT"),
    );
    let naming = scheduled_task::Entity::find()
        .filter(scheduled_task::Column::WorkspaceId.eq(workspace_id))
        .filter(Expr::expr(payload_text).like(format!("%{source}%")))
        .all(db)
        .await?;
    for task in naming {
        if task.payload["identity_id"].as_str() != Some(source.to_string().as_str()) {
            continue;
        }
        let mut payload = task.payload.clone();
        payload["identity_id"] = serde_json::Value::String(target.to_string());
        let mut active: scheduled_task::ActiveModel = task.into();
        active.payload = Set(payload);
        active.update(db).await?;
    }
    Ok(())
}

/// Makes the oldest contact point of each kind primary where an identity has none.
async fn ensure_primaries(db: &impl ConnectionTrait, identity_id: Uuid) -> Result<()> {
    let contacts = contacts_of(db, &[identity_id]).await?;
    for kind in ContactKind::ALL {
        let of_kind: Vec<_> = contacts.iter().filter(|c| c.kind == kind).collect();
        if of_kind.iter().any(|c| c.is_primary) {
            continue;
        }
        if let Some(oldest) = of_kind.first() {
            let mut active: contact_point::ActiveModel = (*oldest).clone().into();
            active.is_primary = Set(true);
            active.update(db).await?;
        }
    }
    Ok(())
}
