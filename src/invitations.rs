//! Operators' invitations, made the same way by the API and the console: a one-time token
//! (kept as its SHA-256) for 48 hours, its link on this server, mailed when a relay is set.

use axum::http::HeaderMap;
use chrono::{DateTime, Utc};
use parley_persistence::entities::operator;
use parley_persistence::operators::{self, NewOperator};
use parley_persistence::{DatabaseConnection, PersistenceError, clock};

use crate::config::Settings;

/// How long an invitation link is accepted.
pub(crate) const INVITATION_HOURS: i64 = 48;

/// An operator with a fresh link.
#[derive(Debug)]
pub(crate) struct Invited {
    /// The operator.
    pub(crate) operator: operator::Model,
    /// The one-time link where they set their password.
    pub(crate) url: String,
    /// When it stops working.
    pub(crate) expires_at: DateTime<Utc>,
    /// Whether the relay took the mail.
    pub(crate) mailed: bool,
}

/// Stores `new` (without a password) with an invitation; answers its link, mailed when a relay
/// is set. `base` is where this server is reached ([`base_url`]).
///
/// # Errors
/// [`PersistenceError::Conflict`] when the workspace has an operator of that address.
pub(crate) async fn invite(
    db: &DatabaseConnection,
    settings: &Settings,
    base: &str,
    new: NewOperator,
) -> Result<Invited, PersistenceError> {
    let (token, hash, expires_at) = token();
    let stored = operators::invite(db, new, hash, expires_at, clock::now()).await?;
    tracing::info!(operator_id = %stored.id, "operator invited");
    Ok(linked(settings, base, stored, &token, expires_at).await)
}

/// A new link for `operator` (the earlier ones stop working).
///
/// # Errors
/// The database's.
pub(crate) async fn renew(
    db: &DatabaseConnection,
    settings: &Settings,
    base: &str,
    operator: operator::Model,
) -> Result<Invited, PersistenceError> {
    let (token, hash, expires_at) = token();
    operators::invitation(db, operator.id, hash, expires_at, clock::now()).await?;
    Ok(linked(settings, base, operator, &token, expires_at).await)
}

/// A fresh token, its stored hash, and when it expires.
fn token() -> (String, String, DateTime<Utc>) {
    let token = crate::tokens::random_token();
    let hash = crate::tokens::digest(&token);
    let expires_at = clock::now() + chrono::Duration::hours(INVITATION_HOURS);
    (token, hash, expires_at)
}

async fn linked(
    settings: &Settings,
    base: &str,
    operator: operator::Model,
    token: &str,
    expires_at: DateTime<Utc>,
) -> Invited {
    let url = format!("{base}/console/invitation/{token}");
    let mailed = crate::mail::invitation(&settings.mail, &operator.email, &url).await;
    Invited {
        operator,
        url,
        expires_at,
        mailed,
    }
}

/// Where this server is reached: the configured public URL, else the request's own host.
pub(crate) fn base_url(settings: &Settings, headers: &HeaderMap) -> String {
    if let Some(public) = settings.server.public_url.as_deref() {
        return public.trim_end_matches('/').to_owned();
    }
    let host = headers
        .get(axum::http::header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or("localhost");
    format!("http://{host}")
}
