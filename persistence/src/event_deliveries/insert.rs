//! New deliveries: an event and the endpoints that take it ([`Addressed`]), written by the
//! fact's own transaction or kept back for the end of the writer's batch ([`insert`]).

use chrono::{DateTime, Utc};
use sea_orm::sea_query::{Expr, InsertStatement, Query};
use sea_orm::{
    ActiveModelTrait, ConnectionTrait, DbBackend, DbErr, EntityTrait, QueryTrait, Value,
};
use uuid::Uuid;

use crate::Result;
use crate::entities::event_delivery;
use crate::values::{DeliveryStatus, EventType};

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

/// Inserts delivery `rows` in one statement ([`insert_statement`]).
async fn insert_rows(
    db: &impl ConnectionTrait,
    rows: Vec<event_delivery::ActiveModel>,
) -> Result<()> {
    if rows.is_empty() {
        return Ok(());
    }
    db.execute(&insert_statement(rows, db.get_database_backend())?)
        .await?;
    Ok(())
}

/// The statement that inserts delivery `rows` on `backend`: on PostgreSQL, when each is a
/// delivery just written, their columns as arrays ([`FreshColumns`]); a list of rows otherwise.
/// A statement, not a call: the writer's batch sends it with the batch's counts in one call
/// (`crate::one_call`).
///
/// # Errors
/// None in practice: the arrays' select names as many columns as the insert.
pub(crate) fn insert_statement(
    rows: Vec<event_delivery::ActiveModel>,
    backend: DbBackend,
) -> Result<InsertStatement> {
    let rows = match backend {
        DbBackend::Postgres => match fresh_columns(rows) {
            Ok(columns) => return columns.insert(),
            Err(rows) => rows,
        },
        _ => rows,
    };
    Ok(event_delivery::Entity::insert_many(rows).into_query())
}

/// New deliveries as PostgreSQL takes them in one statement whatever their number: one array
/// per column that differs from row to row. A list of rows is a new statement text for each
/// number of rows, prepared and planned anew on each connection (the writer's batches carry
/// any number: `pg_stat_statements` counted 30 texts in 640 inserts of one run); the arrays
/// are one text, prepared once per connection (with the counts of a writer's batch, one per
/// number of counts).
#[derive(Debug, Default)]
pub(super) struct FreshColumns {
    pub(super) id: Vec<Uuid>,
    workspace_id: Vec<i64>,
    endpoint_id: Vec<Uuid>,
    event_id: Vec<Uuid>,
    event_type: Vec<String>,
    body: Vec<String>,
    /// When each was written (and is due).
    pub(super) at: Vec<DateTime<Utc>>,
}

impl FreshColumns {
    /// `INSERT INTO event_deliveries (…) SELECT fresh.id, …, 'pending', 0, NULL, NULL, fresh.at,
    /// fresh.at, fresh.at FROM (SELECT UNNEST($1::uuid[]) AS id, …) AS fresh`: the arrays
    /// unnested side by side, a row each (set-returning functions in one select list run in
    /// step, PostgreSQL 10 and later; the arrays are all as long as the rows).
    pub(super) fn insert(self) -> Result<InsertStatement> {
        use event_delivery::Column as C;
        let unnest = |cast: &str, values: Value| {
            Expr::cust_with_values(format!("UNNEST($1::{cast}[])"), [values])
        };
        let fresh = Query::select()
            .expr_as(unnest("uuid", self.id.into()), C::Id)
            .expr_as(unnest("int8", self.workspace_id.into()), C::WorkspaceId)
            .expr_as(unnest("uuid", self.endpoint_id.into()), C::EndpointId)
            .expr_as(unnest("uuid", self.event_id.into()), C::EventId)
            .expr_as(unnest("text", self.event_type.into()), C::EventType)
            .expr_as(unnest("text", self.body.into()), C::Body)
            .expr_as(unnest("timestamptz", self.at.into()), C::CreatedAt)
            .to_owned();
        let of_fresh = |column: C| Expr::col((FRESH, column));
        let rows = Query::select()
            .exprs([
                of_fresh(C::Id),
                of_fresh(C::WorkspaceId),
                of_fresh(C::EndpointId),
                of_fresh(C::EventId),
                of_fresh(C::EventType),
                of_fresh(C::Body),
                Expr::cust("'pending'"),
                Expr::cust("0"),
                Expr::cust("NULL"),
                Expr::cust("NULL"),
                of_fresh(C::CreatedAt),
                of_fresh(C::CreatedAt),
                of_fresh(C::CreatedAt),
            ])
            .from_subquery(fresh, FRESH)
            .to_owned();
        let mut insert = Query::insert();
        insert
            .into_table(event_delivery::Entity)
            .columns([
                C::Id,
                C::WorkspaceId,
                C::EndpointId,
                C::EventId,
                C::EventType,
                C::Body,
                C::Status,
                C::Attempts,
                C::LastStatusCode,
                C::LastError,
                C::NextAttemptAt,
                C::CreatedAt,
                C::UpdatedAt,
            ])
            .select_from(rows)
            .map_err(|error| DbErr::Custom(error.to_string()))?;
        Ok(insert)
    }
}

/// The arrays' rows, as [`FreshColumns::insert`] names them.
const FRESH: &str = "fresh";

/// `rows` as columns, when each is a delivery just written (pending, never attempted, due
/// when written, as [`Addressed::committed`] makes them); the rows as they were otherwise.
pub(super) fn fresh_columns(
    rows: Vec<event_delivery::ActiveModel>,
) -> std::result::Result<FreshColumns, Vec<event_delivery::ActiveModel>> {
    if !rows.iter().all(is_fresh) {
        return Err(rows);
    }
    let mut columns = FreshColumns::default();
    for row in rows {
        columns.id.push(row.id.unwrap());
        columns.workspace_id.push(row.workspace_id.unwrap());
        columns.endpoint_id.push(row.endpoint_id.unwrap());
        columns.event_id.push(row.event_id.unwrap());
        columns.event_type.push(row.event_type.unwrap());
        columns.body.push(row.body.unwrap());
        columns.at.push(row.created_at.unwrap());
    }
    Ok(columns)
}

/// Whether `row` is a delivery just written, every column set (looked at in place: the
/// writer's path copies no body to find out).
fn is_fresh(row: &event_delivery::ActiveModel) -> bool {
    let created = row.created_at.try_as_ref();
    row.id.is_set()
        && row.workspace_id.is_set()
        && row.endpoint_id.is_set()
        && row.event_id.is_set()
        && row.event_type.is_set()
        && row.body.is_set()
        && row
            .status
            .is_set_and(|status| *status == DeliveryStatus::Pending)
        && row.attempts.is_set_and(|attempts| *attempts == 0)
        && row.last_status_code.is_set_and(Option::is_none)
        && row.last_error.is_set_and(Option::is_none)
        && created.is_some()
        && row.next_attempt_at.try_as_ref() == created
        && row.updated_at.try_as_ref() == created
}
