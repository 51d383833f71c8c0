//! Merging one identity into another: everything of the source moves to the target, which
//! wins where both hold the same fact.

use chrono::{DateTime, Utc};
use sea_orm::sea_query::Query;
use sea_orm::{ActiveModelTrait, ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter, Set};
use uuid::Uuid;

use super::contacts_of;
use crate::Result;
use crate::entities::{contact_point, conversation, identity, identity_stage, memory_entry};
use crate::values::ContactKind;

/// Moves everything of `source` to `target` and deletes `source`: contact points,
/// conversations, stage history, memory (the target's entry wins on the same key), and the
/// fields the target lacks (name, external id, stage, metadata keys). Run it in a transaction.
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
    conversation::Entity::update_many()
        .col_expr(conversation::Column::IdentityId, target.id.into())
        .filter(conversation::Column::IdentityId.eq(source.id))
        .exec(db)
        .await?;
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
