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

pub(crate) use crate::tokens::{digest, random_token};

mod signed_in;

pub(super) use self::signed_in::Console;

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
    pub(super) async fn touch(&self, token: &str) -> Result<console_session::Model, Ended> {
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

/// The CSRF token of the session of `token`: derived from it (the same on every node, never
/// stored), and telling nothing of it.
pub(super) fn csrf_of(token: &str) -> String {
    let mut hasher = Sha256::new();
    hasher.update(b"parley-console-csrf\0");
    hasher.update(token.as_bytes());
    URL_SAFE_NO_PAD.encode(hasher.finalize())
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
    pub(super) ended: Ended,
    pub(super) htmx: bool,
    /// An `EventSource`: told 204, which stops its retries.
    pub(super) stream: bool,
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
