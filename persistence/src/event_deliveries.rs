//! Event deliveries: one durable row per endpoint and event, written by the fact's own
//! transaction ([`insert`]), taken by the delivery actor when due ([`due`]) and settled after
//! each attempt ([`settle`]). A delivery being attempted stays `pending`, so one caught by a
//! stop is attempted again after the restart: at least once, never lost.

use chrono::{DateTime, Utc};
use sea_orm::sea_query::{Expr, ExprTrait, SimpleExpr, UpdateStatement};
use sea_orm::{
    ActiveModelTrait, ColumnTrait, Condition, ConnectionTrait, DbBackend, EntityTrait,
    PaginatorTrait, QueryFilter, QueryOrder, QuerySelect, QueryTrait, Statement, TryIntoModel,
};
use uuid::Uuid;

use crate::entities::{event_delivery, event_webhook};
use crate::page::fetch_page;
use crate::values::{DeliveryStatus, EventType};
use crate::{Page, Paged, Result};

/// An event as it is written: its id (`webhook-id`), type, workspace and the body every
/// endpoint receives.
#[derive(Clone, Debug)]
pub struct NewEvent {
    /// The event's id.
    pub id: Uuid,
    /// Its type.
    pub event_type: EventType,
    /// The workspace it happened in.
    pub workspace_id: i64,
    /// The JSON body, `{"type", "timestamp", "data"}`.
    pub body: String,
}

/// An event and the endpoints that take it: one delivery each, written with the event's fact.
/// The deliveries' ids are drawn when it is made, so that what was committed can be handed to
/// the delivery actor as it is ([`Addressed::committed`]), with no read to find it.
#[derive(Clone, Debug)]
pub struct Addressed {
    event: NewEvent,
    /// Each endpoint it goes to, with its delivery's id.
    to: Vec<(Uuid, Uuid)>,
}

impl Addressed {
    /// `event` for each of `endpoints`, a delivery id drawn for each.
    pub fn new(event: NewEvent, endpoints: impl IntoIterator<Item = Uuid>) -> Self {
        let to = endpoints
            .into_iter()
            .map(|endpoint_id| (endpoint_id, Uuid::now_v7()))
            .collect();
        Self { event, to }
    }

    /// The event.
    pub fn event(&self) -> &NewEvent {
        &self.event
    }

    /// The endpoints it goes to.
    pub fn endpoints(&self) -> impl Iterator<Item = Uuid> + '_ {
        self.to.iter().map(|(endpoint_id, _)| *endpoint_id)
    }

    /// The deliveries as [`insert`] writes them, due at `now`.
    pub fn committed(
        &self,
        now: DateTime<Utc>,
    ) -> impl Iterator<Item = event_delivery::Model> + '_ {
        self.to
            .iter()
            .map(move |&(endpoint_id, id)| event_delivery::Model {
                id,
                workspace_id: self.event.workspace_id,
                endpoint_id,
                event_id: self.event.id,
                event_type: self.event.event_type.as_str().to_owned(),
                body: self.event.body.clone(),
                status: DeliveryStatus::Pending,
                attempts: 0,
                last_status_code: None,
                last_error: None,
                next_attempt_at: now,
                created_at: now,
                updated_at: now,
            })
    }
}

/// Writes `addressed`'s deliveries, due at once. Runs in the fact's transaction; inside the
/// writer's batch, with the batch's other deliveries in one statement just before its commit.
///
/// # Errors
/// The database's.
pub async fn insert(
    db: &impl ConnectionTrait,
    addressed: &Addressed,
    now: DateTime<Utc>,
) -> Result<()> {
    if addressed.to.is_empty() {
        return Ok(());
    }
    let rows: Vec<_> = addressed
        .committed(now)
        .map(|row| event_delivery::ActiveModel::from(row).reset_all())
        .collect();
    match crate::group_commit::keep_deliveries(rows) {
        Ok(()) => Ok(()),
        Err(rows) => insert_rows(db, rows).await,
    }
}

/// Writes each of `addressed` (see [`insert`]).
///
/// # Errors
/// The database's.
pub async fn insert_all(
    db: &impl ConnectionTrait,
    addressed: &[Addressed],
    now: DateTime<Utc>,
) -> Result<()> {
    for one in addressed {
        insert(db, one, now).await?;
    }
    Ok(())
}

/// Inserts delivery `rows` in one statement.
pub(crate) async fn insert_rows(
    db: &impl ConnectionTrait,
    rows: Vec<event_delivery::ActiveModel>,
) -> Result<()> {
    if rows.is_empty() {
        return Ok(());
    }
    let rows = match db.get_database_backend() {
        DbBackend::Postgres => match fresh_columns(rows) {
            Ok(columns) => {
                db.execute_raw(columns.insert()).await?;
                return Ok(());
            }
            Err(rows) => rows,
        },
        _ => rows,
    };
    event_delivery::Entity::insert_many(rows)
        .exec_without_returning(db)
        .await?;
    Ok(())
}

/// New deliveries as PostgreSQL takes them in one statement whatever their number: one array
/// per column that differs from row to row. A list of rows is a new statement text for each
/// number of rows, prepared and planned anew on each connection (the writer's batches carry
/// any number: `pg_stat_statements` counted 30 texts in 640 inserts of one run); the arrays
/// are one text, prepared once per connection.
#[derive(Debug, Default)]
struct FreshColumns {
    id: Vec<Uuid>,
    workspace_id: Vec<i64>,
    endpoint_id: Vec<Uuid>,
    event_id: Vec<Uuid>,
    event_type: Vec<String>,
    body: Vec<String>,
    /// When each was written (and is due).
    at: Vec<DateTime<Utc>>,
}

/// The text of [`FreshColumns::insert`].
const INSERT_FRESH: &str = "INSERT INTO event_deliveries (id, workspace_id, endpoint_id, \
     event_id, event_type, body, status, attempts, last_status_code, last_error, \
     next_attempt_at, created_at, updated_at) \
     SELECT id, workspace_id, endpoint_id, event_id, event_type, body, 'pending', 0, NULL, \
     NULL, at, at, at \
     FROM UNNEST($1::uuid[], $2::int8[], $3::uuid[], $4::uuid[], $5::text[], $6::text[], \
     $7::timestamptz[]) AS fresh (id, workspace_id, endpoint_id, event_id, event_type, body, at)";

impl FreshColumns {
    fn insert(self) -> Statement {
        Statement::from_sql_and_values(
            DbBackend::Postgres,
            INSERT_FRESH,
            [
                self.id.into(),
                self.workspace_id.into(),
                self.endpoint_id.into(),
                self.event_id.into(),
                self.event_type.into(),
                self.body.into(),
                self.at.into(),
            ],
        )
    }
}

/// `rows` as columns, when each is a delivery just written (pending, never attempted, due
/// when written, as [`Addressed::committed`] makes them); the rows as they were otherwise.
fn fresh_columns(
    rows: Vec<event_delivery::ActiveModel>,
) -> std::result::Result<FreshColumns, Vec<event_delivery::ActiveModel>> {
    let mut columns = FreshColumns::default();
    for row in &rows {
        let Ok(row) = row.clone().try_into_model() else {
            return Err(rows);
        };
        let fresh = row.status == DeliveryStatus::Pending
            && row.attempts == 0
            && row.last_status_code.is_none()
            && row.last_error.is_none()
            && row.next_attempt_at == row.created_at
            && row.updated_at == row.created_at;
        if !fresh {
            return Err(rows);
        }
        columns.id.push(row.id);
        columns.workspace_id.push(row.workspace_id);
        columns.endpoint_id.push(row.endpoint_id);
        columns.event_id.push(row.event_id);
        columns.event_type.push(row.event_type);
        columns.body.push(row.body);
        columns.at.push(row.created_at);
    }
    Ok(columns)
}

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
