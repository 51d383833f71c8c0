//! Extractors whose rejections use our error body: JSON bodies (with the path of a bad field),
//! raw bodies, path parameters and query strings (with the name of a bad parameter), and files
//! in multipart forms ([`upload`]).

use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::header::CONTENT_TYPE;
use axum::http::request::Parts;
use axum::http::{HeaderMap, StatusCode};
use serde::de::DeserializeOwned;

use crate::http::error::{ApiError, FieldError, PathSegment};

pub(crate) mod upload;

/// A JSON request body. Missing or wrong content type, malformed JSON and wrong field types are
/// all 400s naming what is wrong; an oversized body is a 413.
#[derive(Debug)]
pub(crate) struct Json<T>(pub(crate) T);

impl<S, T> FromRequest<S> for Json<T>
where
    S: Send + Sync,
    T: DeserializeOwned,
{
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        if !is_json(req.headers()) {
            return Err(not_json());
        }
        let RawBody(bytes) = RawBody::from_request(req, state).await?;
        parse_json(&bytes).map(Json)
    }
}

/// An optional JSON body: no body at all is `None`; a body is held to [`Json`]'s rules.
impl<S, T> axum::extract::OptionalFromRequest<S> for Json<T>
where
    S: Send + Sync,
    T: DeserializeOwned,
{
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Option<Self>, Self::Rejection> {
        let json = is_json(req.headers());
        let RawBody(bytes) = RawBody::from_request(req, state).await?;
        if bytes.is_empty() {
            return Ok(None);
        }
        if !json {
            return Err(not_json());
        }
        parse_json(&bytes).map(|body| Some(Json(body)))
    }
}

/// A body that does not say it is JSON.
fn not_json() -> ApiError {
    ApiError::BadRequest {
        code: "invalid_content_type",
        message: "Expected a JSON body with `Content-Type: application/json`".to_owned(),
        details: Vec::new(),
    }
}

/// A request body as bytes (for a signature check before parsing); an oversized body is a
/// 413 with our error body.
#[derive(Debug)]
pub(crate) struct RawBody(pub(crate) Bytes);

impl<S> FromRequest<S> for RawBody
where
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let limit = req
            .extensions()
            .get::<BodyLimit>()
            .map_or(usize::MAX, |l| l.0);
        Bytes::from_request(req, state)
            .await
            .map(Self)
            .map_err(|rejection| {
                if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
                    ApiError::PayloadTooLarge(limit)
                } else {
                    ApiError::BadRequest {
                        code: "invalid_body",
                        message: rejection.body_text(),
                        details: Vec::new(),
                    }
                }
            })
    }
}

/// The configured body limit, put in request extensions so that a 413 can state it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct BodyLimit(pub(crate) usize);

fn is_json(headers: &HeaderMap) -> bool {
    let Some(value) = headers.get(CONTENT_TYPE).and_then(|v| v.to_str().ok()) else {
        return false;
    };
    let essence = value
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    essence == "application/json"
        || (essence.starts_with("application/") && essence.ends_with("+json"))
}

/// What a NUL character in input is told: PostgreSQL cannot store it in text, and no field of
/// Parley's needs one.
const NO_NUL: &str = "must not contain NUL characters";

/// Parses `bytes` as `T`, reporting syntax errors as `malformed_json`, type errors with the
/// path of the offending field, and a NUL character anywhere with the path of its field.
pub(crate) fn parse_json<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    // JSON can carry NUL only as the escape `\u0000`, so the common case costs one scan.
    if bytes.windows(6).any(|w| w == b"\\u0000")
        && let Ok(value) = serde_json::from_slice::<serde_json::Value>(bytes)
        && let Some(path) = nul_path(&value)
    {
        return Err(ApiError::invalid(vec![FieldError::new(path, NO_NUL)]));
    }
    parse_typed(bytes)
}

/// Where the first NUL character of `value` is (in a string or an object key).
fn nul_path(value: &serde_json::Value) -> Option<Vec<PathSegment>> {
    match value {
        serde_json::Value::String(text) => text.contains('\0').then(Vec::new),
        serde_json::Value::Array(items) => items.iter().enumerate().find_map(|(i, item)| {
            nul_path(item).map(|mut path| {
                path.insert(0, PathSegment::Index(i));
                path
            })
        }),
        serde_json::Value::Object(map) => map.iter().find_map(|(key, item)| {
            let inner = if key.contains('\0') {
                Some(Vec::new())
            } else {
                nul_path(item)
            };
            inner.map(|mut path| {
                path.insert(0, PathSegment::Key(key.clone()));
                path
            })
        }),
        _ => None,
    }
}

/// Parses `bytes` as `T` as [`parse_json`] does, but lets NUL characters through: for Meta's
/// webhooks, where the payload parser replaces them rather than refuse a whole delivery.
pub(crate) fn parse_typed<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    let deserializer = &mut serde_json::Deserializer::from_slice(bytes);
    serde_path_to_error::deserialize(deserializer).map_err(|error| {
        let inner = error.inner();
        if inner.is_syntax() || inner.is_eof() {
            return ApiError::BadRequest {
                code: "malformed_json",
                message: format!("Request body is not valid JSON: {inner}"),
                details: Vec::new(),
            };
        }
        let mut path: Vec<PathSegment> = error
            .path()
            .iter()
            .filter_map(|segment| match segment {
                serde_path_to_error::Segment::Seq { index } => Some(PathSegment::Index(*index)),
                serde_path_to_error::Segment::Map { key } => Some(PathSegment::Key(key.clone())),
                serde_path_to_error::Segment::Enum { variant } => {
                    Some(PathSegment::Key(variant.clone()))
                }
                serde_path_to_error::Segment::Unknown => None,
            })
            .collect();
        let text = sentence(&without_values(&strip_position(&inner.to_string())));
        // serde reports a missing field at its parent; point at the field itself.
        let message = match missing_field(&text) {
            Some(field) => {
                path.push(PathSegment::Key(field.to_owned()));
                "is required".to_owned()
            }
            None => text,
        };
        ApiError::invalid(vec![FieldError {
            path,
            message,
            code: None,
        }])
    })
}

fn missing_field(message: &str) -> Option<&str> {
    message.strip_prefix("missing field `")?.split('`').next()
}

/// Longest refusal sentence taken from serde; what is past it is cut.
const MAX_MESSAGE: usize = 200;

/// A serde message without the value it quotes: `invalid type: string "…", expected a map`
/// becomes `invalid type: a string, expected a map`, so that a refusal never sends a client's
/// value back (it may be a megabyte, or a secret); anything else is cut to [`MAX_MESSAGE`].
fn without_values(message: &str) -> String {
    for prefix in ["invalid type: ", "invalid value: "] {
        if let Some(rest) = message.strip_prefix(prefix)
            && let Some((found, expected)) = rest.rsplit_once(", expected ")
        {
            let kind = found
                .split([' ', '`', '"'])
                .next()
                .filter(|k| !k.is_empty())
                .unwrap_or("value");
            let article = if kind.starts_with(['a', 'e', 'i', 'o', 'u']) {
                "an"
            } else {
                "a"
            };
            let expected: String = expected.chars().take(MAX_MESSAGE).collect();
            return format!("{prefix}{article} {kind}, expected {expected}");
        }
    }
    if message.chars().count() > MAX_MESSAGE {
        let cut: String = message.chars().take(MAX_MESSAGE).collect();
        return format!("{cut}…");
    }
    message.to_owned()
}

/// A serde message a person understands where serde's words are a parser's: a body (or a
/// field) of the wrong JSON kind where an object is expected ("invalid length 0, expected
/// struct CreateWorkspaceBody") says it must be an object; a UUID's parser's words say it must
/// be a UUID.
fn sentence(message: &str) -> String {
    if message.contains("expected struct") || message.contains("expected a map") {
        return "must be a JSON object".to_owned();
    }
    let uuid_words = [
        "invalid character:",
        "invalid length: expected",
        "invalid group count",
        "invalid group length",
        "invalid bytes length",
    ];
    if uuid_words.iter().any(|w| message.starts_with(w)) {
        return "must be a UUID, e.g. 01968f2a-7c3e-7d4b-9a1e-3f5c2b8d9e01".to_owned();
    }
    message.to_owned()
}

/// serde_json appends " at line 1 column 12" to its messages; the path says more.
fn strip_position(message: &str) -> String {
    match message.rfind(" at line ") {
        Some(at) => message[..at].to_owned(),
        None => message.to_owned(),
    }
}

/// Path parameters; a parameter of the wrong type is a 400.
#[derive(Debug)]
pub(crate) struct Path<T>(pub(crate) T);

impl<S, T> FromRequestParts<S> for Path<T>
where
    S: Send + Sync,
    T: DeserializeOwned + Send,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        if let Ok(raw) = axum::extract::RawPathParams::from_request_parts(parts, state).await
            && let Some((name, _)) = raw.iter().find(|(_, value)| value.contains('\0'))
        {
            return Err(ApiError::invalid(vec![FieldError::new([name], NO_NUL)]));
        }
        axum::extract::Path::<T>::from_request_parts(parts, state)
            .await
            .map(|axum::extract::Path(value)| Self(value))
            .map_err(|rejection| ApiError::BadRequest {
                code: "invalid_path",
                message: rejection.body_text(),
                details: Vec::new(),
            })
    }
}

/// Query-string parameters; a malformed or mistyped parameter is a 400 naming it.
#[derive(Debug)]
pub(crate) struct Query<T>(pub(crate) T);

impl<S, T> FromRequestParts<S> for Query<T>
where
    S: Send + Sync,
    T: DeserializeOwned,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        parse_query(parts.uri.query().unwrap_or_default()).map(Self)
    }
}

/// Parses a query string as `T`; an error names the parameter in `details`.
pub(crate) fn parse_query<T: DeserializeOwned>(query: &str) -> Result<T, ApiError> {
    if let Some((name, _)) = form_urlencoded::parse(query.as_bytes())
        .find(|(name, value)| name.contains('\0') || value.contains('\0'))
    {
        return Err(ApiError::BadRequest {
            code: "invalid_query",
            message: format!("Invalid query parameter {name}: {NO_NUL}"),
            details: vec![FieldError::new([name.as_ref()], NO_NUL)],
        });
    }
    let deserializer =
        serde_urlencoded::Deserializer::new(form_urlencoded::parse(query.as_bytes()));
    serde_path_to_error::deserialize(deserializer).map_err(|error| {
        let parameter = error.path().to_string();
        let message = sentence(&without_values(&strip_position(&error.inner().to_string())));
        let (path, message) = match missing_field(&message) {
            Some(field) => (field.to_owned(), "is required".to_owned()),
            None => (parameter, message),
        };
        ApiError::BadRequest {
            code: "invalid_query",
            message: format!("Invalid query parameter {path}: {message}"),
            details: vec![FieldError::new([path.as_str()], message)],
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, serde::Deserialize)]
    #[allow(dead_code)]
    struct Body {
        name: String,
        languages: Vec<String>,
    }

    fn details(err: ApiError) -> (String, serde_json::Value) {
        match err {
            ApiError::BadRequest { code, details, .. } => (
                code.to_owned(),
                serde_json::to_value(details).expect("serialisable"),
            ),
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn a_wrong_type_inside_an_array_is_reported_with_its_index() {
        let err = parse_json::<Body>(br#"{"name":"a","languages":["en", 7]}"#).expect_err("bad");
        let (code, details) = details(err);
        assert_eq!(code, "validation_failed");
        assert_eq!(details[0]["path"], serde_json::json!(["languages", 1]));
    }

    #[test]
    fn a_missing_field_is_reported_at_the_field() {
        let err = parse_json::<Body>(br#"{"languages":[]}"#).expect_err("bad");
        let (_, details) = details(err);
        assert_eq!(details[0]["path"], serde_json::json!(["name"]));
        assert_eq!(details[0]["message"], "is required");
    }

    #[test]
    fn a_refusal_names_the_kind_of_a_wrong_value_never_the_value() {
        let huge = "x".repeat(100_000);
        let body = format!(r#"{{"name":"{huge}","languages":"SECRET"}}"#);
        let err = parse_json::<Body>(body.as_bytes()).expect_err("bad");
        let (_, details) = details(err);
        let message = details[0]["message"].as_str().unwrap_or_default();
        assert_eq!(message, "invalid type: a string, expected a sequence");
        assert_eq!(
            without_values("unknown variant `SECRETSECRET`, expected `a` or `b`"),
            "unknown variant `SECRETSECRET`, expected `a` or `b`"
        );
        assert!(without_values(&"y".repeat(500)).chars().count() <= MAX_MESSAGE + 1);
    }

    #[test]
    fn broken_json_is_malformed_not_invalid() {
        let (code, _) = details(parse_json::<Body>(b"{\"name\":").expect_err("bad"));
        assert_eq!(code, "malformed_json");
    }

    #[test]
    fn json_suffix_media_types_are_accepted() {
        let mut headers = HeaderMap::new();
        headers.insert(
            CONTENT_TYPE,
            "application/merge-patch+json".parse().expect("header"),
        );
        assert!(is_json(&headers));
        headers.insert(CONTENT_TYPE, "text/plain".parse().expect("header"));
        assert!(!is_json(&headers));
    }
}
