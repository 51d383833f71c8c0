//! Businesses and users: the tenants behind workspaces, and the people keys act for.

use chrono::{DateTime, Utc};
use sea_orm::{ActiveModelTrait, ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter, Set};
use uuid::Uuid;

use crate::Result;
use crate::entities::{business, user, workspace_member};

/// Returns the business called `name`, creating it when there is none.
///
/// # Errors
/// Fails on a database error.
pub async fn find_or_create_business(
    db: &impl ConnectionTrait,
    name: &str,
    now: DateTime<Utc>,
) -> Result<business::Model> {
    if let Some(found) = business::Entity::find()
        .filter(business::Column::Name.eq(name))
        .one(db)
        .await?
    {
        return Ok(found);
    }
    let created = business::ActiveModel {
        id: Set(Uuid::now_v7()),
        name: Set(name.to_owned()),
        created_at: Set(now),
    }
    .insert(db)
    .await?;
    Ok(created)
}

/// Returns the user of `business_id` with `email` (already lower-cased), creating it when there is
/// none. A user without e-mail is always new.
///
/// # Errors
/// Fails on a database error.
pub async fn find_or_create_user(
    db: &impl ConnectionTrait,
    business_id: Uuid,
    email: Option<&str>,
    now: DateTime<Utc>,
) -> Result<user::Model> {
    if let Some(email) = email
        && let Some(found) = user::Entity::find()
            .filter(user::Column::BusinessId.eq(business_id))
            .filter(user::Column::Email.eq(email))
            .one(db)
            .await?
    {
        return Ok(found);
    }
    let created = user::ActiveModel {
        id: Set(Uuid::now_v7()),
        business_id: Set(business_id),
        email: Set(email.map(str::to_owned)),
        created_at: Set(now),
    }
    .insert(db)
    .await?;
    Ok(created)
}

/// The user a workspace's operator tools act as: its owner, else its oldest member.
///
/// # Errors
/// Fails on a database error.
pub async fn workspace_owner(
    db: &impl ConnectionTrait,
    workspace_id: i64,
) -> Result<Option<user::Model>> {
    let members = workspace_member::Entity::find()
        .filter(workspace_member::Column::WorkspaceId.eq(workspace_id))
        .all(db)
        .await?;
    let chosen = members
        .iter()
        .filter(|m| m.role == workspace_member::ROLE_OWNER)
        .chain(members.iter())
        .min_by_key(|m| (m.role != workspace_member::ROLE_OWNER, m.created_at));
    match chosen {
        Some(member) => Ok(user::Entity::find_by_id(member.user_id).one(db).await?),
        None => Ok(None),
    }
}
