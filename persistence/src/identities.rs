//! Identities: one person across contact points and channels, with their stage history.
//!
//! Contact points are unique per kind and value in a workspace (a database constraint), which is
//! what makes aggregation safe: two requests cannot give one phone to two identities.

use chrono::{DateTime, Utc};
use sea_orm::sea_query::Query;
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter, QueryOrder,
    QuerySelect, QueryTrait, Set,
};
use serde_json::Value;
use uuid::Uuid;

use crate::entities::{
    attachment, contact_point, conversation, identity, identity_stage, memory_entry, message,
};
mod first_contact;
mod journey;
mod lookups;
mod many;
mod merge;

pub use self::first_contact::NewPerson;
pub use self::journey::{set_stage, stage_history, stages_by_id};
pub use self::lookups::{ByContact, ContactLookups};
pub use self::many::{by_contacts, by_external_ids, existing_ids, find_many};
pub use self::merge::merge;
use crate::page::fetch_page;
use crate::shape::Shape;
use crate::values::ContactKind;
use crate::{Page, Paged, Result};

/// The identity `id` of the workspace.
///
/// # Errors
/// Fails on a database error.
pub async fn find(
    db: &impl ConnectionTrait,
    workspace_id: i64,
    id: Uuid,
) -> Result<Option<identity::Model>> {
    static SHAPE: Shape = Shape::new();
    let values = vec![id.into(), workspace_id.into(), 1u64.into()];
    let statement = SHAPE.statement(db.get_database_backend(), values, |backend| {
        identity::Entity::find_by_id(id)
            .filter(identity::Column::WorkspaceId.eq(workspace_id))
            .limit(1)
            .build(backend)
    });
    Ok(identity::Entity::find()
        .from_raw_sql(statement)
        .one(db)
        .await?)
}

/// The identities `ids` of the workspace, locked for the rest of the transaction (`FOR UPDATE`
/// on PostgreSQL; SQLite's write transaction already holds the whole database), in id order
/// so that two transactions locking the same pair cannot deadlock. An identity deleted by a
/// transaction that committed first is missing from the answer.
///
/// # Errors
/// Fails on a database error.
pub async fn lock(
    db: &impl ConnectionTrait,
    workspace_id: i64,
    ids: &[Uuid],
) -> Result<Vec<identity::Model>> {
    use sea_orm::QuerySelect;
    Ok(identity::Entity::find()
        .filter(identity::Column::WorkspaceId.eq(workspace_id))
        .filter(identity::Column::Id.is_in(ids.iter().copied()))
        .order_by_asc(identity::Column::Id)
        .lock_exclusive()
        .all(db)
        .await?)
}

/// The identity with this external id.
///
/// # Errors
/// Fails on a database error.
pub async fn find_by_external_id(
    db: &impl ConnectionTrait,
    workspace_id: i64,
    external_id: &str,
) -> Result<Option<identity::Model>> {
    Ok(identity::Entity::find()
        .filter(identity::Column::WorkspaceId.eq(workspace_id))
        .filter(identity::Column::ExternalId.eq(external_id))
        .one(db)
        .await?)
}

/// The identity owning the contact point `kind`/`value` (already normalised).
///
/// # Errors
/// Fails on a database error.
pub async fn find_by_contact(
    db: &impl ConnectionTrait,
    workspace_id: i64,
    kind: ContactKind,
    value: &str,
) -> Result<Option<identity::Model>> {
    let owner = Query::select()
        .column(contact_point::Column::IdentityId)
        .from(contact_point::Entity)
        .and_where(contact_point::Column::WorkspaceId.eq(workspace_id))
        .and_where(contact_point::Column::Kind.eq(kind))
        .and_where(contact_point::Column::Value.eq(value))
        .to_owned();
    Ok(identity::Entity::find()
        .filter(identity::Column::WorkspaceId.eq(workspace_id))
        .filter(identity::Column::Id.in_subquery(owner))
        .one(db)
        .await?)
}

/// The contact points of the given identities, oldest first.
///
/// # Errors
/// Fails on a database error.
pub async fn contacts_of(
    db: &impl ConnectionTrait,
    identity_ids: &[Uuid],
) -> Result<Vec<contact_point::Model>> {
    if identity_ids.is_empty() {
        return Ok(Vec::new());
    }
    let query = |ids: &[Uuid]| {
        contact_point::Entity::find()
            .filter(contact_point::Column::IdentityId.is_in(ids.iter().copied()))
            .order_by_asc(contact_point::Column::CreatedAt)
            .order_by_asc(contact_point::Column::Id)
    };
    if let [one] = identity_ids {
        // One identity (its page, a turn's context): the hot case, built once.
        static ONE: Shape = Shape::new();
        let statement = ONE.statement(db.get_database_backend(), vec![(*one).into()], |backend| {
            query(identity_ids).build(backend)
        });
        return Ok(contact_point::Entity::find()
            .from_raw_sql(statement)
            .all(db)
            .await?);
    }
    Ok(query(identity_ids).all(db).await?)
}

/// The workspace's identities, oldest first.
///
/// # Errors
/// Fails on a database error.
pub async fn list(
    db: &impl ConnectionTrait,
    workspace_id: i64,
    page: Page,
) -> Result<Paged<identity::Model>> {
    let query = identity::Entity::find()
        .filter(identity::Column::WorkspaceId.eq(workspace_id))
        .order_by_asc(identity::Column::CreatedAt)
        .order_by_asc(identity::Column::Id);
    fetch_page(db, query, page).await
}

/// An identity to create.
#[derive(Clone, Debug)]
pub struct NewIdentity {
    /// Its id: new, or the UUID a client chose.
    pub id: Uuid,
    /// Display name.
    pub name: Option<String>,
    /// Id in the client's system.
    pub external_id: Option<String>,
    /// Custom metadata object.
    pub metadata: Value,
    /// Opted out of campaign templates.
    pub opted_out: bool,
}

/// Stores a new identity (without contact points; see [`attach_contact`]).
///
/// # Errors
/// [`crate::PersistenceError::Conflict`] when the external id or the id is taken.
pub async fn create(
    db: &impl ConnectionTrait,
    workspace_id: i64,
    new: NewIdentity,
    now: DateTime<Utc>,
) -> Result<identity::Model> {
    Ok(identity::ActiveModel {
        id: Set(new.id),
        workspace_id: Set(workspace_id),
        name: Set(new.name),
        external_id: Set(new.external_id),
        metadata: Set(new.metadata),
        stage_id: Set(None),
        opted_out: Set(new.opted_out),
        created_at: Set(now),
        updated_at: Set(now),
    }
    .insert(db)
    .await?)
}

/// What an update changes; `None` leaves a field as it is.
#[derive(Clone, Debug, Default)]
pub struct IdentityChanges {
    /// New name; `Some(None)` clears it.
    pub name: Option<Option<String>>,
    /// New external id; `Some(None)` clears it.
    pub external_id: Option<Option<String>>,
    /// New metadata object.
    pub metadata: Option<Value>,
    /// Whether the person opted out of campaign templates.
    pub opted_out: Option<bool>,
}

/// Applies `changes` and touches `updated_at`.
///
/// # Errors
/// [`crate::PersistenceError::Conflict`] when the new external id is taken.
pub async fn update(
    db: &impl ConnectionTrait,
    current: identity::Model,
    changes: IdentityChanges,
    now: DateTime<Utc>,
) -> Result<identity::Model> {
    let mut active: identity::ActiveModel = current.into();
    if let Some(name) = changes.name {
        active.name = Set(name);
    }
    if let Some(external_id) = changes.external_id {
        active.external_id = Set(external_id);
    }
    if let Some(metadata) = changes.metadata {
        active.metadata = Set(metadata);
    }
    if let Some(opted_out) = changes.opted_out {
        active.opted_out = Set(opted_out);
    }
    active.updated_at = Set(now);
    Ok(active.update(db).await?)
}

/// Gives `identity_id` the contact point `kind`/`value` and makes it the identity's primary one
/// of that kind.
///
/// # Errors
/// [`crate::PersistenceError::Conflict`] when another identity owns it.
pub async fn attach_contact(
    db: &impl ConnectionTrait,
    workspace_id: i64,
    identity_id: Uuid,
    kind: ContactKind,
    value: &str,
    now: DateTime<Utc>,
) -> Result<()> {
    contact_point::Entity::update_many()
        .col_expr(contact_point::Column::IsPrimary, false.into())
        .filter(contact_point::Column::IdentityId.eq(identity_id))
        .filter(contact_point::Column::Kind.eq(kind))
        .exec(db)
        .await?;
    let existing = contact_point::Entity::find()
        .filter(contact_point::Column::IdentityId.eq(identity_id))
        .filter(contact_point::Column::Kind.eq(kind))
        .filter(contact_point::Column::Value.eq(value))
        .one(db)
        .await?;
    match existing {
        Some(found) => {
            let mut active: contact_point::ActiveModel = found.into();
            active.is_primary = Set(true);
            active.update(db).await?;
        }
        None => {
            primary_contact(workspace_id, identity_id, kind, value, now)
                .insert(db)
                .await?;
        }
    }
    Ok(())
}

/// A new contact point, primary for its kind.
fn primary_contact(
    workspace_id: i64,
    identity_id: Uuid,
    kind: ContactKind,
    value: &str,
    now: DateTime<Utc>,
) -> contact_point::ActiveModel {
    contact_point::ActiveModel {
        id: Set(Uuid::now_v7()),
        workspace_id: Set(workspace_id),
        identity_id: Set(identity_id),
        kind: Set(kind),
        value: Set(value.to_owned()),
        is_primary: Set(true),
        created_at: Set(now),
    }
}

/// Deletes the identity with its contact points, conversations, messages and their
/// attachments' rows, memory and stage history; `false` when there was none. Run it in a
/// transaction; the files themselves are the caller's to delete once it committed (see
/// [`crate::attachments::keys_of_identity`]).
///
/// # Errors
/// Fails on a database error.
pub async fn delete(db: &impl ConnectionTrait, workspace_id: i64, id: Uuid) -> Result<bool> {
    if find(db, workspace_id, id).await?.is_none() {
        return Ok(false);
    }
    let conversations = Query::select()
        .column(conversation::Column::Id)
        .from(conversation::Entity)
        .and_where(conversation::Column::IdentityId.eq(id))
        .to_owned();
    attachment::Entity::delete_many()
        .filter(attachment::Column::IdentityId.eq(id))
        .exec(db)
        .await?;
    message::Entity::delete_many()
        .filter(message::Column::ConversationId.in_subquery(conversations))
        .exec(db)
        .await?;
    conversation::Entity::delete_many()
        .filter(conversation::Column::IdentityId.eq(id))
        .exec(db)
        .await?;
    memory_entry::Entity::delete_many()
        .filter(memory_entry::Column::IdentityId.eq(id))
        .exec(db)
        .await?;
    identity_stage::Entity::delete_many()
        .filter(identity_stage::Column::IdentityId.eq(id))
        .exec(db)
        .await?;
    contact_point::Entity::delete_many()
        .filter(contact_point::Column::IdentityId.eq(id))
        .exec(db)
        .await?;
    identity::Entity::delete_by_id(id).exec(db).await?;
    Ok(true)
}

/// Marks the identity as opted out of campaign templates (a stop word, or Meta's 131050);
/// answers whether it was not out already.
///
/// # Errors
/// The database's.
pub async fn opt_out(db: &impl ConnectionTrait, id: Uuid, now: DateTime<Utc>) -> Result<bool> {
    let changed = identity::Entity::update_many()
        .col_expr(identity::Column::OptedOut, true.into())
        .col_expr(identity::Column::UpdatedAt, now.into())
        .filter(identity::Column::Id.eq(id))
        .filter(identity::Column::OptedOut.eq(false))
        .exec(db)
        .await?;
    Ok(changed.rows_affected > 0)
}
