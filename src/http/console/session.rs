//! Console sessions: signing in posts an API key once; the server keeps the key's hash under a
//! random token that only the browser's cookie carries (HttpOnly, SameSite=Strict, Secure behind
//! https), with a CSRF token every form sends back. A session ends at sign-out, after its idle
//! time or its longest life, and with its key: every request asks again what the key grants, so
//! a revoked or expired key's session stops at its next request.

use std::collections::HashMap;
use std::net::IpAddr;
use std::num::NonZeroU32;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};

use axum::extract::FromRequestParts;
use axum::http::header::{COOKIE, LOCATION, SET_COOKIE};
use axum::http::request::Parts;
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::domain::Permission;
use crate::http::AppState;
use crate::http::auth::{Caller, caller_of};

/// The cookie that carries the session token.
pub(super) const COOKIE_NAME: &str = "parley_console";

/// Sessions one key may hold at once; past it the key's least recently used goes first.
const MOST_PER_KEY: usize = 20;

/// Sessions one workspace may hold at once (all its keys); past it the workspace's least
/// recently used goes first. One tenant's sign-ins only ever end its own sessions.
const MOST_PER_WORKSPACE: usize = 500;

/// Sessions the process holds at most, all workspaces together: past it a sign-in is refused
/// (never answered by ending another tenant's session).
const MOST_SESSIONS: usize = 100_000;

/// Why no session was started.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Full;

/// Successful sign-ins one client address may make per minute (bursts up to the same
/// number): a key's holder cannot churn the sessions of its workspace.
const SIGN_INS_PER_MINUTE: u32 = 30;

/// The live sessions of this process, by the hash of their token; cheap to clone.
#[derive(Clone, Debug)]
pub(crate) struct Sessions {
    inner: Arc<Mutex<HashMap<[u8; 32], Session>>>,
    idle: Duration,
    longest: Duration,
    /// Successful sign-ins per client address.
    sign_ins: Arc<DefaultKeyedRateLimiter<IpAddr>>,
}

#[derive(Clone, Debug)]
struct Session {
    key_hash: String,
    /// The key's workspace: its sessions are bounded together.
    workspace_id: i64,
    /// Its name when the session started, for the page's header.
    workspace_name: String,
    csrf: String,
    started: Instant,
    seen: Instant,
}

impl Session {
    fn ended(&self, sessions: &Sessions, now: Instant) -> bool {
        now.duration_since(self.seen) >= sessions.idle
            || now.duration_since(self.started) >= sessions.longest
    }
}

/// Why a request has no session: what the sign-in page says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Ended {
    /// No cookie, or one this process never issued (or forgot at a restart).
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
            _ => None,
        }
    }
}

impl Sessions {
    /// Sessions lasting `idle` without a request and `longest` at most.
    pub(crate) fn new(idle: Duration, longest: Duration) -> Self {
        let quota =
            Quota::per_minute(NonZeroU32::new(SIGN_INS_PER_MINUTE).unwrap_or(NonZeroU32::MIN));
        Self {
            inner: Arc::default(),
            idle,
            longest,
            sign_ins: Arc::new(RateLimiter::keyed(quota)),
        }
    }

    /// Whether a client at `peer` may sign in again now; otherwise the seconds until it may.
    pub(super) fn admit_sign_in(&self, peer: Option<IpAddr>) -> Result<(), u64> {
        let Some(peer) = peer else {
            return Ok(());
        };
        if self.sign_ins.len() > MOST_SESSIONS {
            self.sign_ins.retain_recent();
        }
        self.sign_ins.check_key(&peer).map_err(|not_until| {
            let wait = not_until.wait_time_from(DefaultClock::default().now());
            (wait.as_secs_f64().ceil() as u64).max(1)
        })
    }

    /// Starts a session for the key of `key_hash` in `workspace_id`: answers the token for
    /// the cookie. Past [`MOST_PER_KEY`] sessions of the key (or [`MOST_PER_WORKSPACE`] of
    /// the workspace) the least recently used of those goes; no other workspace's session is
    /// ever ended to make room.
    ///
    /// # Errors
    /// [`Full`] when the process holds [`MOST_SESSIONS`] live sessions.
    pub(super) fn start(
        &self,
        key_hash: String,
        workspace_id: i64,
        workspace_name: String,
    ) -> Result<String, Full> {
        let now = Instant::now();
        let mut sessions = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        if sessions.len() >= MOST_SESSIONS {
            sessions.retain(|_, s| !s.ended(self, now));
        }
        if sessions.len() >= MOST_SESSIONS {
            return Err(Full);
        }
        evict_least_recent(&mut sessions, MOST_PER_KEY, |s| s.key_hash == key_hash);
        evict_least_recent(&mut sessions, MOST_PER_WORKSPACE, |s| {
            s.workspace_id == workspace_id
        });
        let token = random_token();
        let session = Session {
            key_hash,
            workspace_id,
            workspace_name,
            csrf: random_token(),
            started: now,
            seen: now,
        };
        sessions.insert(digest(&token), session);
        Ok(token)
    }

    /// Ends the session of `token` (nothing when there is none).
    pub(super) fn end(&self, token: &str) {
        self.inner
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&digest(token));
    }

    /// The session of `token`, marked as used now; why there is none otherwise.
    fn touch(&self, token: &str) -> Result<Session, Ended> {
        let now = Instant::now();
        let mut sessions = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        let key = digest(token);
        let session = sessions.get_mut(&key).ok_or(Ended::None)?;
        if session.ended(self, now) {
            sessions.remove(&key);
            return Err(Ended::Expired);
        }
        session.seen = now;
        Ok(session.clone())
    }

    /// Whether the session of `token` is still on, without counting this as a use (a live
    /// page's stream does not keep its session from going idle).
    pub(super) fn lives(&self, token: &str) -> bool {
        let now = Instant::now();
        self.inner
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&digest(token))
            .is_some_and(|session| !session.ended(self, now))
    }

    /// How long a session lasts at most: the cookie's `Max-Age`.
    pub(super) fn longest(&self) -> Duration {
        self.longest
    }
}

/// Of the sessions `mine` picks, ends the least recently used until fewer than `most` are left
/// (room for one more).
fn evict_least_recent(
    sessions: &mut HashMap<[u8; 32], Session>,
    most: usize,
    mine: impl Fn(&Session) -> bool,
) {
    let mut held: Vec<([u8; 32], Instant)> = sessions
        .iter()
        .filter(|(_, s)| mine(s))
        .map(|(k, s)| (*k, s.seen))
        .collect();
    if held.len() < most {
        return;
    }
    held.sort_by_key(|(_, seen)| *seen);
    for (key, _) in held.iter().take(held.len() + 1 - most) {
        sessions.remove(key);
    }
}

fn digest(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

fn random_token() -> String {
    let mut bytes = [0u8; 32];
    // The operating system's generator failing is not something a console can go on without.
    #[allow(clippy::expect_used)]
    getrandom::fill(&mut bytes).expect("the operating system's random generator");
    URL_SAFE_NO_PAD.encode(bytes)
}

/// A signed-in console request: who is looking, and the CSRF token its forms carry.
#[derive(Clone, Debug)]
pub(super) struct Console {
    /// The key's caller, as the API would see it.
    pub(super) caller: Caller,
    /// The session's CSRF token.
    pub(super) csrf: String,
    /// The workspace's name, as it was when the session started.
    pub(super) workspace_name: String,
    /// The session's own token (for sign-out).
    pub(super) token: String,
}

impl Console {
    /// Whether the key may act (hand over, reply, pause…), not only look.
    pub(super) fn may_act(&self) -> bool {
        self.caller.permissions.contains(Permission::Write)
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
        let session = state.console.touch(token).map_err(refuse)?;
        let caller = match caller_of(state, &session.key_hash).await {
            Ok(Some(caller)) => caller,
            // A database failure is not a reason to end the session: the next request tries
            // again.
            Err(error) => {
                tracing::warn!(%error, "could not read a console session's key");
                return Err(refuse(Ended::None));
            }
            Ok(None) => {
                state.console.end(token);
                return Err(refuse(Ended::KeyGone));
            }
        };
        tracing::Span::current().record("workspace_id", caller.workspace_id);
        Ok(Self {
            caller,
            csrf: session.csrf,
            workspace_name: session.workspace_name,
            token: token.to_owned(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_ends_after_its_idle_time_and_says_so() {
        let sessions = Sessions::new(Duration::ZERO, Duration::from_secs(60));
        let token = sessions
            .start("hash".to_owned(), 1, "Acme".to_owned())
            .expect("started");
        assert!(matches!(sessions.touch(&token), Err(Ended::Expired)));
        assert!(matches!(sessions.touch(&token), Err(Ended::None)));
    }

    #[test]
    fn a_token_finds_its_session_until_it_is_ended() {
        let sessions = Sessions::new(Duration::from_secs(60), Duration::from_secs(60));
        let token = sessions
            .start("hash".to_owned(), 1, "Acme".to_owned())
            .expect("started");
        assert_eq!(
            sessions.touch(&token).map(|s| s.key_hash).ok(),
            Some("hash".to_owned())
        );
        assert!(sessions.touch("another").is_err());
        sessions.end(&token);
        assert!(matches!(sessions.touch(&token), Err(Ended::None)));
    }

    #[test]
    fn one_tenants_sign_ins_never_end_anothers_session() {
        let sessions = Sessions::new(Duration::from_secs(60), Duration::from_secs(60));
        let theirs = sessions
            .start("their-key".to_owned(), 2, "Globex".to_owned())
            .expect("started");
        let mut mine = Vec::new();
        for _ in 0..(MOST_PER_WORKSPACE * 3) {
            mine.push(
                sessions
                    .start("my-key".to_owned(), 1, "Acme".to_owned())
                    .expect("started"),
            );
        }
        assert!(
            sessions.touch(&theirs).is_ok(),
            "another workspace's session lives"
        );
        // One key holds its newest sessions only.
        let live = mine.iter().filter(|t| sessions.lives(t)).count();
        assert_eq!(live, MOST_PER_KEY);
        assert!(sessions.lives(mine.last().expect("newest")));
        assert!(!sessions.lives(&mine[0]));
    }

    #[test]
    fn the_cookie_is_found_among_others() {
        let request = axum::http::Request::get("/console")
            .header(COOKIE, "a=b; parley_console=tok; c=d")
            .body(())
            .expect("request");
        let (parts, ()) = request.into_parts();
        assert_eq!(cookie_token(&parts), Some("tok"));
    }
}
