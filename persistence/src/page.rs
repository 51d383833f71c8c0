//! Page-number pagination shared by the list queries.

use sea_orm::{ConnectionTrait, EntityTrait, PaginatorTrait, QuerySelect, Select};

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

impl<T> Paged<T> {
    /// Converts every row, keeping the total.
    pub fn map<U>(self, f: impl FnMut(T) -> U) -> Paged<U> {
        Paged {
            items: self.items.into_iter().map(f).collect(),
            total: self.total,
        }
    }
}

/// Counts the rows `query` matches and fetches the requested page of them; `query` carries its
/// own order.
pub(crate) async fn fetch_page<E>(
    db: &impl ConnectionTrait,
    query: Select<E>,
    page: Page,
) -> crate::Result<Paged<E::Model>>
where
    E: EntityTrait,
    E::Model: Sync,
{
    let total = query.clone().count(db).await?;
    let items = query
        .offset(page.offset())
        .limit(page.limit)
        .all(db)
        .await?;
    Ok(Paged { items, total })
}
