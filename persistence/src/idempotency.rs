//! `Idempotency-Key`s: the first request with a key reserves it; its answer is kept for the
//! retries; keys live 24 hours per workspace.

use chrono::{DateTime, Utc};
use sea_orm::{ActiveModelTrait, ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter, Set};
use serde_json::Value;
use uuid::Uuid;

use crate::entities::idempotency_key;
use crate::{PersistenceError, Result};

/// What a reservation found.
#[derive(Clone, Debug, PartialEq)]
pub enum Reservation {
    /// The key is new: this request goes ahead and its answer is kept under `id`.
    Reserved(Uuid),
    /// The key was used before (or is being used now).
    Taken(idempotency_key::Model),
}

/// Reserves `key` for a request with `fingerprint`, unless it is in use since `fresh_since`;
/// an older use of the key is forgotten.
///
/// # Errors
/// Fails on a database error.
pub async fn reserve(
    db: &impl ConnectionTrait,
    workspace_id: i64,
    key: &str,
    fingerprint: &str,
    fresh_since: DateTime<Utc>,
    now: DateTime<Utc>,
) -> Result<Reservation> {
    idempotency_key::Entity::delete_many()
        .filter(idempotency_key::Column::WorkspaceId.eq(workspace_id))
        .filter(idempotency_key::Column::Key.eq(key))
        .filter(idempotency_key::Column::CreatedAt.lt(fresh_since))
        .exec(db)
        .await?;
    let id = Uuid::now_v7();
    let inserted = idempotency_key::ActiveModel {
        id: Set(id),
        workspace_id: Set(workspace_id),
        key: Set(key.to_owned()),
        fingerprint: Set(fingerprint.to_owned()),
        status_code: Set(None),
        response: Set(None),
        created_at: Set(now),
    }
    .insert(db)
    .await;
    match inserted.map_err(PersistenceError::from) {
        Ok(_) => Ok(Reservation::Reserved(id)),
        Err(PersistenceError::Conflict(_)) => {
            let existing = idempotency_key::Entity::find()
                .filter(idempotency_key::Column::WorkspaceId.eq(workspace_id))
                .filter(idempotency_key::Column::Key.eq(key))
                .one(db)
                .await?;
            match existing {
                Some(existing) => Ok(Reservation::Taken(existing)),
                // Forgotten between the insert and the read: the caller may try again.
                None => Err(PersistenceError::Conflict(
                    "the idempotency key changed hands".to_owned(),
                )),
            }
        }
        Err(other) => Err(other),
    }
}

/// Keeps the answer of the request that reserved `id`.
///
/// # Errors
/// Fails on a database error.
pub async fn complete(
    db: &impl ConnectionTrait,
    id: Uuid,
    status_code: u16,
    response: Value,
) -> Result<()> {
    idempotency_key::Entity::update_many()
        .col_expr(
            idempotency_key::Column::StatusCode,
            Some(i32::from(status_code)).into(),
        )
        .col_expr(idempotency_key::Column::Response, Some(response).into())
        .filter(idempotency_key::Column::Id.eq(id))
        .exec(db)
        .await?;
    Ok(())
}

/// Releases a reservation whose request failed in a way a retry may fix.
///
/// # Errors
/// Fails on a database error.
pub async fn release(db: &impl ConnectionTrait, id: Uuid) -> Result<()> {
    idempotency_key::Entity::delete_by_id(id).exec(db).await?;
    Ok(())
}
