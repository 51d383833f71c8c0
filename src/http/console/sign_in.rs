//! Signing in with an API key and signing out.

use std::net::SocketAddr;

use askama::Template;
use axum::Router;
use axum::body::Bytes;
use axum::extract::{ConnectInfo, Query, State};
use axum::http::header::SET_COOKIE;
use axum::http::{Extensions, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::Deserialize;

use crate::domain::{Permission, hash_api_key};
use crate::http::AppState;
use crate::http::auth::caller_of;
use crate::http::error::ApiError;

use super::session::{CLEARED_COOKIE, COOKIE_NAME, Console, Ended};
use super::{Failure, Plain, form, page_with, see_other};

pub(super) fn router() -> Router<AppState> {
    Router::new()
        .route("/console/sign-in", get(sign_in_page).post(sign_in))
        .route("/console/sign-out", post(sign_out))
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

#[derive(Debug, Deserialize)]
struct SignInForm {
    #[serde(default)]
    key: String,
}

/// Checks the key once and starts a session for it: the browser keeps only the session's
/// token, the server only the key's hash. A wrong, revoked or expired key is refused with a
/// sentence (and counted against the address like any failed authentication).
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
    let fields: SignInForm =
        serde_urlencoded::from_bytes(&body).unwrap_or(SignInForm { key: String::new() });
    let key = fields.key.trim();
    if key.is_empty() {
        return Ok(refused(
            StatusCode::BAD_REQUEST,
            "Enter an API key to sign in.",
        ));
    }
    let hash = hash_api_key(key);
    let peer = extensions
        .get::<ConnectInfo<SocketAddr>>()
        .map(|ConnectInfo(peer)| peer.ip());
    let Some(caller) = caller_of(&state, &hash).await? else {
        return Ok(key_refused(&state, peer));
    };
    if !caller.permissions.contains(Permission::Read) {
        return Ok(refused(
            StatusCode::FORBIDDEN,
            "That key may not read its workspace, so the console has nothing to show it.",
        ));
    }
    if let Err(wait) = state.console.admit_sign_in(peer) {
        crate::metrics::console_sign_in("throttled");
        let mut page = refused(
            StatusCode::TOO_MANY_REQUESTS,
            "Too many sign-ins from your address; wait a minute and try again.",
        );
        page.headers_mut()
            .insert(axum::http::header::RETRY_AFTER, wait.into());
        return Ok(page);
    }
    let workspace_name = parley_persistence::workspaces::find_by_id(&state.db, caller.workspace_id)
        .await?
        .map_or_else(|| format!("Workspace {}", caller.workspace_id), |w| w.name);
    let Ok(token) = state
        .console
        .start(hash, caller.workspace_id, workspace_name)
    else {
        return Ok(refused(
            StatusCode::SERVICE_UNAVAILABLE,
            "The console holds as many sessions as it can; try again later.",
        ));
    };
    let mut response = see_other("/console/conversations");
    response
        .headers_mut()
        .insert(SET_COOKIE, session_cookie(&state, &token)?);
    tracing::info!(
        workspace_id = caller.workspace_id,
        "console session started"
    );
    Ok(response)
}

/// A key that was not accepted: counted against the address like any failed
/// authentication, and said so (or, past the address's limit, that it must wait).
fn key_refused(state: &AppState, peer: Option<std::net::IpAddr>) -> Response {
    let refusal = state.auth_failures.refuse_from(peer);
    let status = refusal.status();
    let (sentence, outcome) = if status == StatusCode::TOO_MANY_REQUESTS {
        (
            "Too many keys were refused from your address; wait a minute and try again.",
            "throttled",
        )
    } else {
        (
            "That key was not accepted: it is mistyped, revoked or expired.",
            "refused",
        )
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
    state.console.end(&console.token);
    let mut response = see_other("/console/sign-in?why=out");
    response
        .headers_mut()
        .insert(SET_COOKIE, HeaderValue::from_static(CLEARED_COOKIE));
    Ok(response.into_response())
}
