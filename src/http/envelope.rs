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

/// What a delete answers: the id of what is gone.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub(crate) struct DeletedRecord {
    /// The deleted resource's id.
    pub(crate) id: uuid::Uuid,
}
