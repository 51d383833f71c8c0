//! Extractors whose rejections use our error body: JSON bodies (with the path of a bad field),
//! path parameters and query strings.

use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::header::CONTENT_TYPE;
use axum::http::request::Parts;
use axum::http::{HeaderMap, StatusCode};
use serde::de::DeserializeOwned;

use crate::http::error::{ApiError, FieldError, PathSegment};

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
            return Err(ApiError::BadRequest {
                code: "invalid_content_type",
                message: "Expected a JSON body with `Content-Type: application/json`".to_owned(),
                details: Vec::new(),
            });
        }
        let limit = req
            .extensions()
            .get::<BodyLimit>()
            .map_or(usize::MAX, |l| l.0);
        let bytes = Bytes::from_request(req, state).await.map_err(|rejection| {
            if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
                ApiError::PayloadTooLarge(limit)
            } else {
                ApiError::BadRequest {
                    code: "invalid_body",
                    message: rejection.body_text(),
                    details: Vec::new(),
                }
            }
        })?;
        parse_json(&bytes).map(Json)
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

/// Parses `bytes` as `T`, reporting syntax errors as `malformed_json` and type errors with the
/// path of the offending field.
pub(crate) fn parse_json<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
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
        let text = strip_position(&inner.to_string());
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

/// Query-string parameters; a malformed or mistyped parameter is a 400.
#[derive(Debug)]
pub(crate) struct Query<T>(pub(crate) T);

impl<S, T> FromRequestParts<S> for Query<T>
where
    S: Send + Sync,
    T: DeserializeOwned,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        axum::extract::Query::<T>::from_request_parts(parts, state)
            .await
            .map(|axum::extract::Query(value)| Self(value))
            .map_err(|rejection| ApiError::BadRequest {
                code: "invalid_query",
                message: rejection.body_text(),
                details: Vec::new(),
            })
    }
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
