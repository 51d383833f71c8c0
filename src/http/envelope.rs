//! The success envelope `{"message": "...", "data": ...}`.

use std::borrow::Cow;

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Serialize;

/// A success answer: a sentence and the data.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub(crate) struct Envelope<T> {
    #[schema(value_type = String)]
    message: Cow<'static, str>,
    data: T,
    #[serde(skip)]
    status: StatusCode,
}

impl<T> Envelope<T> {
    /// 200 with `data`.
    pub(crate) fn ok(message: impl Into<Cow<'static, str>>, data: T) -> Self {
        Self {
            message: message.into(),
            data,
            status: StatusCode::OK,
        }
    }

    /// 201 with the created `data`.
    pub(crate) fn created(message: impl Into<Cow<'static, str>>, data: T) -> Self {
        Self {
            message: message.into(),
            data,
            status: StatusCode::CREATED,
        }
    }
}

impl<T: Serialize> IntoResponse for Envelope<T> {
    fn into_response(self) -> Response {
        (self.status, Json(&self)).into_response()
    }
}

/// `record` serialised (camelCase), with each camelCase key also under its snake_case name.
/// The first release answered sends and sandbox calls in snake_case; the aliases keep those
/// clients working for one more release (see the README).
pub(crate) fn with_snake_case_aliases<T: Serialize>(record: &T) -> serde_json::Value {
    let mut value = serde_json::to_value(record).unwrap_or(serde_json::Value::Null);
    if let Some(object) = value.as_object_mut() {
        let aliases: Vec<(String, serde_json::Value)> = object
            .iter()
            .filter(|(key, _)| key.chars().any(|c| c.is_ascii_uppercase()))
            .map(|(key, v)| (snake_case(key), v.clone()))
            .collect();
        object.extend(aliases);
    }
    value
}

fn snake_case(camel: &str) -> String {
    let mut out = String::with_capacity(camel.len() + 4);
    for c in camel.chars() {
        if c.is_ascii_uppercase() {
            out.push('_');
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn camel_case_keys_gain_their_snake_case_alias() {
        #[derive(Serialize)]
        #[serde(rename_all = "camelCase")]
        struct Sent {
            message_id: u32,
            status: &'static str,
        }
        let value = with_snake_case_aliases(&Sent {
            message_id: 7,
            status: "sent",
        });
        assert_eq!(
            value,
            serde_json::json!({"messageId": 7, "message_id": 7, "status": "sent"})
        );
    }
}
