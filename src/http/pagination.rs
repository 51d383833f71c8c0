//! Page-number pagination: `page` (1-based, default 1) and `limit` (default 20, at most 100),
//! answered with `{"message", "data", "pagination": {page, limit, total, total_pages}}`.

use axum::Json;
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use parley_persistence::{Cursor, CursorPage, Page, Paged};
use serde::Serialize;

use crate::http::error::{ApiError, FieldError};

/// Default page size.
pub(crate) const DEFAULT_LIMIT: u64 = 20;
/// Largest page size.
pub(crate) const MAX_LIMIT: u64 = 100;
/// Largest page number, whatever the page size: its offset fits the database's 64-bit
/// integers, and the number is exact in the document's JSON (below 2^53). The query structs'
/// `#[param(maximum = …)]` repeat it as a literal.
pub(crate) const MAX_PAGE: u64 = 1_000_000_000_000_000;

/// Checks `page` and `limit` from a query string.
pub(crate) fn page_from(page: Option<u64>, limit: Option<u64>) -> Result<Page, ApiError> {
    let page = page.unwrap_or(1);
    let limit = limit.unwrap_or(DEFAULT_LIMIT);
    let mut problems = Vec::new();
    if page == 0 {
        problems.push(FieldError::new(["page"], "must be at least 1"));
    }
    if page > MAX_PAGE {
        problems.push(FieldError::new(
            ["page"],
            format!("must be at most {MAX_PAGE}"),
        ));
    }
    if !(1..=MAX_LIMIT).contains(&limit) {
        problems.push(FieldError::new(
            ["limit"],
            format!("must be between 1 and {MAX_LIMIT}"),
        ));
    }
    if problems.is_empty() {
        Ok(Page { page, limit })
    } else {
        Err(ApiError::invalid(problems))
    }
}

/// A page of records ready to send.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub(crate) struct PageResponse<T> {
    message: &'static str,
    data: Vec<T>,
    pagination: PageInfo,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
struct PageInfo {
    #[schema(example = 1)]
    page: u64,
    #[schema(example = 20)]
    limit: u64,
    /// Records in every page together.
    #[schema(example = 42)]
    total: u64,
    #[schema(example = 3)]
    total_pages: u64,
}

impl<T> PageResponse<T> {
    /// Wraps `paged`, converting each row with `to_record`.
    pub(crate) fn new<R>(
        message: &'static str,
        page: Page,
        paged: Paged<R>,
        to_record: impl FnMut(R) -> T,
    ) -> Self {
        Self {
            message,
            data: paged.items.into_iter().map(to_record).collect(),
            pagination: PageInfo {
                page: page.page,
                limit: page.limit,
                total: paged.total,
                total_pages: paged.total.div_ceil(page.limit),
            },
        }
    }
}

impl<T: Serialize> IntoResponse for PageResponse<T> {
    fn into_response(self) -> Response {
        Json(self).into_response()
    }
}

/// The `page` and `limit` query parameters of a plain list.
#[derive(Debug, serde::Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct ListQuery {
    #[param(minimum = 1, maximum = 1_000_000_000_000_000_u64, default = 1)]
    page: Option<u64>,
    #[param(minimum = 1, maximum = 100)]
    limit: Option<u64>,
}

impl ListQuery {
    /// The checked page request.
    pub(crate) fn page(&self) -> Result<Page, ApiError> {
        page_from(self.page, self.limit)
    }
}

/// A keyset page (campaigns, flows, recipients): `{"message", "data", "nextCursor",
/// "prevCursor", "total"}`; cursors are opaque strings.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct CursorResponse<T> {
    message: &'static str,
    data: Vec<T>,
    next_cursor: Option<String>,
    prev_cursor: Option<String>,
    total: u64,
}

impl<T> CursorResponse<T> {
    /// Wraps `page`, converting each row with `to_record`.
    pub(crate) fn new<R>(
        message: &'static str,
        page: CursorPage<R>,
        to_record: impl FnMut(R) -> T,
    ) -> Self {
        Self {
            message,
            data: page.items.into_iter().map(to_record).collect(),
            next_cursor: page.next.map(encode_cursor),
            prev_cursor: page.prev.map(encode_cursor),
            total: page.total,
        }
    }
}

impl<T: Serialize> IntoResponse for CursorResponse<T> {
    fn into_response(self) -> Response {
        Json(self).into_response()
    }
}

/// `cursor` and `limit` of a keyset list, checked.
pub(crate) fn cursor_from(
    cursor: Option<&str>,
    limit: Option<u64>,
) -> Result<(Option<Cursor>, u64), ApiError> {
    let mut problems = Vec::new();
    let limit = limit.unwrap_or(DEFAULT_LIMIT);
    if !(1..=MAX_LIMIT).contains(&limit) {
        problems.push(FieldError::new(
            ["limit"],
            format!("must be between 1 and {MAX_LIMIT}"),
        ));
    }
    let cursor = match cursor.filter(|c| !c.is_empty()) {
        None => None,
        Some(raw) => {
            let decoded = decode_cursor(raw);
            if decoded.is_none() {
                problems.push(FieldError::new(["cursor"], "is not a cursor this API gave"));
            }
            decoded
        }
    };
    if problems.is_empty() {
        Ok((cursor, limit))
    } else {
        Err(ApiError::invalid(problems))
    }
}

fn encode_cursor(cursor: Cursor) -> String {
    let text = match cursor {
        Cursor::After(id) => format!("a:{id}"),
        Cursor::Before(id) => format!("b:{id}"),
    };
    URL_SAFE_NO_PAD.encode(text)
}

fn decode_cursor(raw: &str) -> Option<Cursor> {
    let bytes = URL_SAFE_NO_PAD.decode(raw).ok()?;
    let text = std::str::from_utf8(&bytes).ok()?;
    let (direction, id) = text.split_once(':')?;
    let id = uuid::Uuid::parse_str(id).ok()?;
    match direction {
        "a" => Some(Cursor::After(id)),
        "b" => Some(Cursor::Before(id)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_round_trip_and_refuse_anything_else() {
        let id = uuid::Uuid::now_v7();
        for cursor in [Cursor::After(id), Cursor::Before(id)] {
            assert_eq!(decode_cursor(&encode_cursor(cursor)), Some(cursor));
        }
        assert_eq!(decode_cursor("nonsense"), None);
        assert_eq!(decode_cursor(&URL_SAFE_NO_PAD.encode("c:x")), None);
        assert!(cursor_from(Some("zzz"), None).is_err());
        assert!(cursor_from(None, Some(101)).is_err());
        assert_eq!(
            cursor_from(None, None).expect("the defaults"),
            (None, DEFAULT_LIMIT)
        );
    }
}
