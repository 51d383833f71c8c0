//! Event deliveries: one durable row per endpoint and event, written by the fact's own
//! transaction ([`insert`]), taken by the delivery actor when due ([`due`]) and settled after
//! each attempt ([`settle`]). A delivery being attempted stays `pending`, so one caught by a
//! stop is attempted again after the restart: at least once, never lost.

use chrono::{DateTime, Utc};
use sea_orm::sea_query::{Expr, ExprTrait, SimpleExpr, UpdateStatement};
use sea_orm::{
    ColumnTrait, Condition, ConnectionTrait, DbBackend, EntityTrait, PaginatorTrait, QueryFilter,
    QueryOrder, QuerySelect, QueryTrait,
};
use uuid::Uuid;

use crate::entities::{event_delivery, event_webhook};
use crate::page::fetch_page;
use crate::values::DeliveryStatus;
use crate::{Page, Paged, Result};

mod insert;

pub(crate) use self::insert::insert_statement;
pub use self::insert::{Addressed, NewEvent, insert, insert_all};

/// The enabled endpoints that have deliveries due at `now`, in one statement: each endpoint
/// probes the pending deliveries' `(endpoint_id, next_attempt_at)` index once, so a backlog of
/// thousands of due rows costs no more than a few (reading the due rows for their endpoints
/// walked them all at every wake-up).
///
/// # Errors
/// The database's.
pub async fn endpoints_due(
    db: &impl ConnectionTrait,
    now: DateTime<Utc>,
) -> Result<Vec<event_webhook::Model>> {
    let due = event_delivery::Entity::find()
        .select_only()
        .expr(Expr::val(1))
        .filter(
            Expr::col((event_delivery::Entity, event_delivery::Column::EndpointId))
                .equals((event_webhook::Entity, event_webhook::Column::Id)),
        )
        .filter(event_delivery::pending())
        .filter(event_delivery::Column::NextAttemptAt.lte(now))
        .into_query();
    Ok(event_webhook::Entity::find()
        .filter(event_webhook::Column::Enabled.eq(true))
        .filter(Expr::exists(due))
        .all(db)
        .await?)
}

/// Up to `limit` deliveries of `endpoint_id` due at `now`, the longest due first, leaving out `busy`
/// (those being attempted).
///
/// # Errors
/// The database's.
pub async fn due(
    db: &impl ConnectionTrait,
    endpoint_id: Uuid,
    now: DateTime<Utc>,
    busy: &[Uuid],
    limit: u64,
) -> Result<Vec<event_delivery::Model>> {
    let mut query = event_delivery::Entity::find()
        .filter(event_delivery::Column::EndpointId.eq(endpoint_id))
        .filter(event_delivery::pending())
        .filter(event_delivery::Column::NextAttemptAt.lte(now));
    if !busy.is_empty() {
        query = query.filter(id_in(db.get_database_backend(), busy, false));
    }
    // In the pending deliveries' `(endpoint_id, next_attempt_at)` index's own order, so that
    // the read stops after `limit` rows: a tie-break on the id had the database sort every due
    // row first (a backlog of 20,000 due at one instant sorted 20,000 rows for each 64 read).
    Ok(query
        .order_by_asc(event_delivery::Column::NextAttemptAt)
        .limit(limit)
        .all(db)
        .await?)
}

/// How an attempt ended, as the row records it.
#[derive(Clone, Debug)]
pub struct Settled {
    /// The new status (`pending` again for a retry).
    pub status: DeliveryStatus,
    /// The endpoint's status code, when it answered.
    pub status_code: Option<i32>,
    /// Why it failed.
    pub error: Option<String>,
    /// When to try again (for `pending`).
    pub next_attempt_at: DateTime<Utc>,
}

/// Records one attempt of delivery `id` (unless it was settled otherwise meanwhile: a retry
/// asked for by the API finds it pending again).
///
/// # Errors
/// The database's.
pub async fn settle(
    db: &impl ConnectionTrait,
    id: Uuid,
    settled: Settled,
    now: DateTime<Utc>,
) -> Result<()> {
    event_delivery::Entity::update_many()
        .col_expr(event_delivery::Column::Status, Expr::value(settled.status))
        .col_expr(
            event_delivery::Column::Attempts,
            Expr::col(event_delivery::Column::Attempts).add(1),
        )
        .col_expr(
            event_delivery::Column::LastStatusCode,
            Expr::value(settled.status_code),
        )
        .col_expr(
            event_delivery::Column::LastError,
            Expr::value(settled.error),
        )
        .col_expr(
            event_delivery::Column::NextAttemptAt,
            Expr::value(settled.next_attempt_at),
        )
        .col_expr(event_delivery::Column::UpdatedAt, Expr::value(now))
        .filter(event_delivery::Column::Id.eq(id))
        .exec(db)
        .await?;
    Ok(())
}

/// The statement that records that deliveries `ids` succeeded, the endpoint answering
/// `status_code`: for the caller to run on `backend` with what they count (`crate::one_call`).
pub fn succeeded(
    backend: DbBackend,
    ids: &[Uuid],
    status_code: Option<i32>,
    now: DateTime<Utc>,
) -> UpdateStatement {
    event_delivery::Entity::update_many()
        .col_expr(
            event_delivery::Column::Status,
            Expr::value(DeliveryStatus::Succeeded),
        )
        .col_expr(
            event_delivery::Column::Attempts,
            Expr::col(event_delivery::Column::Attempts).add(1),
        )
        .col_expr(
            event_delivery::Column::LastStatusCode,
            Expr::value(status_code),
        )
        .col_expr(
            event_delivery::Column::LastError,
            Expr::value(Option::<String>::None),
        )
        .col_expr(event_delivery::Column::UpdatedAt, Expr::value(now))
        .filter(id_in(backend, ids, true))
        .into_query()
}

/// A delivery's id among `ids` (`among`) or not. On PostgreSQL the ids are bound as one array:
/// the statement's text is the same for any number of them, so each connection prepares it once
/// and the server can keep one plan for it. A list of `$n`, one per id, is a new text for each
/// length, parsed and planned anew nearly every time: on a lane's reads and recordings that was
/// about a third of PostgreSQL's time (its statement log during `event_delivery 5000`: 102
/// parses for 118 recordings, 76 for 84 reads, and each bind planning again). SQLite, which has
/// no arrays, keeps the list; it plans a statement where it prepares it, in the same call.
fn id_in(backend: DbBackend, ids: &[Uuid], among: bool) -> SimpleExpr {
    match (backend, among) {
        (DbBackend::Postgres, true) => {
            Expr::cust_with_values(r#""event_deliveries"."id" = ANY($1)"#, [ids.to_vec()])
        }
        (DbBackend::Postgres, false) => {
            Expr::cust_with_values(r#""event_deliveries"."id" <> ALL($1)"#, [ids.to_vec()])
        }
        (_, true) => event_delivery::Column::Id.is_in(ids.iter().copied()),
        (_, false) => event_delivery::Column::Id.is_not_in(ids.iter().copied()),
    }
}

/// The deliveries of an endpoint, newest first.
///
/// # Errors
/// The database's.
pub async fn list(
    db: &impl ConnectionTrait,
    endpoint_id: Uuid,
    page: Page,
) -> Result<Paged<event_delivery::Model>> {
    let query = event_delivery::Entity::find()
        .filter(event_delivery::Column::EndpointId.eq(endpoint_id))
        .order_by_desc(event_delivery::Column::Id);
    fetch_page(db, query, page).await
}

/// What asking for a delivery again now did.
#[derive(Clone, Debug)]
pub enum RetryNow {
    /// It is due now.
    Due(event_delivery::Model),
    /// It was due already (waiting for its attempt, or being attempted): one attempt at a
    /// time, however often a retry is asked for.
    AlreadyDue,
    /// No such delivery of the endpoint.
    Unknown,
}

/// Makes delivery `id` of `endpoint_id` due now, whatever its status, unless it is due
/// already.
///
/// # Errors
/// The database's.
pub async fn retry_now(
    db: &impl ConnectionTrait,
    endpoint_id: Uuid,
    id: Uuid,
    now: DateTime<Utc>,
) -> Result<RetryNow> {
    let due_already = Condition::all()
        .add(event_delivery::pending())
        .add(event_delivery::Column::NextAttemptAt.lte(now));
    let updated = event_delivery::Entity::update_many()
        .col_expr(
            event_delivery::Column::Status,
            Expr::value(DeliveryStatus::Pending),
        )
        .col_expr(event_delivery::Column::NextAttemptAt, Expr::value(now))
        .col_expr(event_delivery::Column::UpdatedAt, Expr::value(now))
        .filter(event_delivery::Column::Id.eq(id))
        .filter(event_delivery::Column::EndpointId.eq(endpoint_id))
        .filter(due_already.not())
        .exec(db)
        .await?;
    let found = event_delivery::Entity::find_by_id(id)
        .filter(event_delivery::Column::EndpointId.eq(endpoint_id))
        .one(db)
        .await?;
    Ok(match found {
        Some(delivery) if updated.rows_affected > 0 => RetryNow::Due(delivery),
        Some(_) => RetryNow::AlreadyDue,
        None => RetryNow::Unknown,
    })
}

/// How many deliveries wait, and since when the oldest waits.
///
/// # Errors
/// The database's.
pub async fn backlog(db: &impl ConnectionTrait) -> Result<(u64, Option<DateTime<Utc>>)> {
    let pending = event_delivery::Entity::find().filter(event_delivery::pending());
    let count = pending.clone().count(db).await?;
    let oldest = pending
        .order_by_asc(event_delivery::Column::CreatedAt)
        .one(db)
        .await?
        .map(|d| d.created_at);
    Ok((count, oldest))
}

#[cfg(test)]
mod tests;
