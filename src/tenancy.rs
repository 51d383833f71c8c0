//! Operations on tenants that both the HTTP API and the operator CLI perform: issuing API keys
//! and bootstrapping the first business, workspace, user and key.

use anyhow::Context;
use chrono::{DateTime, Utc};
use parley_persistence::api_keys::{self, NewApiKey};
use parley_persistence::clock;
use parley_persistence::entities::api_key;
use parley_persistence::{ConnectionTrait, DatabaseConnection, PersistenceError};
use parley_persistence::{tenancy, workspaces};
use serde::Serialize;
use uuid::Uuid;

use crate::domain::{ApiKeySecret, Name, Permissions};

/// Creates a key for `user_id` in `workspace_id`. The returned secret is the only copy.
///
/// # Errors
/// Fails on a database error.
pub async fn issue_api_key(
    db: &impl ConnectionTrait,
    workspace_id: i64,
    user_id: Uuid,
    name: &Name,
    permissions: &Permissions,
    expires_at: Option<DateTime<Utc>>,
) -> Result<(api_key::Model, ApiKeySecret), PersistenceError> {
    let secret = ApiKeySecret::generate();
    let stored = api_keys::insert(
        db,
        NewApiKey {
            workspace_id,
            user_id,
            name: name.as_str().to_owned(),
            key_hash: secret.hash().to_owned(),
            permissions: permissions.to_storage(),
            expires_at: expires_at.map(clock::at_storage_precision),
        },
        clock::now(),
    )
    .await?;
    Ok((stored, secret))
}

/// What the operator asks bootstrap to create.
#[derive(Clone, Debug)]
pub struct BootstrapRequest {
    /// Name of the first workspace.
    pub workspace: String,
    /// Name of the business; an existing business of that name is reused.
    pub business: String,
    /// The owner's e-mail; an existing user of the business with it is reused.
    pub email: Option<String>,
}

/// What bootstrap created; `--json` prints exactly this.
#[derive(Debug, Serialize)]
pub struct Bootstrapped {
    /// The business.
    pub business_id: Uuid,
    /// The new workspace.
    pub workspace_id: i64,
    /// The owner.
    pub user_id: Uuid,
    /// The first key, with every permission; shown once.
    pub api_key: String,
}

/// Creates (or reuses) the business and owner, then a new workspace and its first key with every
/// permission, all in one transaction.
///
/// # Errors
/// Fails when a name is invalid, the business already has a workspace of that name, or the
/// database fails.
pub async fn bootstrap(
    db: &DatabaseConnection,
    request: &BootstrapRequest,
) -> anyhow::Result<Bootstrapped> {
    let workspace_name = Name::try_from(request.workspace.as_str())
        .map_err(|e| anyhow::anyhow!("workspace name {e}"))?;
    let business_name = Name::try_from(request.business.as_str())
        .map_err(|e| anyhow::anyhow!("business name {e}"))?;
    let email = request.email.as_deref().map(normalise_email).transpose()?;

    let now = clock::now();
    let txn = parley_persistence::begin_write(db)
        .await
        .context("starting the bootstrap transaction")?;
    let business = tenancy::find_or_create_business(&txn, business_name.as_str(), now).await?;
    let user = tenancy::find_or_create_user(&txn, business.id, email.as_deref(), now).await?;
    let workspace = match workspaces::create_with_owner(
        &txn,
        business.id,
        user.id,
        workspace_name.as_str(),
        None,
        now,
    )
    .await
    {
        Err(PersistenceError::Conflict(_)) => anyhow::bail!(
            "business '{}' already has a workspace named '{}'; use `parley admin create-key` to \
             issue another key for it",
            business.name,
            workspace_name.as_str()
        ),
        other => other?,
    };
    let (_, secret) = issue_api_key(
        &txn,
        workspace.id,
        user.id,
        &Name::try_from("bootstrap").map_err(|e| anyhow::anyhow!("{e}"))?,
        &Permissions::all(),
        None,
    )
    .await?;
    txn.commit().await.context("committing the bootstrap")?;
    Ok(Bootstrapped {
        business_id: business.id,
        workspace_id: workspace.id,
        user_id: user.id,
        api_key: secret.expose().to_owned(),
    })
}

/// Lower-cases an e-mail address after a minimal shape check.
///
/// # Errors
/// Fails when the address has no `@` with text on both sides.
pub fn normalise_email(email: &str) -> anyhow::Result<String> {
    let email = email.trim().to_lowercase();
    match email.split_once('@') {
        Some((local, domain)) if !local.is_empty() && domain.contains('.') => Ok(email),
        _ => anyhow::bail!("'{email}' is not an e-mail address"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_email_is_lower_cased_and_trimmed() {
        assert_eq!(
            normalise_email(" Ana@Example.COM ").expect("valid"),
            "ana@example.com"
        );
    }

    #[test]
    fn an_email_without_a_domain_is_rejected() {
        assert!(normalise_email("ana@").is_err());
        assert!(normalise_email("ana").is_err());
    }
}
