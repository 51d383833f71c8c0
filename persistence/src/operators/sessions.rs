//! Console sessions as rows: valid on every node that shares the database, kept over a
//! restart. The cookie's token is only ever hashed here.

use chrono::{DateTime, Utc};
use sea_orm::sea_query::Expr;
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, EntityTrait, PaginatorTrait, QueryFilter,
    QueryOrder, QuerySelect, Set,
};
use uuid::Uuid;

use crate::Result;
use crate::entities::console_session;

/// Who a session is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Holder {
    /// An operator who signed in with their password.
    Operator(Uuid),
    /// An admin who signed in with an API key.
    Key(Uuid),
}

impl Holder {
    /// The holder of a stored session (`None` for a row with neither, which no release writes).
    pub fn of(row: &console_session::Model) -> Option<Self> {
        row.operator_id
            .map(Self::Operator)
            .or(row.api_key_id.map(Self::Key))
    }

    fn condition(self) -> sea_orm::Condition {
        match self {
            Self::Operator(id) => {
                sea_orm::Condition::all().add(console_session::Column::OperatorId.eq(id))
            }
            Self::Key(id) => {
                sea_orm::Condition::all().add(console_session::Column::ApiKeyId.eq(id))
            }
        }
    }
}

/// How many sessions one holder, and one workspace, keep at most: past either, the least
/// recently used of those go (never another workspace's).
#[derive(Clone, Copy, Debug)]
pub struct Bounds {
    /// Per operator or key.
    pub per_holder: u64,
    /// Per workspace.
    pub per_workspace: u64,
}

/// Starts the session of `token_hash` for `holder` in `workspace_id`, ending the least
/// recently used of the holder's and the workspace's past `bounds`.
///
/// # Errors
/// Fails on a database error.
pub async fn start(
    db: &impl ConnectionTrait,
    token_hash: String,
    workspace_id: i64,
    holder: Holder,
    bounds: Bounds,
    now: DateTime<Utc>,
) -> Result<()> {
    evict(db, holder.condition(), bounds.per_holder).await?;
    evict(
        db,
        sea_orm::Condition::all().add(console_session::Column::WorkspaceId.eq(workspace_id)),
        bounds.per_workspace,
    )
    .await?;
    let (operator_id, api_key_id) = match holder {
        Holder::Operator(id) => (Some(id), None),
        Holder::Key(id) => (None, Some(id)),
    };
    console_session::ActiveModel {
        token_hash: Set(token_hash),
        workspace_id: Set(workspace_id),
        operator_id: Set(operator_id),
        api_key_id: Set(api_key_id),
        created_at: Set(now),
        seen_at: Set(now),
    }
    .insert(db)
    .await?;
    Ok(())
}

/// Of the sessions `whose` picks, ends the least recently used until fewer than `most` are
/// left (room for one more).
async fn evict(db: &impl ConnectionTrait, whose: sea_orm::Condition, most: u64) -> Result<()> {
    let held = console_session::Entity::find()
        .filter(whose.clone())
        .count(db)
        .await?;
    if held < most {
        return Ok(());
    }
    let oldest: Vec<String> = console_session::Entity::find()
        .select_only()
        .column(console_session::Column::TokenHash)
        .filter(whose)
        .order_by_asc(console_session::Column::SeenAt)
        .limit(held + 1 - most)
        .into_tuple()
        .all(db)
        .await?;
    console_session::Entity::delete_many()
        .filter(console_session::Column::TokenHash.is_in(oldest))
        .exec(db)
        .await?;
    Ok(())
}

/// The session of `token_hash`.
///
/// # Errors
/// Fails on a database error.
pub async fn find(
    db: &impl ConnectionTrait,
    token_hash: &str,
) -> Result<Option<console_session::Model>> {
    Ok(console_session::Entity::find_by_id(token_hash.to_owned())
        .one(db)
        .await?)
}

/// Marks the session of `token_hash` used at `now`.
///
/// # Errors
/// Fails on a database error.
pub async fn touch(db: &impl ConnectionTrait, token_hash: &str, now: DateTime<Utc>) -> Result<()> {
    console_session::Entity::update_many()
        .col_expr(console_session::Column::SeenAt, Expr::value(now))
        .filter(console_session::Column::TokenHash.eq(token_hash))
        .exec(db)
        .await?;
    Ok(())
}

/// Ends the session of `token_hash`.
///
/// # Errors
/// Fails on a database error.
pub async fn end(db: &impl ConnectionTrait, token_hash: &str) -> Result<()> {
    console_session::Entity::delete_by_id(token_hash.to_owned())
        .exec(db)
        .await?;
    Ok(())
}

/// Ends every session of `holder` (sign-out everywhere); answers how many ended.
///
/// # Errors
/// Fails on a database error.
pub async fn end_all(db: &impl ConnectionTrait, holder: Holder) -> Result<u64> {
    Ok(console_session::Entity::delete_many()
        .filter(holder.condition())
        .exec(db)
        .await?
        .rows_affected)
}

/// Ends every session of operator `operator_id` (disabled).
///
/// # Errors
/// Fails on a database error.
pub async fn end_of_operator(db: &impl ConnectionTrait, operator_id: Uuid) -> Result<u64> {
    end_all(db, Holder::Operator(operator_id)).await
}

/// Forgets the sessions idle since before `idle_before` or started before `started_before`.
///
/// # Errors
/// Fails on a database error.
pub async fn purge(
    db: &impl ConnectionTrait,
    idle_before: DateTime<Utc>,
    started_before: DateTime<Utc>,
) -> Result<u64> {
    Ok(console_session::Entity::delete_many()
        .filter(
            sea_orm::Condition::any()
                .add(console_session::Column::SeenAt.lt(idle_before))
                .add(console_session::Column::CreatedAt.lt(started_before)),
        )
        .exec(db)
        .await?
        .rows_affected)
}
