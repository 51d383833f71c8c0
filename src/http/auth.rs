//! Bearer API-key authentication and the permission check every handler makes.

use std::net::{IpAddr, SocketAddr};
use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{ConnectInfo, FromRequestParts};
use axum::http::header::AUTHORIZATION;
use axum::http::request::Parts;
use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};
use parley_actors::tree::spawn_behind;
use parley_persistence::{DatabaseConnection, api_keys, clock};
use subtle::ConstantTimeEq;
use uuid::Uuid;

pub(crate) mod rate_limits;

use crate::domain::{Permission, Permissions, hash_api_key};
use crate::http::AppState;
use crate::http::error::ApiError;
use parley_actors::remembered::Remembered;

/// How often `last_used_at` is written for a key in steady use.
const LAST_USED_RESOLUTION: chrono::Duration = chrono::Duration::minutes(1);

/// The authenticated caller: an API key acting for a user in a workspace.
#[derive(Clone, Debug)]
pub(crate) struct Caller {
    /// The workspace the key belongs to; every resource query is scoped by it.
    pub(crate) workspace_id: i64,
    /// The business owning that workspace.
    pub(crate) business_id: Uuid,
    /// The user the key acts for.
    pub(crate) user_id: Uuid,
    /// What the key may do.
    pub(crate) permissions: Permissions,
}

impl Caller {
    /// 403 unless the key carries `permission`.
    pub(crate) fn require(&self, permission: Permission) -> Result<(), ApiError> {
        if self.permissions.contains(permission) {
            Ok(())
        } else {
            Err(ApiError::lacking(permission))
        }
    }
}

impl FromRequestParts<AppState> for Caller {
    type Rejection = ApiError;

    #[tracing::instrument(name = "authenticate", level = "debug", skip_all)]
    async fn from_request_parts(
        parts: &mut Parts,
        state: &AppState,
    ) -> Result<Self, Self::Rejection> {
        let refused = || state.auth_failures.refuse(parts);
        let presented = bearer_token(parts).ok_or_else(refused)?;
        let known = known_key(state, &hash_api_key(presented))
            .await?
            .ok_or_else(refused)?;
        let span = tracing::Span::current();
        span.record("workspace_id", known.caller.workspace_id);
        span.record("api_key_id", tracing::field::display(known.key_id));
        within_rate(state, parts, &known).await?;
        Ok(known.caller)
    }
}

/// Counts the request against its workspace's requests per second per key, when it has that
/// quota; the key's standing goes to the response's headers.
async fn within_rate(state: &AppState, parts: &Parts, known: &KnownKey) -> Result<(), ApiError> {
    let workspace_id = known.caller.workspace_id;
    let quotas = state.actors.outbox().quotas().of(workspace_id).await?;
    let Some(per_second) = quotas.requests_per_second_per_key else {
        return Ok(());
    };
    let slot = parts.extensions.get::<rate_limits::StandingSlot>();
    match state
        .key_limits
        .admit(workspace_id, per_second, known.key_id)
    {
        Ok(standing) => {
            slot.inspect(|slot| slot.set(standing));
            Ok(())
        }
        Err((refusal, standing)) => {
            slot.inspect(|slot| slot.set(standing));
            Err(refusal)
        }
    }
}

/// What the key of `hash` grants now: `None` when there is no such key, or it was revoked or
/// has expired. Remembered for a few seconds ([`KnownKeys`]); records when it was used.
async fn known_key(state: &AppState, hash: &str) -> Result<Option<KnownKey>, ApiError> {
    // What the read needs is copied only when it is made (a miss, or a refresh).
    let read = || {
        let (db, hash) = (state.db.clone(), hash.to_owned());
        async move { read_key(&db, &hash).await }
    };
    let Some(known) = state.known_keys.0.recall(hash, read).await? else {
        return Ok(None);
    };
    let now = clock::now();
    if known.expires_at.is_some_and(|at| at <= now) {
        return Ok(None);
    }
    if known
        .last_used_at
        .is_none_or(|at| now - at >= LAST_USED_RESOLUTION)
    {
        // Recorded without holding up the request: the time is only kept to the minute.
        state
            .known_keys
            .0
            .update(hash, |known| known.last_used_at = Some(now));
        let (db, key_id) = (state.db.clone(), known.key_id);
        spawn_behind(async move {
            if let Err(error) = api_keys::touch(&db, key_id, now).await {
                tracing::warn!(%error, %key_id, "could not record when the key was used");
            }
        });
    }
    Ok(Some(known))
}

/// The caller a key's hash stands for now (the console keeps the hash, never the key): `None`
/// when the key is unknown, revoked or expired.
pub(crate) async fn caller_of(state: &AppState, hash: &str) -> Result<Option<Caller>, ApiError> {
    Ok(known_key(state, hash).await?.map(|known| known.caller))
}

/// [`caller_of`], with the key's id (what a console session of the key records).
pub(crate) async fn key_of(
    state: &AppState,
    hash: &str,
) -> Result<Option<(Caller, Uuid)>, ApiError> {
    Ok(known_key(state, hash)
        .await?
        .map(|known| (known.caller, known.key_id)))
}

/// How long an authenticated key is answered from memory before it is read again.
const KNOWN_KEY_TTL: Duration = Duration::from_secs(10);

/// Keys that authenticated in the last [`KNOWN_KEY_TTL`], by hash, so that a request does not
/// read its key (and workspace) again: one statement less on every authenticated request.
/// Only successes are remembered (a wrong key always reaches the database and the failure
/// limiter); expiry is checked on every use; a key revoked through this server is forgotten
/// at once, here and (through the announced change) on every node of a cluster. A key
/// revoked by hand in the database is refused here within [`KNOWN_KEY_TTL`].
#[derive(Clone, Debug)]
pub(crate) struct KnownKeys(Remembered<String, KnownKey>);

impl Default for KnownKeys {
    fn default() -> Self {
        Self(Remembered::new(KNOWN_KEY_TTL))
    }
}

/// What a remembered key grants.
#[derive(Clone, Debug)]
struct KnownKey {
    caller: Caller,
    key_id: Uuid,
    expires_at: Option<chrono::DateTime<chrono::Utc>>,
    last_used_at: Option<chrono::DateTime<chrono::Utc>>,
}

/// What the key of `hash` grants, read from the database: `None` when there is no such key or
/// it was revoked.
async fn read_key(db: &DatabaseConnection, hash: &str) -> Result<Option<KnownKey>, ApiError> {
    let Some((key, workspace)) = api_keys::find_by_hash(db, hash).await? else {
        return Ok(None);
    };
    if key.revoked_at.is_some() {
        return Ok(None);
    }
    Ok(Some(KnownKey {
        caller: Caller {
            workspace_id: key.workspace_id,
            business_id: workspace.business_id,
            user_id: key.user_id,
            permissions: Permissions::from_storage(&key.permissions),
        },
        key_id: key.id,
        expires_at: key.expires_at,
        last_used_at: key.last_used_at,
    }))
}

impl KnownKeys {
    /// Forgets a key (it was revoked): its next request reads it again, and is refused.
    pub(crate) fn forget(&self, key_id: Uuid) {
        self.0.forget(|_, known| known.key_id == key_id);
    }
}

impl parley_actors::changes::Listener for KnownKeys {
    /// A key revoked (here, or on another node of a cluster) is forgotten at once.
    fn changed(&self, change: &parley_actors::Change) {
        if let parley_actors::Change::KeyRevoked { key_id, .. } = change {
            self.forget(*key_id);
        }
    }
}

fn bearer_token(parts: &Parts) -> Option<&str> {
    let value = parts.headers.get(AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// Failed authentication, counted per client address: past the allowance an address gets 429
/// instead of 401 until it slows down. Valid keys never touch it, so they are never slowed.
#[derive(Clone, Debug)]
pub(crate) struct AuthFailures {
    limiter: Option<Arc<DefaultKeyedRateLimiter<IpAddr>>>,
}

/// Addresses remembered before the limiter forgets the quiet ones.
const REMEMBERED_ADDRESSES: usize = 10_000;

impl AuthFailures {
    /// Allows `per_minute` failures per address (bursts up to the same number); 0 turns it off.
    pub(crate) fn new(per_minute: u32) -> Self {
        let limiter =
            NonZeroU32::new(per_minute).map(|n| Arc::new(RateLimiter::keyed(Quota::per_minute(n))));
        Self { limiter }
    }

    /// The answer to a failed authentication from the request's client: 401, or 429 when the
    /// address has failed too often.
    fn refuse(&self, parts: &Parts) -> ApiError {
        let peer = parts.extensions.get::<ConnectInfo<SocketAddr>>();
        self.refuse_from(peer.map(|ConnectInfo(peer)| peer.ip()))
    }

    /// As [`AuthFailures::refuse`], for a client at `peer` (`None`: unknown, never slowed).
    pub(crate) fn refuse_from(&self, peer: Option<IpAddr>) -> ApiError {
        let (Some(limiter), Some(peer)) = (self.limiter.as_ref(), peer) else {
            return ApiError::Unauthenticated;
        };
        if limiter.len() > REMEMBERED_ADDRESSES {
            limiter.retain_recent();
        }
        match limiter.check_key(&peer) {
            Ok(()) => ApiError::Unauthenticated,
            Err(not_until) => {
                let wait = not_until.wait_time_from(DefaultClock::default().now());
                ApiError::too_many_failures(wait.as_secs_f64().ceil() as u64)
            }
        }
    }
}

/// Who is looking.
pub(crate) enum Viewer {
    /// The operator, with the configured token.
    Operator,
    /// A workspace's key.
    Workspace(Caller),
}

impl FromRequestParts<AppState> for Viewer {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &AppState,
    ) -> Result<Self, Self::Rejection> {
        let presented = parts
            .headers
            .get(AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.split_once(' '))
            .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
            .map(|(_, token)| token.trim());
        if let (Some(presented), Some(operator)) =
            (presented, state.settings.server.operator_token.as_ref())
            && !operator.expose().is_empty()
            && bool::from(presented.as_bytes().ct_eq(operator.expose().as_bytes()))
        {
            return Ok(Self::Operator);
        }
        Caller::from_request_parts(parts, state)
            .await
            .map(Self::Workspace)
    }
}
