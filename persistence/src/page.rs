//! Page-number pagination shared by the list queries.

use sea_orm::sea_query::{Expr, SelectStatement};
use sea_orm::{
    ConnectionTrait, EntityTrait, PaginatorTrait, QuerySelect, QueryTrait, Select, Value,
};
use uuid::Uuid;

use crate::shape::Shape;

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

/// The two statements of a hot list's page, built once (see [`Shape`]).
pub(crate) struct PageShapes {
    count: Shape,
    rows: Shape,
}

impl PageShapes {
    pub(crate) const fn new() -> Self {
        Self {
            count: Shape::new(),
            rows: Shape::new(),
        }
    }
}

/// [`fetch_page`] for a query whose shape never changes, made by `query` (called only to build
/// the statements' text, once, or in debug builds to check it): `filter_values` are the values
/// its filters bind, in order.
///
/// # Errors
/// The database's.
pub(crate) async fn fetch_shaped_page<E>(
    db: &impl ConnectionTrait,
    shapes: &PageShapes,
    filter_values: Vec<Value>,
    query: impl Fn() -> Select<E>,
    page: Page,
) -> crate::Result<Paged<E::Model>>
where
    E: EntityTrait,
    E::Model: Sync,
{
    let backend = db.get_database_backend();
    // The count as sea-orm's paginator makes it.
    let count = shapes
        .count
        .statement(backend, filter_values.clone(), |backend| {
            let all = query()
                .as_query()
                .clone()
                .reset_limit()
                .reset_offset()
                .clear_order_by()
                .to_owned();
            backend.build(
                &SelectStatement::new()
                    .expr(Expr::cust("COUNT(*) AS num_items"))
                    .from_subquery(all, "sub_query")
                    .to_owned(),
            )
        });
    let total = match db.query_one_raw(count).await? {
        Some(row) => u64::try_from(row.try_get::<i64>("", "num_items")?).unwrap_or(0),
        None => 0,
    };
    let mut values = filter_values;
    values.extend([page.limit.into(), page.offset().into()]);
    let rows = shapes.rows.statement(backend, values, |backend| {
        query()
            .offset(page.offset())
            .limit(page.limit)
            .build(backend)
    });
    let items = E::find().from_raw_sql(rows).all(db).await?;
    Ok(Paged { items, total })
}

/// Where a keyset page starts: after or before a row (by id; ids are UUID v7, so their order is
/// their creation order).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cursor {
    /// The rows that come after this one in the list's order.
    After(Uuid),
    /// The rows that come before this one in the list's order.
    Before(Uuid),
}

/// One keyset page: rows, where the neighbouring pages start, and how many rows match.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CursorPage<T> {
    /// The rows of this page, in the list's order.
    pub items: Vec<T>,
    /// The page after this one, if any row follows.
    pub next: Option<Cursor>,
    /// The page before this one, if any row precedes.
    pub prev: Option<Cursor>,
    /// Rows matching the filters across all pages.
    pub total: u64,
}

/// Fetches the page of `query` (already filtered, not ordered) that `cursor` names, ordered by
/// `id` (newest first when `newest_first`). Rows inserted meanwhile never shift a page: each
/// page is "the `limit` rows next to this id".
pub(crate) async fn fetch_keyset<E>(
    db: &impl ConnectionTrait,
    query: Select<E>,
    id: E::Column,
    id_of: impl Fn(&E::Model) -> Uuid,
    newest_first: bool,
    cursor: Option<Cursor>,
    limit: u64,
) -> crate::Result<CursorPage<E::Model>>
where
    E: EntityTrait,
    E::Model: Sync,
{
    use sea_orm::{ColumnTrait, QueryFilter, QueryOrder};
    // "Forward" is the list's own order; `later(x)` are the rows after x in that order.
    let later = |x: Uuid| if newest_first { id.lt(x) } else { id.gt(x) };
    let earlier = |x: Uuid| if newest_first { id.gt(x) } else { id.lt(x) };
    let (forward, backward) = if newest_first {
        (sea_orm::Order::Desc, sea_orm::Order::Asc)
    } else {
        (sea_orm::Order::Asc, sea_orm::Order::Desc)
    };
    let total = query.clone().count(db).await?;
    let mut items = match cursor {
        None => {
            query
                .clone()
                .order_by(id, forward)
                .limit(limit)
                .all(db)
                .await?
        }
        Some(Cursor::After(x)) => {
            query
                .clone()
                .filter(later(x))
                .order_by(id, forward)
                .limit(limit)
                .all(db)
                .await?
        }
        Some(Cursor::Before(x)) => {
            query
                .clone()
                .filter(earlier(x))
                .order_by(id, backward)
                .limit(limit)
                .all(db)
                .await?
        }
    };
    if matches!(cursor, Some(Cursor::Before(_))) {
        items.reverse();
    }
    let (next, prev) = match (items.first(), items.last()) {
        (Some(first), Some(last)) => {
            let (first, last) = (id_of(first), id_of(last));
            let more_after = query.clone().filter(later(last)).one(db).await?.is_some();
            let more_before = query.filter(earlier(first)).one(db).await?.is_some();
            (
                more_after.then_some(Cursor::After(last)),
                more_before.then_some(Cursor::Before(first)),
            )
        }
        _ => (None, None),
    };
    Ok(CursorPage {
        items,
        next,
        prev,
        total,
    })
}
