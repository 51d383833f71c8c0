//! Signing in (an operator with e-mail and password, an admin with an API key) and signing
//! out, here or everywhere.

use std::net::SocketAddr;

use askama::Template;
use axum::Router;
use axum::body::Bytes;
use axum::extract::{ConnectInfo, Query, State};
use axum::http::header::SET_COOKIE;
use axum::http::{Extensions, HeaderMap, HeaderValue, StatusCode};
use axum::response::Response;
use axum::routing::{get, post};
use serde::Deserialize;

use parley_persistence::operators::{self, sessions::Holder};

use crate::domain::{Permission, hash_api_key};
use crate::http::AppState;
use crate::http::auth::key_of;
use crate::http::error::ApiError;

use super::password;
use super::session::{CLEARED_COOKIE, COOKIE_NAME, Console, Ended};
use super::{Failure, Plain, form, page_with, see_other};

pub(super) fn router() -> Router<AppState> {
    Router::new()
        .route("/console/sign-in", get(sign_in_page).post(sign_in))
        .route("/console/sign-out", post(sign_out))
        .route("/console/sign-out/everywhere", post(sign_out_everywhere))
}

#[derive(Template)]
#[template(path = "console/sign_in.html")]
struct SignInPage {
    notice: Option<&'static str>,
    problem: Option<String>,
}

#[derive(Debug, Deserialize)]
struct SignInQuery {
    why: Option<String>,
}

async fn sign_in_page(Query(query): Query<SignInQuery>) -> Response {
    let notice = query.why.as_deref().and_then(Ended::sentence);
    page_with(
        StatusCode::OK,
        &SignInPage {
            notice,
            problem: None,
        },
    )
}

/// Whether the request's `Origin` (when a browser named one) is this server's own: the host
/// the request was addressed to, or the configured public URL. A sign-in posted from another
/// site's page is refused even by a browser that sends no `Sec-Fetch-Site`. A browser names
/// no origin (`null`) for a post from a page whose referrer policy is `no-referrer`, as the
/// console's own pages are: `Sec-Fetch-Site` decides then.
fn origin_is_ours(headers: &HeaderMap, public_url: Option<&str>) -> bool {
    let Some(origin) = headers
        .get(axum::http::header::ORIGIN)
        .filter(|origin| origin.as_bytes() != b"null")
    else {
        return true;
    };
    let Some(origin) = origin.to_str().ok().and_then(authority) else {
        return false;
    };
    let host = headers
        .get(axum::http::header::HOST)
        .and_then(|h| h.to_str().ok());
    host.is_some_and(|host| host.eq_ignore_ascii_case(origin))
        || public_url
            .and_then(authority)
            .is_some_and(|ours| ours.eq_ignore_ascii_case(origin))
}

/// The `host[:port]` of an `http(s)://host[:port][/…]` URL.
fn authority(url: &str) -> Option<&str> {
    let rest = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"))?;
    let end = rest.find('/').unwrap_or(rest.len());
    Some(&rest[..end]).filter(|a| !a.is_empty())
}

#[derive(Debug, Default, Deserialize)]
struct SignInForm {
    #[serde(default)]
    key: String,
    #[serde(default)]
    email: String,
    #[serde(default)]
    password: String,
}

/// Checks an operator's password, or an admin's key, once and starts a session: the browser
/// keeps only the session's token, the database only its hash. A wrong password, or a wrong,
/// revoked or expired key, is refused with a sentence (and counted against the address like
/// any failed authentication; a password also against its account).
async fn sign_in(
    State(state): State<AppState>,
    headers: HeaderMap,
    extensions: Extensions,
    body: Bytes,
) -> Result<Response, Failure> {
    let public_url = state.settings.server.public_url.as_deref();
    if headers
        .get("sec-fetch-site")
        .is_some_and(|site| site.as_bytes() == b"cross-site")
        || !origin_is_ours(&headers, public_url)
    {
        return Ok(refused(
            StatusCode::FORBIDDEN,
            "Sign in from the console's own page.",
        ));
    }
    let fields: SignInForm = serde_urlencoded::from_bytes(&body).unwrap_or_default();
    let peer = extensions
        .get::<ConnectInfo<SocketAddr>>()
        .map(|ConnectInfo(peer)| peer.ip());
    let email = fields.email.trim();
    let key = fields.key.trim();
    let signed_in = if !email.is_empty() {
        match operator_signs_in(&state, email, fields.password, peer).await? {
            Ok(found) => found,
            Err(page) => return Ok(page),
        }
    } else if !key.is_empty() {
        match key_signs_in(&state, key, peer).await? {
            Ok(found) => found,
            Err(page) => return Ok(page),
        }
    } else {
        return Ok(refused(
            StatusCode::BAD_REQUEST,
            "Enter your e-mail address and password (or an admin's API key) to sign in.",
        ));
    };
    let (workspace_id, holder) = signed_in;
    if let Err(wait) = state.console.admit_sign_in(peer) {
        crate::metrics::console_sign_in("throttled");
        return Ok(wait_page(
            "Too many sign-ins from your address; wait a minute and try again.",
            wait,
        ));
    }
    let token = state.console.start(workspace_id, holder).await?;
    let mut response = see_other("/console/conversations");
    response
        .headers_mut()
        .insert(SET_COOKIE, session_cookie(&state, &token)?);
    crate::metrics::console_sign_in("accepted");
    tracing::info!(workspace_id, "console session started");
    Ok(response)
}

/// The workspace and holder of an operator whose password is right; the page refusing it
/// otherwise (throttled per account before the password is even checked).
async fn operator_signs_in(
    state: &AppState,
    email: &str,
    password: String,
    peer: Option<std::net::IpAddr>,
) -> Result<Result<(i64, Holder), Response>, Failure> {
    if let Err(wait) = state.console.admit_attempt(email) {
        crate::metrics::console_sign_in("throttled");
        return Ok(Err(wait_page(
            "Too many attempts for this account; wait a minute and try again.",
            wait,
        )));
    }
    let accounts = operators::signing_in(&state.db, email).await?;
    if accounts.is_empty() {
        // As long as a wrong password: an address says nothing of whether it has an account.
        password::verify(None, password).await;
        return Ok(Err(password_refused(state, peer)));
    }
    for account in accounts {
        if password::verify(account.password_hash.clone(), password.clone()).await {
            return Ok(Ok((account.workspace_id, Holder::Operator(account.id))));
        }
    }
    Ok(Err(password_refused(state, peer)))
}

/// The workspace and holder of a key that may read; the page refusing it otherwise.
async fn key_signs_in(
    state: &AppState,
    key: &str,
    peer: Option<std::net::IpAddr>,
) -> Result<Result<(i64, Holder), Response>, Failure> {
    let hash = hash_api_key(key);
    let Some((caller, key_id)) = key_of(state, &hash).await? else {
        return Ok(Err(key_refused(state, peer)));
    };
    if !caller.permissions.contains(Permission::Read) {
        return Ok(Err(refused(
            StatusCode::FORBIDDEN,
            "That key may not read its workspace, so the console has nothing to show it.",
        )));
    }
    Ok(Ok((caller.workspace_id, Holder::Key(key_id))))
}

/// A 429 page saying `sentence`, with `Retry-After: wait`.
fn wait_page(sentence: &str, wait: u64) -> Response {
    let mut page = refused(StatusCode::TOO_MANY_REQUESTS, sentence);
    page.headers_mut()
        .insert(axum::http::header::RETRY_AFTER, wait.into());
    page
}

/// An e-mail address and password that were not accepted: counted against the address like
/// any failed authentication.
fn password_refused(state: &AppState, peer: Option<std::net::IpAddr>) -> Response {
    failed(
        state,
        peer,
        "That e-mail address and password were not accepted.",
        "Too many sign-ins were refused from your address; wait a minute and try again.",
    )
}

/// A key that was not accepted: counted against the address like any failed
/// authentication, and said so (or, past the address's limit, that it must wait).
fn key_refused(state: &AppState, peer: Option<std::net::IpAddr>) -> Response {
    failed(
        state,
        peer,
        "That key was not accepted: it is mistyped, revoked or expired.",
        "Too many keys were refused from your address; wait a minute and try again.",
    )
}

/// A refused sign-in: `sentence`, or past the address's limit of failures `throttled`.
fn failed(
    state: &AppState,
    peer: Option<std::net::IpAddr>,
    sentence: &str,
    throttled: &str,
) -> Response {
    let refusal = state.auth_failures.refuse_from(peer);
    let status = refusal.status();
    let (sentence, outcome) = if status == StatusCode::TOO_MANY_REQUESTS {
        (throttled, "throttled")
    } else {
        (sentence, "refused")
    };
    crate::metrics::console_sign_in(outcome);
    let mut page = refused(status, sentence);
    if let Some(wait) = refusal.retry_after_secs() {
        page.headers_mut()
            .insert(axum::http::header::RETRY_AFTER, wait.into());
    }
    page
}

/// The session's cookie: HttpOnly, SameSite=Strict, for the console's paths, Secure behind
/// https, living as long as the longest session.
fn session_cookie(state: &AppState, token: &str) -> Result<HeaderValue, ApiError> {
    let secure = state
        .settings
        .server
        .public_url
        .as_deref()
        .is_some_and(|url| url.starts_with("https://"));
    let cookie = format!(
        "{COOKIE_NAME}={token}; Path=/console; HttpOnly; SameSite=Strict; Max-Age={}{}",
        state.console.longest().as_secs(),
        if secure { "; Secure" } else { "" }
    );
    HeaderValue::from_str(&cookie)
        .map_err(|error| ApiError::Internal(anyhow::anyhow!("the session cookie: {error}")))
}

fn refused(status: StatusCode, sentence: &str) -> Response {
    page_with(
        status,
        &SignInPage {
            notice: None,
            problem: Some(sentence.to_owned()),
        },
    )
}

/// Ends the session here and in the browser.
async fn sign_out(
    State(state): State<AppState>,
    console: Console,
    body: Bytes,
) -> Result<Response, Failure> {
    let _: Plain = form(&console, &body)?;
    state.console.end(&console.token).await?;
    Ok(signed_out("out"))
}

/// Ends every session of whoever signed in (an operator's, or a key's), on every device and
/// every node.
async fn sign_out_everywhere(
    State(state): State<AppState>,
    console: Console,
    body: Bytes,
) -> Result<Response, Failure> {
    let _: Plain = form(&console, &body)?;
    let ended = state.console.end_everywhere(console.holder()).await?;
    state
        .actors
        .changes()
        .announce(&parley_actors::Change::Inbox {
            workspace_id: console.caller.workspace_id,
        });
    tracing::info!(ended, "console sessions ended everywhere");
    Ok(signed_out("everywhere"))
}

/// To the sign-in page saying `why`, with the browser's cookie cleared.
fn signed_out(why: &str) -> Response {
    let mut response = see_other(&format!("/console/sign-in?why={why}"));
    response
        .headers_mut()
        .insert(SET_COOKIE, HeaderValue::from_static(CLEARED_COOKIE));
    response
}
