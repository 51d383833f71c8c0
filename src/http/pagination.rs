//! Page-number pagination: `page` (1-based, default 1) and `limit` (default 20, at most 100),
//! answered with `{"message", "data", "pagination": {page, limit, total, total_pages}}`.

use axum::Json;
use axum::response::{IntoResponse, Response};
use parley_persistence::{Page, Paged};
use serde::Serialize;

use crate::http::error::{ApiError, FieldError};

/// Default page size.
pub(crate) const DEFAULT_LIMIT: u64 = 20;
/// Largest page size.
pub(crate) const MAX_LIMIT: u64 = 100;

/// Checks `page` and `limit` from a query string.
pub(crate) fn page_from(page: Option<u64>, limit: Option<u64>) -> Result<Page, ApiError> {
    let page = page.unwrap_or(1);
    let limit = limit.unwrap_or(DEFAULT_LIMIT);
    let mut problems = Vec::new();
    if page == 0 {
        problems.push(FieldError::new(["page"], "must be at least 1"));
    }
    // The offset `(page - 1) * limit` must fit the database's 64-bit integers.
    let offset = page.saturating_sub(1).checked_mul(limit);
    if offset.is_none_or(|o| i64::try_from(o).is_err()) {
        problems.push(FieldError::new(["page"], "is too large"));
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
#[derive(Debug, Serialize)]
pub(crate) struct PageResponse<T> {
    message: &'static str,
    data: Vec<T>,
    pagination: PageInfo,
}

#[derive(Debug, Serialize)]
struct PageInfo {
    page: u64,
    limit: u64,
    total: u64,
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
#[derive(Debug, serde::Deserialize)]
pub(crate) struct ListQuery {
    page: Option<u64>,
    limit: Option<u64>,
}

impl ListQuery {
    /// The checked page request.
    pub(crate) fn page(&self) -> Result<Page, ApiError> {
        page_from(self.page, self.limit)
    }
}
