//! Memory: what Parley remembers about an identity, one JSON value per dotted key.

use chrono::{DateTime, Utc};
use sea_orm::sea_query::OnConflict;
use sea_orm::{
    ColumnTrait, ConnectionTrait, EntityTrait, JoinType, QueryFilter, QueryOrder, QuerySelect,
    RelationDef, Set,
};
use serde_json::Value;
use uuid::Uuid;

use crate::Result;
use crate::entities::{identity, memory_entry};

/// The identity `identity_id` of the workspace and every entry of its memory, sorted by key,
/// read in one statement (a join): what a conversation reads before its first turn, which
/// otherwise took two round trips. `None` when the identity is not in the workspace.
///
/// # Errors
/// Fails on a database error.
pub async fn identity_with_memory(
    db: &impl ConnectionTrait,
    workspace_id: i64,
    identity_id: Uuid,
) -> Result<Option<(identity::Model, Vec<memory_entry::Model>)>> {
    let entries: RelationDef = memory_entry::Entity::belongs_to(identity::Entity)
        .from(memory_entry::Column::IdentityId)
        .to(identity::Column::Id)
        .into();
    let rows = identity::Entity::find_by_id(identity_id)
        .filter(identity::Column::WorkspaceId.eq(workspace_id))
        .join(JoinType::LeftJoin, entries.rev())
        .select_also(memory_entry::Entity)
        .order_by_asc(memory_entry::Column::Key)
        .all(db)
        .await?;
    let mut rows = rows.into_iter();
    let Some((identity, first)) = rows.next() else {
        return Ok(None);
    };
    let memory = first
        .into_iter()
        .chain(rows.filter_map(|(_, entry)| entry))
        .collect();
    Ok(Some((identity, memory)))
}

/// Every entry of the identity, sorted by key.
///
/// # Errors
/// Fails on a database error.
pub async fn list(
    db: &impl ConnectionTrait,
    identity_id: Uuid,
) -> Result<Vec<memory_entry::Model>> {
    Ok(memory_entry::Entity::find()
        .filter(memory_entry::Column::IdentityId.eq(identity_id))
        .order_by_asc(memory_entry::Column::Key)
        .all(db)
        .await?)
}

/// The entry `key` of the identity.
///
/// # Errors
/// Fails on a database error.
pub async fn find(
    db: &impl ConnectionTrait,
    identity_id: Uuid,
    key: &str,
) -> Result<Option<memory_entry::Model>> {
    Ok(memory_entry::Entity::find()
        .filter(memory_entry::Column::IdentityId.eq(identity_id))
        .filter(memory_entry::Column::Key.eq(key))
        .one(db)
        .await?)
}

/// Writes `key`, creating or replacing its value and metadata; answers the entry and whether it
/// was new. Concurrent writers of one key end with one row (the unique key decides).
///
/// # Errors
/// Fails on a database error.
pub async fn upsert(
    db: &impl ConnectionTrait,
    workspace_id: i64,
    identity_id: Uuid,
    key: &str,
    value: Value,
    metadata: Value,
    now: DateTime<Utc>,
) -> Result<(memory_entry::Model, bool)> {
    let existed = find(db, identity_id, key).await?.is_some();
    memory_entry::Entity::insert(memory_entry::ActiveModel {
        id: Set(Uuid::now_v7()),
        workspace_id: Set(workspace_id),
        identity_id: Set(identity_id),
        key: Set(key.to_owned()),
        value: Set(value),
        metadata: Set(metadata),
        created_at: Set(now),
        updated_at: Set(now),
    })
    .on_conflict(
        OnConflict::columns([memory_entry::Column::IdentityId, memory_entry::Column::Key])
            .update_columns([
                memory_entry::Column::Value,
                memory_entry::Column::Metadata,
                memory_entry::Column::UpdatedAt,
            ])
            .to_owned(),
    )
    .exec_without_returning(db)
    .await?;
    let stored = find(db, identity_id, key)
        .await?
        .ok_or_else(|| sea_orm::DbErr::RecordNotFound(format!("memory entry {key}")))?;
    Ok((stored, !existed))
}

/// Forgets `key`; `false` when it was not remembered.
///
/// # Errors
/// Fails on a database error.
pub async fn delete(db: &impl ConnectionTrait, identity_id: Uuid, key: &str) -> Result<bool> {
    let result = memory_entry::Entity::delete_many()
        .filter(memory_entry::Column::IdentityId.eq(identity_id))
        .filter(memory_entry::Column::Key.eq(key))
        .exec(db)
        .await?;
    Ok(result.rows_affected > 0)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::identities;

    /// The joined read answers what the two reads it replaces answered: the identity, its
    /// entries in key order (one row each, though the identity's columns repeat on every
    /// row), none for an identity without memory, and nothing outside the workspace.
    #[tokio::test]
    async fn an_identity_is_read_with_its_memory_in_one_statement() {
        let (_dir, db) = crate::test_support::migrated().await;
        let now = crate::clock::now();
        let ws = crate::test_support::workspace(&db, "w", now).await;
        let mut people = Vec::new();
        for name in ["Ana", "Rui"] {
            let new = identities::NewIdentity {
                id: Uuid::now_v7(),
                name: Some(name.to_owned()),
                external_id: None,
                metadata: json!({}),
                opted_out: false,
            };
            people.push(
                identities::create(&db, ws, new, now)
                    .await
                    .expect("identity"),
            );
        }
        for key in ["profile.name", "a.first", "z.last"] {
            upsert(&db, ws, people[0].id, key, json!(key), json!({}), now)
                .await
                .expect("memory");
        }

        let (identity, memory) = identity_with_memory(&db, ws, people[0].id)
            .await
            .expect("read")
            .expect("found");
        assert_eq!(identity, people[0]);
        let keys: Vec<&str> = memory.iter().map(|entry| entry.key.as_str()).collect();
        assert_eq!(keys, ["a.first", "profile.name", "z.last"]);
        assert_eq!(memory, list(&db, people[0].id).await.expect("list"));

        let (identity, memory) = identity_with_memory(&db, ws, people[1].id)
            .await
            .expect("read")
            .expect("found");
        assert_eq!(identity, people[1]);
        assert!(memory.is_empty(), "{memory:?}");

        for (workspace, id) in [(ws + 1, people[0].id), (ws, Uuid::now_v7())] {
            let found = identity_with_memory(&db, workspace, id)
                .await
                .expect("read");
            assert!(found.is_none(), "{found:?}");
        }
    }
}
