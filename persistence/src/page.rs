//! Page-number pagination shared by the list queries.

/// A 1-based page request; the HTTP layer has already bounded `limit`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Page {
    /// 1-based page number.
    pub page: u64,
    /// Items per page, at least 1.
    pub limit: u64,
}

impl Page {
    /// Rows to skip before this page.
    pub fn offset(self) -> u64 {
        self.page.saturating_sub(1).saturating_mul(self.limit)
    }
}

/// One page of results and the total number of matching rows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Paged<T> {
    /// The rows of the requested page.
    pub items: Vec<T>,
    /// Number of rows matching the query across all pages.
    pub total: u64,
}
