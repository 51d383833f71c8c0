//! Operators: the people who answer a workspace's conversations in the console. Their
//! accounts and invitations here; their console sessions, notes and saved replies in the
//! submodules.

pub mod assignments;
pub mod notes;
pub mod saved_replies;
pub mod sessions;

use chrono::{DateTime, Utc};
use sea_orm::sea_query::Expr;
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, DatabaseConnection, EntityTrait, QueryFilter,
    QueryOrder, Set,
};
use uuid::Uuid;

use crate::entities::{operator, operator_invitation};
use crate::page::fetch_page;
use crate::{Page, Paged, Result};

/// An operator to invite.
#[derive(Clone, Debug)]
pub struct NewOperator {
    /// Their workspace.
    pub workspace_id: i64,
    /// Their address (stored lower-cased).
    pub email: String,
    /// Their name.
    pub name: String,
    /// `agent` or `supervisor`.
    pub role: String,
}

/// Stores `new` without a password, with a one-time invitation under `token_hash` until
/// `expires_at`, in one transaction.
///
/// # Errors
/// [`crate::PersistenceError::Conflict`] when the workspace has an operator of that address.
pub async fn invite(
    db: &DatabaseConnection,
    new: NewOperator,
    token_hash: String,
    expires_at: DateTime<Utc>,
    now: DateTime<Utc>,
) -> Result<operator::Model> {
    let txn = crate::begin_write(db).await?;
    let stored = operator::ActiveModel {
        id: Set(Uuid::now_v7()),
        workspace_id: Set(new.workspace_id),
        email: Set(new.email.to_lowercase()),
        name: Set(new.name),
        role: Set(new.role),
        password_hash: Set(None),
        disabled_at: Set(None),
        created_at: Set(now),
    }
    .insert(&txn)
    .await?;
    invitation(&txn, stored.id, token_hash, expires_at, now).await?;
    txn.commit().await?;
    Ok(stored)
}

/// A new invitation for operator `operator_id` (the earlier ones stop being accepted).
///
/// # Errors
/// Fails on a database error.
pub async fn invitation(
    db: &impl ConnectionTrait,
    operator_id: Uuid,
    token_hash: String,
    expires_at: DateTime<Utc>,
    now: DateTime<Utc>,
) -> Result<()> {
    operator_invitation::Entity::update_many()
        .col_expr(operator_invitation::Column::UsedAt, Expr::value(now))
        .filter(operator_invitation::Column::OperatorId.eq(operator_id))
        .filter(operator_invitation::Column::UsedAt.is_null())
        .exec(db)
        .await?;
    operator_invitation::ActiveModel {
        token_hash: Set(token_hash),
        operator_id: Set(operator_id),
        expires_at: Set(expires_at),
        used_at: Set(None),
        created_at: Set(now),
    }
    .insert(db)
    .await?;
    Ok(())
}

/// The invitation of `token_hash` and whom it invites.
///
/// # Errors
/// Fails on a database error.
pub async fn find_invitation(
    db: &impl ConnectionTrait,
    token_hash: &str,
) -> Result<Option<(operator_invitation::Model, operator::Model)>> {
    let Some(invitation) = operator_invitation::Entity::find_by_id(token_hash.to_owned())
        .one(db)
        .await?
    else {
        return Ok(None);
    };
    let invited = operator::Entity::find_by_id(invitation.operator_id)
        .one(db)
        .await?;
    Ok(invited.map(|o| (invitation, o)))
}

/// Answers the invitation of `token_hash`: sets the operator's name and password hash, once.
/// `false` when it was used meanwhile (two answers raced: one wins).
///
/// # Errors
/// Fails on a database error.
pub async fn accept(
    db: &DatabaseConnection,
    token_hash: &str,
    operator_id: Uuid,
    name: &str,
    password_hash: String,
    now: DateTime<Utc>,
) -> Result<bool> {
    let txn = crate::begin_write(db).await?;
    let used = operator_invitation::Entity::update_many()
        .col_expr(operator_invitation::Column::UsedAt, Expr::value(now))
        .filter(operator_invitation::Column::TokenHash.eq(token_hash))
        .filter(operator_invitation::Column::UsedAt.is_null())
        .filter(operator_invitation::Column::ExpiresAt.gt(now))
        .exec(&txn)
        .await?;
    if used.rows_affected != 1 {
        return Ok(false);
    }
    operator::Entity::update_many()
        .col_expr(operator::Column::PasswordHash, Expr::value(password_hash))
        .col_expr(operator::Column::Name, Expr::value(name.to_owned()))
        .filter(operator::Column::Id.eq(operator_id))
        .exec(&txn)
        .await?;
    txn.commit().await?;
    Ok(true)
}

/// The workspace's operator `id`.
///
/// # Errors
/// Fails on a database error.
pub async fn find(
    db: &impl ConnectionTrait,
    workspace_id: i64,
    id: Uuid,
) -> Result<Option<operator::Model>> {
    Ok(operator::Entity::find_by_id(id)
        .filter(operator::Column::WorkspaceId.eq(workspace_id))
        .one(db)
        .await?)
}

/// Operator `id`, in whichever workspace (a session's operator).
///
/// # Errors
/// Fails on a database error.
pub async fn find_any(db: &impl ConnectionTrait, id: Uuid) -> Result<Option<operator::Model>> {
    Ok(operator::Entity::find_by_id(id).one(db).await?)
}

/// The operators of any workspace with address `email` who may sign in (a password set, not
/// disabled), oldest first.
///
/// # Errors
/// Fails on a database error.
pub async fn signing_in(db: &impl ConnectionTrait, email: &str) -> Result<Vec<operator::Model>> {
    Ok(operator::Entity::find()
        .filter(operator::Column::Email.eq(email.to_lowercase()))
        .filter(operator::Column::PasswordHash.is_not_null())
        .filter(operator::Column::DisabledAt.is_null())
        .order_by_asc(operator::Column::CreatedAt)
        .all(db)
        .await?)
}

/// The workspace's operators, oldest first.
///
/// # Errors
/// Fails on a database error.
pub async fn list(
    db: &impl ConnectionTrait,
    workspace_id: i64,
    page: Page,
) -> Result<Paged<operator::Model>> {
    let query = operator::Entity::find()
        .filter(operator::Column::WorkspaceId.eq(workspace_id))
        .order_by_asc(operator::Column::CreatedAt)
        .order_by_asc(operator::Column::Id);
    fetch_page(db, query, page).await
}

/// The workspace's operators who may work (not disabled), by name: whom a supervisor assigns.
///
/// # Errors
/// Fails on a database error.
pub async fn active(db: &impl ConnectionTrait, workspace_id: i64) -> Result<Vec<operator::Model>> {
    Ok(operator::Entity::find()
        .filter(operator::Column::WorkspaceId.eq(workspace_id))
        .filter(operator::Column::DisabledAt.is_null())
        .order_by_asc(operator::Column::Name)
        .all(db)
        .await?)
}

/// What an admin changes of an operator.
#[derive(Clone, Debug, Default)]
pub struct OperatorChange {
    /// A new name.
    pub name: Option<String>,
    /// A new role.
    pub role: Option<String>,
    /// Disabled (`Some(true)`) or enabled again.
    pub disabled: Option<bool>,
}

/// Changes operator `id` of the workspace; a disabled operator's sessions end in the same
/// transaction. Answers the row as it is now (`None`: no such operator).
///
/// # Errors
/// Fails on a database error.
pub async fn change(
    db: &DatabaseConnection,
    workspace_id: i64,
    id: Uuid,
    change: OperatorChange,
    now: DateTime<Utc>,
) -> Result<Option<operator::Model>> {
    let txn = crate::begin_write(db).await?;
    let Some(found) = find(&txn, workspace_id, id).await? else {
        return Ok(None);
    };
    let mut row: operator::ActiveModel = found.clone().into();
    if let Some(name) = change.name {
        row.name = Set(name);
    }
    if let Some(role) = change.role {
        row.role = Set(role);
    }
    match change.disabled {
        Some(true) if found.disabled_at.is_none() => {
            row.disabled_at = Set(Some(now));
            sessions::end_of_operator(&txn, id).await?;
            unassign_all(&txn, id).await?;
        }
        Some(false) => row.disabled_at = Set(None),
        _ => {}
    }
    let changed = row.update(&txn).await?;
    txn.commit().await?;
    Ok(Some(changed))
}

/// Returns every conversation assigned to `operator_id` to the queue.
async fn unassign_all(db: &impl ConnectionTrait, operator_id: Uuid) -> Result<()> {
    use crate::entities::conversation;
    conversation::Entity::update_many()
        .col_expr(
            conversation::Column::AssignedOperatorId,
            Expr::value(Option::<Uuid>::None),
        )
        .col_expr(
            conversation::Column::AssignedAt,
            Expr::value(Option::<DateTime<Utc>>::None),
        )
        .filter(conversation::Column::AssignedOperatorId.eq(operator_id))
        .exec(db)
        .await?;
    Ok(())
}

/// The names of operators `ids`, for a history that shows who answered.
///
/// # Errors
/// Fails on a database error.
pub async fn names(
    db: &impl ConnectionTrait,
    ids: &[Uuid],
) -> Result<std::collections::HashMap<Uuid, String>> {
    if ids.is_empty() {
        return Ok(std::collections::HashMap::new());
    }
    Ok(operator::Entity::find()
        .filter(operator::Column::Id.is_in(ids.iter().copied()))
        .all(db)
        .await?
        .into_iter()
        .map(|o| (o.id, o.name))
        .collect())
}
