//! Console sessions: signing in (with an operator's e-mail and password, or an admin's API
//! key) starts a row in the database under the hash of a random token that only the browser's
//! cookie carries (HttpOnly, SameSite=Strict, Secure behind https); the CSRF token every form
//! sends back is derived from it. Rows make a session valid on every node of a cluster and
//! keep it over a restart. A session ends at sign-out (here or everywhere), after its idle time
//! or its longest life, with its key, and when its operator is disabled: every request reads
//! its row and asks again what its holder may do.

use std::net::IpAddr;
use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::Duration;

use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};

use axum::extract::FromRequestParts;
use axum::http::header::{COOKIE, LOCATION, SET_COOKIE};
use axum::http::request::Parts;
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use parley_persistence::entities::console_session;
use parley_persistence::operators::sessions::{self, Bounds, Holder};
use parley_persistence::{DatabaseConnection, PersistenceError, clock};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;
use uuid::Uuid;

use crate::domain::{Permission, Permissions};
use crate::http::AppState;
use crate::http::auth::{Caller, caller_of};

/// The cookie that carries the session token.
pub(super) const COOKIE_NAME: &str = "parley_console";

/// Sessions one holder (operator or key) may hold at once, and one workspace: past either the
/// least recently used of those goes. One tenant's sign-ins only ever end its own sessions.
const BOUNDS: Bounds = Bounds {
    per_holder: 20,
    per_workspace: 500,
};

/// Successful sign-ins one client address may make per minute (bursts up to the same
/// number): a key's holder cannot churn the sessions of its workspace.
const SIGN_INS_PER_MINUTE: u32 = 30;

/// Password attempts one account (an e-mail address) may make per minute, right or wrong,
/// on this node: guessing one person's password is slow from any number of addresses.
const ATTEMPTS_PER_ACCOUNT_PER_MINUTE: u32 = 5;

/// Accounts or addresses remembered before the limiters forget the quiet ones.
const REMEMBERED: usize = 100_000;

/// How often a session's last use is written: its idle time is kept to this precision, so
/// that a page's requests are not each a write.
const SEEN_RESOLUTION: chrono::Duration = chrono::Duration::seconds(60);

/// The console's sessions, kept in the database; cheap to clone.
#[derive(Clone, Debug)]
pub(crate) struct Sessions {
    db: DatabaseConnection,
    idle: Duration,
    longest: Duration,
    /// Successful sign-ins per client address.
    sign_ins: Arc<DefaultKeyedRateLimiter<IpAddr>>,
    /// Password attempts per account.
    attempts: Arc<DefaultKeyedRateLimiter<String>>,
}

/// Why a request has no session: what the sign-in page says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Ended {
    /// No cookie, or one no node issued (or one that was signed out, or whose operator was
    /// disabled).
    None,
    /// The session was idle too long or reached its longest life.
    Expired,
    /// Its key was revoked or expired.
    KeyGone,
}

impl Ended {
    /// The `why` of the sign-in page's address.
    pub(super) fn as_query(self) -> &'static str {
        match self {
            Self::None => "",
            Self::Expired => "expired",
            Self::KeyGone => "key",
        }
    }

    /// The sentence the sign-in page shows for `why`.
    pub(super) fn sentence(why: &str) -> Option<&'static str> {
        match why {
            "expired" => Some("Your session expired; sign in again."),
            "key" => {
                Some("The key of your session was revoked or has expired; sign in with another.")
            }
            "out" => Some("You signed out."),
            "everywhere" => Some("You signed out on every device."),
            "welcome" => Some("Your password is set: sign in with your e-mail address."),
            _ => None,
        }
    }
}

/// A limiter of `per_minute` (bursts up to the same number) per key.
fn per_minute<K: std::hash::Hash + Eq + Clone>(per_minute: u32) -> DefaultKeyedRateLimiter<K> {
    RateLimiter::keyed(Quota::per_minute(
        NonZeroU32::new(per_minute).unwrap_or(NonZeroU32::MIN),
    ))
}

/// How long until a limiter lets `key` through again, in whole seconds (at least 1).
fn admit<K: std::hash::Hash + Eq + Clone>(
    limiter: &DefaultKeyedRateLimiter<K>,
    key: &K,
) -> Result<(), u64> {
    if limiter.len() > REMEMBERED {
        limiter.retain_recent();
    }
    limiter.check_key(key).map_err(|not_until| {
        let wait = not_until.wait_time_from(DefaultClock::default().now());
        (wait.as_secs_f64().ceil() as u64).max(1)
    })
}

impl Sessions {
    /// Sessions in `db` lasting `idle` without a request and `longest` at most.
    pub(crate) fn new(db: DatabaseConnection, idle: Duration, longest: Duration) -> Self {
        Self {
            db,
            idle,
            longest,
            sign_ins: Arc::new(per_minute(SIGN_INS_PER_MINUTE)),
            attempts: Arc::new(per_minute(ATTEMPTS_PER_ACCOUNT_PER_MINUTE)),
        }
    }

    /// Whether `peer` may sign in once more now; how many seconds to wait otherwise.
    pub(super) fn admit_sign_in(&self, peer: Option<IpAddr>) -> Result<(), u64> {
        peer.map_or(Ok(()), |peer| admit(&self.sign_ins, &peer))
    }

    /// Whether account `email` may try a password once more now; how many seconds to wait
    /// otherwise.
    pub(super) fn admit_attempt(&self, email: &str) -> Result<(), u64> {
        admit(&self.attempts, &email.to_lowercase())
    }

    /// Starts a session for `holder` in `workspace_id`: answers the token for the cookie.
    /// Past the holder's or the workspace's bounds the least recently used of those goes; no
    /// other workspace's session is ever ended to make room. Sessions past their time are
    /// forgotten on the way.
    ///
    /// # Errors
    /// The database's.
    pub(super) async fn start(
        &self,
        workspace_id: i64,
        holder: Holder,
    ) -> Result<String, PersistenceError> {
        let now = clock::now();
        sessions::purge(
            &self.db,
            now - self.idle_chrono(),
            now - self.longest_chrono(),
        )
        .await?;
        let token = random_token();
        sessions::start(&self.db, digest(&token), workspace_id, holder, BOUNDS, now).await?;
        Ok(token)
    }

    /// Ends the session of `token` (nothing when there is none).
    ///
    /// # Errors
    /// The database's.
    pub(super) async fn end(&self, token: &str) -> Result<(), PersistenceError> {
        sessions::end(&self.db, &digest(token)).await
    }

    /// Ends every session of `holder`, on every node.
    ///
    /// # Errors
    /// The database's.
    pub(super) async fn end_everywhere(&self, holder: Holder) -> Result<u64, PersistenceError> {
        sessions::end_all(&self.db, holder).await
    }

    /// The session of `token`, marked as used now (to [`SEEN_RESOLUTION`]); why there is none
    /// otherwise. A database failure is not a reason to end a session: the request is sent
    /// to sign in without its cookie being cleared.
    async fn touch(&self, token: &str) -> Result<console_session::Model, Ended> {
        let hash = digest(token);
        let row = self.live(&hash).await?;
        let now = clock::now();
        if now - row.seen_at >= SEEN_RESOLUTION
            && let Err(error) = sessions::touch(&self.db, &hash, now).await
        {
            tracing::warn!(%error, "could not record a console session's use");
        }
        Ok(row)
    }

    /// The row of the session of `hash` while it lasts.
    async fn live(&self, hash: &str) -> Result<console_session::Model, Ended> {
        let row = match sessions::find(&self.db, hash).await {
            Ok(Some(row)) => row,
            Ok(None) => return Err(Ended::None),
            Err(error) => {
                tracing::warn!(%error, "could not read a console session");
                return Err(Ended::None);
            }
        };
        let now = clock::now();
        if now - row.seen_at >= self.idle_chrono() || now - row.created_at >= self.longest_chrono()
        {
            if let Err(error) = sessions::end(&self.db, hash).await {
                tracing::warn!(%error, "could not end an expired console session");
            }
            return Err(Ended::Expired);
        }
        Ok(row)
    }

    /// Whether the session of `token` is still on, without counting this as a use (a live
    /// page's stream does not keep its session from going idle).
    pub(super) async fn lives(&self, token: &str) -> bool {
        self.live(&digest(token)).await.is_ok()
    }

    /// How long a session lasts at most: the cookie's `Max-Age`.
    pub(super) fn longest(&self) -> Duration {
        self.longest
    }

    /// How long a session lasts without a request.
    pub(super) fn idle(&self) -> Duration {
        self.idle
    }

    fn idle_chrono(&self) -> chrono::Duration {
        chrono::Duration::from_std(self.idle).unwrap_or(chrono::Duration::MAX)
    }

    fn longest_chrono(&self) -> chrono::Duration {
        chrono::Duration::from_std(self.longest).unwrap_or(chrono::Duration::MAX)
    }
}

/// The stored form of a secret token: SHA-256, hex.
pub(crate) fn digest(token: &str) -> String {
    hex::encode(Sha256::digest(token.as_bytes()))
}

/// The CSRF token of the session of `token`: derived from it (the same on every node, never
/// stored), and telling nothing of it.
fn csrf_of(token: &str) -> String {
    let mut hasher = Sha256::new();
    hasher.update(b"parley-console-csrf\0");
    hasher.update(token.as_bytes());
    URL_SAFE_NO_PAD.encode(hasher.finalize())
}

/// 32 random bytes, URL-safe: a session's or an invitation's token.
pub(crate) fn random_token() -> String {
    let mut bytes = [0u8; 32];
    // The operating system's generator failing is not something a console can go on without.
    #[allow(clippy::expect_used)]
    getrandom::fill(&mut bytes).expect("the operating system's random generator");
    URL_SAFE_NO_PAD.encode(bytes)
}

/// Who a console session is for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Who {
    /// An admin signed in with a key.
    Key(Uuid),
    /// An operator.
    Operator {
        /// Their id.
        id: Uuid,
        /// Their name.
        name: String,
        /// Whether they supervise (assign others).
        supervisor: bool,
    },
}

/// A signed-in console request: who is looking, and the CSRF token its forms carry.
#[derive(Clone, Debug)]
pub(super) struct Console {
    /// What the session may do, as the API would see it.
    pub(super) caller: Caller,
    /// Who signed in.
    pub(super) who: Who,
    /// The session's CSRF token.
    pub(super) csrf: String,
    /// The workspace's name.
    pub(super) workspace_name: String,
    /// The session's own token (for sign-out).
    pub(super) token: String,
}

impl Console {
    /// Whether the session may act (hand over, reply, pause…), not only look.
    pub(super) fn may_act(&self) -> bool {
        self.caller.permissions.contains(Permission::Write)
    }

    /// Whether the session may assign conversations to others: a supervisor, or a key that
    /// may write.
    pub(super) fn may_supervise(&self) -> bool {
        match &self.who {
            Who::Operator { supervisor, .. } => *supervisor,
            Who::Key(_) => self.may_act(),
        }
    }

    /// The operator signed in, if an operator is.
    pub(super) fn operator_id(&self) -> Option<Uuid> {
        match &self.who {
            Who::Operator { id, .. } => Some(*id),
            Who::Key(_) => None,
        }
    }

    /// Who writes what this session sends, for the history and the events.
    pub(super) fn author(&self) -> Option<parley_actors::whatsapp::Author> {
        match &self.who {
            Who::Operator { id, name, .. } => Some(parley_actors::whatsapp::Author {
                id: *id,
                name: name.clone(),
            }),
            Who::Key(_) => None,
        }
    }

    /// The name the page's header shows.
    pub(super) fn display_name(&self) -> Option<&str> {
        match &self.who {
            Who::Operator { name, .. } => Some(name),
            Who::Key(_) => None,
        }
    }

    /// The holder of this session (for signing out everywhere).
    pub(super) fn holder(&self) -> Holder {
        match &self.who {
            Who::Operator { id, .. } => Holder::Operator(*id),
            Who::Key(id) => Holder::Key(*id),
        }
    }

    /// Whether `presented` is this session's CSRF token.
    pub(super) fn csrf_matches(&self, presented: &str) -> bool {
        bool::from(presented.as_bytes().ct_eq(self.csrf.as_bytes()))
    }
}

/// The session token of the request's cookie.
pub(super) fn cookie_token(parts: &Parts) -> Option<&str> {
    parts
        .headers
        .get_all(COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == COOKIE_NAME)
        .map(|(_, value)| value)
        .filter(|value| !value.is_empty())
}

/// The answer to a console request without a live session: to the sign-in page (htmx's own
/// requests are told with `HX-Redirect`, so that the whole page moves, not a fragment).
#[derive(Debug)]
pub(super) struct SignInFirst {
    ended: Ended,
    htmx: bool,
    /// An `EventSource`: told 204, which stops its retries.
    stream: bool,
}

impl IntoResponse for SignInFirst {
    fn into_response(self) -> Response {
        let why = self.ended.as_query();
        let to = if why.is_empty() {
            "/console/sign-in".to_owned()
        } else {
            format!("/console/sign-in?why={why}")
        };
        if self.stream {
            return StatusCode::NO_CONTENT.into_response();
        }
        let mut response = if self.htmx {
            let mut response = StatusCode::NO_CONTENT.into_response();
            if let Ok(value) = HeaderValue::from_str(&to) {
                response.headers_mut().insert("hx-redirect", value);
            }
            response
        } else {
            let mut response = StatusCode::SEE_OTHER.into_response();
            if let Ok(value) = HeaderValue::from_str(&to) {
                response.headers_mut().insert(LOCATION, value);
            }
            response
        };
        if self.ended != Ended::None {
            response
                .headers_mut()
                .insert(SET_COOKIE, HeaderValue::from_static(CLEARED_COOKIE));
        }
        response
    }
}

/// The cookie that ends the browser's copy of a session.
pub(super) const CLEARED_COOKIE: &str =
    "parley_console=; Path=/console; HttpOnly; SameSite=Strict; Max-Age=0";

impl FromRequestParts<AppState> for Console {
    type Rejection = SignInFirst;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &AppState,
    ) -> Result<Self, Self::Rejection> {
        let htmx = parts.headers.contains_key("hx-request");
        let stream = parts
            .headers
            .get(axum::http::header::ACCEPT)
            .is_some_and(|accept| accept.as_bytes().starts_with(b"text/event-stream"));
        let refuse = |ended| SignInFirst {
            ended,
            htmx,
            stream,
        };
        let token = cookie_token(parts).ok_or(refuse(Ended::None))?;
        let row = state.console.touch(token).await.map_err(refuse)?;
        let signed_in = match Holder::of(&row) {
            Some(Holder::Key(key_id)) => key_holder(state, key_id).await,
            Some(Holder::Operator(id)) => operator_holder(state, id).await,
            None => Ok(None),
        };
        let (caller, who, workspace_name) = match signed_in {
            Ok(Some(found)) => found,
            // A database failure is not a reason to end the session: the next request tries
            // again.
            Err(error) => {
                tracing::warn!(%error, "could not read a console session's holder");
                return Err(refuse(Ended::None));
            }
            Ok(None) => {
                if let Err(error) = state.console.end(token).await {
                    tracing::warn!(%error, "could not end a console session");
                }
                let ended = if row.api_key_id.is_some() {
                    Ended::KeyGone
                } else {
                    Ended::None
                };
                return Err(refuse(ended));
            }
        };
        tracing::Span::current().record("workspace_id", caller.workspace_id);
        Ok(Self {
            caller,
            who,
            csrf: csrf_of(token),
            workspace_name,
            token: token.to_owned(),
        })
    }
}

/// What a key's session may do now: `None` when the key was revoked or expired.
async fn key_holder(
    state: &AppState,
    key_id: Uuid,
) -> Result<Option<(Caller, Who, String)>, crate::http::error::ApiError> {
    let Some(key) = parley_persistence::api_keys::find_by_id(&state.db, key_id).await? else {
        return Ok(None);
    };
    let Some(caller) = caller_of(state, &key.key_hash).await? else {
        return Ok(None);
    };
    let name = workspace_name(state, caller.workspace_id).await?;
    Ok(Some((caller, Who::Key(key_id), name)))
}

/// What an operator's session may do now: `None` when the operator is gone or disabled.
async fn operator_holder(
    state: &AppState,
    id: Uuid,
) -> Result<Option<(Caller, Who, String)>, crate::http::error::ApiError> {
    let Some(operator) = parley_persistence::operators::find_any(&state.db, id).await? else {
        return Ok(None);
    };
    if operator.disabled_at.is_some() || operator.password_hash.is_none() {
        return Ok(None);
    }
    let Some(workspace) =
        parley_persistence::workspaces::find_by_id(&state.db, operator.workspace_id).await?
    else {
        return Ok(None);
    };
    let caller = Caller {
        workspace_id: operator.workspace_id,
        business_id: workspace.business_id,
        user_id: operator.id,
        permissions: Permissions::from_storage("read,write"),
    };
    let who = Who::Operator {
        id: operator.id,
        name: operator.name,
        supervisor: operator.role == "supervisor",
    };
    Ok(Some((caller, who, workspace.name)))
}

/// The name of workspace `id`, for the page's header.
async fn workspace_name(state: &AppState, id: i64) -> Result<String, crate::http::error::ApiError> {
    Ok(parley_persistence::workspaces::find_by_id(&state.db, id)
        .await?
        .map_or_else(|| format!("Workspace {id}"), |w| w.name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cookie_is_found_among_others() {
        let request = axum::http::Request::get("/console")
            .header(COOKIE, "a=b; parley_console=tok; c=d")
            .body(())
            .expect("request");
        let (parts, ()) = request.into_parts();
        assert_eq!(cookie_token(&parts), Some("tok"));
    }

    #[test]
    fn the_csrf_token_is_the_sessions_own_and_tells_nothing_of_it() {
        let (one, other) = (random_token(), random_token());
        assert_eq!(csrf_of(&one), csrf_of(&one));
        assert_ne!(csrf_of(&one), csrf_of(&other));
        assert!(!csrf_of(&one).contains(&one));
    }

    #[test]
    fn an_account_is_slowed_after_its_attempts_and_others_are_not() {
        let limiter = per_minute::<String>(ATTEMPTS_PER_ACCOUNT_PER_MINUTE);
        for _ in 0..ATTEMPTS_PER_ACCOUNT_PER_MINUTE {
            assert!(admit(&limiter, &"ana@acme.test".to_owned()).is_ok());
        }
        assert!(admit(&limiter, &"ana@acme.test".to_owned()).is_err_and(|wait| wait >= 1));
        assert!(admit(&limiter, &"bo@acme.test".to_owned()).is_ok());
    }
}
