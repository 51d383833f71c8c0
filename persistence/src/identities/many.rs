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
        // By the primary key alone: with the workspace in the query too, SQLite's planner
        // walked the workspace's index, every identity of it, to find a few (a flow's claim
        // of 3 among 20,000 read them all).
        let rows = identity::Entity::find()
            .filter(identity::Column::Id.is_in(chunk.iter().copied()))
            .all(db)
            .await?;
        found.extend(rows.into_iter().filter(|i| i.workspace_id == workspace_id));
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

#[cfg(test)]
mod tests {
    use chrono::Utc;
    use serde_json::json;

    use super::*;
    use crate::identities::{NewIdentity, create};

    #[tokio::test]
    async fn another_workspaces_identities_are_not_found_by_id() {
        let (_dir, db) = crate::test_support::migrated().await;
        let now = Utc::now();
        let mut workspaces = Vec::new();
        for name in ["ours", "theirs"] {
            workspaces.push(crate::test_support::workspace(&db, name, now).await);
        }
        let mut ids = Vec::new();
        for workspace in [workspaces[0], workspaces[1], workspaces[0]] {
            let new = NewIdentity {
                id: Uuid::now_v7(),
                name: None,
                external_id: None,
                metadata: json!({}),
                opted_out: false,
            };
            ids.push(create(&db, workspace, new, now).await.expect("identity").id);
        }
        let gone = Uuid::now_v7();
        let asked = [ids[1], ids[0], gone, ids[2]];

        let mut ours = existing_ids(&db, workspaces[0], &asked)
            .await
            .expect("ours");
        ours.sort();
        assert_eq!(ours, vec![ids[0], ids[2]]);
        let theirs = find_many(&db, workspaces[1], &asked).await.expect("theirs");
        assert_eq!(
            theirs.iter().map(|i| i.id).collect::<Vec<_>>(),
            vec![ids[1]]
        );
    }
}
