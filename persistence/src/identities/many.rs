//! Many identities resolved at once (a flow's contacts): by id, external id or contact point,
//! a few queries for any number.

use sea_orm::{ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter};
use uuid::Uuid;

use crate::Result;
use crate::entities::{contact_point, identity};
use crate::values::ContactKind;

/// Rows looked up per query when resolving many identities at once.
const LOOKUP_CHUNK: usize = 500;

/// Which of `ids` are identities of the workspace.
///
/// # Errors
/// The database's.
pub async fn existing_ids(
    db: &impl ConnectionTrait,
    workspace_id: i64,
    ids: &[Uuid],
) -> Result<Vec<Uuid>> {
    Ok(find_many(db, workspace_id, ids)
        .await?
        .into_iter()
        .map(|i| i.id)
        .collect())
}

/// The identities of the workspace among `ids` (those gone are missing), in no set order.
///
/// # Errors
/// The database's.
pub async fn find_many(
    db: &impl ConnectionTrait,
    workspace_id: i64,
    ids: &[Uuid],
) -> Result<Vec<identity::Model>> {
    let mut found = Vec::new();
    for chunk in ids.chunks(LOOKUP_CHUNK) {
        let rows = identity::Entity::find()
            .filter(identity::Column::WorkspaceId.eq(workspace_id))
            .filter(identity::Column::Id.is_in(chunk.iter().copied()))
            .all(db)
            .await?;
        found.extend(rows);
    }
    Ok(found)
}

/// The identities of the workspace with these external ids, as `(external id, identity)`.
///
/// # Errors
/// The database's.
pub async fn by_external_ids(
    db: &impl ConnectionTrait,
    workspace_id: i64,
    external_ids: &[String],
) -> Result<Vec<(String, Uuid)>> {
    let mut found = Vec::new();
    for chunk in external_ids.chunks(LOOKUP_CHUNK) {
        let rows = identity::Entity::find()
            .filter(identity::Column::WorkspaceId.eq(workspace_id))
            .filter(identity::Column::ExternalId.is_in(chunk.iter().cloned()))
            .all(db)
            .await?;
        found.extend(
            rows.into_iter()
                .filter_map(|i| Some((i.external_id?, i.id))),
        );
    }
    Ok(found)
}

/// The owners of these contact points (`kind`, values already normalised), as
/// `(value, identity)`.
///
/// # Errors
/// The database's.
pub async fn by_contacts(
    db: &impl ConnectionTrait,
    workspace_id: i64,
    kind: ContactKind,
    values: &[String],
) -> Result<Vec<(String, Uuid)>> {
    let mut found = Vec::new();
    for chunk in values.chunks(LOOKUP_CHUNK) {
        let rows = contact_point::Entity::find()
            .filter(contact_point::Column::WorkspaceId.eq(workspace_id))
            .filter(contact_point::Column::Kind.eq(kind))
            .filter(contact_point::Column::Value.is_in(chunk.iter().cloned()))
            .all(db)
            .await?;
        found.extend(rows.into_iter().map(|c| (c.value, c.identity_id)));
    }
    Ok(found)
}
