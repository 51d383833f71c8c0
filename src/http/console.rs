//! The operator console: server-rendered pages under `/console` for the people who run a
//! workspace's conversations. Askama templates (`templates/console/`), htmx and its SSE
//! extension vendored and compiled in (`console/assets/`), no CDN and no build step. Pages are
//! plain links and forms that work without scripts; scripts only refresh lists live.
//!
//! - [`session`]: signing in with an API key, the session cookie, CSRF tokens.
//! - [`conversations`], [`conversation`]: the inbox and one conversation with its handoff,
//!   resume and reply controls; [`live`] tells their pages when to read again.
//! - [`operations`]: flows, scheduled tasks and channels.
//!
//! Every action goes through the same domain command as its API endpoint (in `parley_actors`),
//! under the signed-in key's permissions: a read-only key sees and cannot act.

mod conversation;
mod conversations;
mod invitation;
mod live;
mod operations;
mod operators;
mod password;
mod saved_replies;
mod session;
mod sign_in;
mod view;

use std::future::Future;

use askama::Template;
use axum::Router;
use axum::body::Bytes;
use axum::extract::Path;
use axum::http::header::{CACHE_CONTROL, CONTENT_TYPE, LOCATION};
use axum::http::{HeaderName, HeaderValue, StatusCode};
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::routing::get;
use serde::de::DeserializeOwned;

use crate::http::AppState;
use crate::http::error::ApiError;
use crate::http::validation::parse_uuid;
use parley_persistence::entities::channel;
use parley_persistence::{Page, channels};

pub(crate) use self::live::Pulse;
use self::session::Console;
pub(crate) use self::session::Sessions;
use self::view::Shell;

/// The console's routes, with the headers every console answer carries.
/// The console's pages; `file_limit` bounds the form of a file an operator sends.
pub(crate) fn router(file_limit: usize) -> Router<AppState> {
    Router::new()
        .route(
            "/console",
            get(|| async { Redirect::to("/console/conversations") }),
        )
        .route(
            "/console/",
            get(|| async { Redirect::to("/console/conversations") }),
        )
        .route("/console/assets/{file}", get(asset))
        .merge(sign_in::router())
        .merge(invitation::router())
        .merge(conversations::router())
        .merge(conversation::router(file_limit))
        .merge(operations::router())
        .merge(saved_replies::router())
        .merge(operators::router())
        .layer(axum::middleware::map_response(guarded))
}

/// What no console page may do: load anything from elsewhere, run inline scripts, be framed,
/// be kept in a shared cache, or tell other sites where it was.
const POLICY: &str = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' \
                      data:; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; \
                      base-uri 'none'";

async fn guarded(mut response: Response) -> Response {
    let headers = response.headers_mut();
    // A file a person sent keeps its own, stricter policy.
    if !headers.contains_key("content-security-policy") {
        headers.insert(
            HeaderName::from_static("content-security-policy"),
            HeaderValue::from_static(POLICY),
        );
    }
    headers.insert(
        HeaderName::from_static("x-content-type-options"),
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        HeaderName::from_static("referrer-policy"),
        HeaderValue::from_static("no-referrer"),
    );
    if !headers.contains_key(CACHE_CONTROL) {
        headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    }
    response
}

/// The vendored scripts and the style sheet, compiled in.
async fn asset(Path(file): Path<String>) -> Response {
    let (body, kind): (&'static str, &'static str) = match file.as_str() {
        "htmx.min.js" => (
            include_str!("console/assets/htmx.min.js"),
            "text/javascript",
        ),
        "htmx-sse.min.js" => (
            include_str!("console/assets/htmx-sse.min.js"),
            "text/javascript",
        ),
        "console.css" => (include_str!("console/assets/console.css"), "text/css"),
        _ => return StatusCode::NOT_FOUND.into_response(),
    };
    (
        [
            (CONTENT_TYPE, HeaderValue::from_static(kind)),
            (
                CACHE_CONTROL,
                HeaderValue::from_static("public, max-age=3600"),
            ),
        ],
        body,
    )
        .into_response()
}

/// The workspace's channels (deleted ones left out), for names and the filter.
async fn workspace_channels(
    state: &AppState,
    workspace_id: i64,
) -> Result<Vec<channel::Model>, Failure> {
    let page = Page {
        page: 1,
        limit: 1000,
    };
    Ok(channels::list(&state.db, workspace_id, page).await?.items)
}

/// The workspace's row named by the path segment `raw` (`field` in a 400 when it is not an id),
/// read by `read`; a 404 naming `what` when there is none.
async fn named<T, F, Fut>(
    console: &Console,
    raw: &str,
    field: &str,
    what: &'static str,
    read: F,
) -> Result<T, Failure>
where
    F: FnOnce(uuid::Uuid) -> Fut,
    Fut: Future<Output = Result<Option<T>, parley_persistence::PersistenceError>>,
{
    let id = parse_uuid(raw, field).map_err(|e| Failure::new(console, e))?;
    read(id)
        .await?
        .ok_or_else(|| Failure::new(console, ApiError::NotFound(what)))
}

/// A template rendered to a page (a template that cannot render is a 500 like any other).
fn page(template: &impl Template) -> Response {
    match template.render() {
        Ok(html) => Html(html).into_response(),
        Err(error) => {
            tracing::error!(%error, "a console template did not render");
            (
                StatusCode::INTERNAL_SERVER_ERROR,
                "The page could not be drawn.",
            )
                .into_response()
        }
    }
}

/// `page` with another status (a refused action shows its page again with the reason).
fn page_with(status: StatusCode, template: &impl Template) -> Response {
    let mut response = page(template);
    if response.status().is_success() {
        *response.status_mut() = status;
    }
    response
}

/// After an action: back to `to` (303, so that a reload does not post again).
fn see_other(to: &str) -> Response {
    let mut response = StatusCode::SEE_OTHER.into_response();
    if let Ok(value) = HeaderValue::from_str(to) {
        response.headers_mut().insert(LOCATION, value);
    }
    response
}

/// A console request that failed: an error page with the API's status and sentence.
#[derive(Debug)]
struct Failure {
    error: ApiError,
    /// The page's frame (`None`: a fragment, answered as plain text).
    shell: Option<Box<Shell>>,
}

impl Failure {
    fn new(console: &Console, error: impl Into<ApiError>) -> Self {
        Self {
            error: error.into(),
            shell: Some(Box::new(Shell::new(console, ""))),
        }
    }
}

impl From<ApiError> for Failure {
    fn from(error: ApiError) -> Self {
        Self { error, shell: None }
    }
}

impl From<parley_persistence::PersistenceError> for Failure {
    fn from(error: parley_persistence::PersistenceError) -> Self {
        Self::from(ApiError::from(error))
    }
}

#[derive(Template)]
#[template(path = "console/error.html")]
struct ErrorPage {
    shell: Shell,
    title: String,
    sentence: String,
}

impl IntoResponse for Failure {
    fn into_response(self) -> Response {
        let status = self.error.status();
        if status.is_server_error() {
            tracing::error!(error = %self.error, "a console page failed");
        }
        let Some(shell) = self.shell else {
            return (status, self.error.public_message()).into_response();
        };
        let title = status
            .canonical_reason()
            .unwrap_or("Something went wrong")
            .to_owned();
        let sentence = self.error.public_message();
        page_with(
            status,
            &ErrorPage {
                shell: *shell,
                title,
                sentence,
            },
        )
    }
}

/// A form's fields (`application/x-www-form-urlencoded`), with its CSRF token checked against
/// the session's: a form from elsewhere, or from a session that ended, is refused with 403.
fn form<T: DeserializeOwned + CarriesCsrf>(console: &Console, body: &Bytes) -> Result<T, Failure> {
    // As the API refuses them: PostgreSQL cannot store a NUL in text, and no field needs one.
    if let Some((name, _)) = form_urlencoded::parse(body)
        .find(|(name, value)| name.contains('\0') || value.contains('\0'))
    {
        return Err(Failure::new(
            console,
            ApiError::invalid_field([name.as_ref()], "must not contain NUL characters"),
        ));
    }
    let fields: T = serde_urlencoded::from_bytes(body).map_err(|error| {
        Failure::new(
            console,
            ApiError::BadRequest {
                code: "validation_failed",
                message: format!("The form could not be read: {error}"),
                details: Vec::new(),
            },
        )
    })?;
    if !console.csrf_matches(fields.csrf()) {
        return Err(Failure::new(
            console,
            ApiError::Forbidden(
                "This form is not from your current session; reload the page and try again"
                    .to_owned(),
            ),
        ));
    }
    Ok(fields)
}

/// [`form`], of an action: refused with 403 for a key that may only read.
fn acting<T: DeserializeOwned + CarriesCsrf>(
    console: &Console,
    body: &Bytes,
) -> Result<T, Failure> {
    let fields = form(console, body)?;
    if !console.may_act() {
        return Err(Failure::new(
            console,
            ApiError::lacking(crate::domain::Permission::Write),
        ));
    }
    Ok(fields)
}

/// A form with the session's CSRF token.
trait CarriesCsrf {
    fn csrf(&self) -> &str;
}

/// A form with nothing but its CSRF token.
#[derive(Debug, serde::Deserialize)]
struct Plain {
    #[serde(default)]
    csrf: String,
}

impl CarriesCsrf for Plain {
    fn csrf(&self) -> &str {
        &self.csrf
    }
}
