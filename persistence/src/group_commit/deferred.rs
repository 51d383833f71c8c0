//! What a batch's writes leave to its end: rows that many writes add to and none reads back
//! before the commit, written by the writer in one statement each, in the batch's transaction,
//! just before its commit.
//!
//! - Usage counts ([`crate::usage::add`]): every write that counts upserts the same few rows
//!   (a workspace's day), so on PostgreSQL a batch held their locks from its first count to its
//!   commit, and the other writers' batches and the pool's writes queued on them. Upserted
//!   last, the rows are held for one statement and the commit.
//! - Event deliveries ([`crate::event_deliveries::insert`]): a fact with an event endpoint
//!   wrote its delivery rows as statements of its own, one round trip each; here the batch's
//!   rows go in one `INSERT` (one per 512 rows), in the same call as the counts, and the fact
//!   itself stays a merged piece ([`crate::Merged::atomic`]).
//!
//! Outside a batch (a write alone, or a pool connection), nothing is kept back: the caller's
//! statements run where they are, in the caller's transaction.

use std::cell::RefCell;

use sea_orm::{DbBackend, EntityTrait, QueryTrait};

use super::merged::statement_sizes;
use crate::entities::event_delivery;
use crate::usage::Count;
use crate::{Result, one_call};

/// Most delivery rows per statement (13 columns each: SQLite takes 32,766 values a statement).
const MOST_ROWS: usize = 512;
/// Most delivery rows per call (26,624 values).
const ROWS_PER_CALL: usize = 4 * MOST_ROWS;

tokio::task_local! {
    /// What the writer's batch being run keeps back (see [`kept_back`]).
    static KEPT_BACK: RefCell<Deferred>;
}

/// What a batch's writes kept back.
#[derive(Default)]
pub(crate) struct Deferred {
    counts: Vec<Count>,
    deliveries: Vec<event_delivery::ActiveModel>,
}

/// Runs `work` keeping back what it counts and the event deliveries it writes, and answers its
/// output with them.
pub(super) async fn kept_back<F: std::future::Future>(work: F) -> (F::Output, Deferred) {
    KEPT_BACK
        .scope(RefCell::new(Deferred::default()), async move {
            let output = work.await;
            let deferred = KEPT_BACK.with(|kept| std::mem::take(&mut *kept.borrow_mut()));
            (output, deferred)
        })
        .await
}

/// Keeps `counts` back for the batch's end; false outside a batch (the caller writes them).
pub(crate) fn keep_counts(counts: &[Count]) -> bool {
    KEPT_BACK
        .try_with(|kept| kept.borrow_mut().counts.extend_from_slice(counts))
        .is_ok()
}

/// Keeps the delivery `rows` back for the batch's end; answers them outside a batch (the
/// caller writes them).
pub(crate) fn keep_deliveries(
    rows: Vec<event_delivery::ActiveModel>,
) -> std::result::Result<(), Vec<event_delivery::ActiveModel>> {
    let mut rows = Some(rows);
    let kept = KEPT_BACK.try_with(|kept| {
        if let Some(rows) = rows.take() {
            kept.borrow_mut().deliveries.extend(rows);
        }
    });
    match (kept, rows) {
        (Ok(()), _) | (Err(_), None) => Ok(()),
        (Err(_), Some(rows)) => Err(rows),
    }
}

impl Deferred {
    /// Whether nothing was kept back.
    pub(super) fn is_empty(&self) -> bool {
        self.counts.is_empty() && self.deliveries.is_empty()
    }

    /// Writes what was kept back on `db`, the batch's transaction, in as few calls as the
    /// statements allow: they are rows that do not depend on one another ([`crate::one_call`]),
    /// and as two calls a batch with events paid a round trip more than one without, on the
    /// writer's path (its transaction open through it). The counts come last (their rows
    /// locked for the shortest time).
    ///
    /// - SQLite: one call, unless the batch wrote more than [`ROWS_PER_CALL`] deliveries
    ///   (its limit on a statement's values).
    /// - PostgreSQL: one call is one statement, its text made of each of its parts; the
    ///   deliveries' part is one text for any number of rows (their columns as arrays,
    ///   [`crate::event_deliveries::insert_statement`]), so the texts are one per number of
    ///   counts (a batch's workspaces and metrics: a few), each prepared once per writer.
    pub(super) async fn write(self, db: &impl one_call::Executor) -> Result<()> {
        let backend = db.get_database_backend();
        let counts = crate::usage::to_write(&self.counts).map(one_call::Write::from);
        if backend != DbBackend::Sqlite {
            let mut deliveries = self.deliveries.into_iter();
            let mut writes = Vec::new();
            for size in sizes(deliveries.len(), backend) {
                let rows = deliveries.by_ref().take(size).collect();
                let insert = crate::event_deliveries::insert_statement(rows, backend)?;
                writes.push(insert.into());
            }
            writes.extend(counts);
            return one_call::run(db, writes).await;
        }
        let mut calls = calls(self.deliveries, backend);
        match calls.last_mut() {
            Some(last) => last.extend(counts),
            None => calls.push(counts.into_iter().collect()),
        }
        for call in calls {
            one_call::run(db, call).await?;
        }
        Ok(())
    }
}

/// The delivery `rows` as statements of at most [`MOST_ROWS`] rows, grouped in calls of at
/// most [`ROWS_PER_CALL`] rows.
fn calls(rows: Vec<event_delivery::ActiveModel>, backend: DbBackend) -> Vec<Vec<one_call::Write>> {
    let mut rows = rows.into_iter();
    let mut calls: Vec<Vec<one_call::Write>> = Vec::new();
    let mut in_call = ROWS_PER_CALL;
    for size in sizes(rows.len(), backend) {
        if in_call + size > ROWS_PER_CALL {
            calls.push(Vec::new());
            in_call = 0;
        }
        in_call += size;
        let statement = event_delivery::Entity::insert_many(rows.by_ref().take(size)).into_query();
        if let Some(call) = calls.last_mut() {
            call.push(statement.into());
        }
    }
    calls
}

/// How many rows each statement of `n` delivery rows carries: the writer's sizes (few
/// prepared statements on SQLite), none above [`MOST_ROWS`].
fn sizes(n: usize, backend: DbBackend) -> Vec<usize> {
    let whole = n / MOST_ROWS;
    let mut sizes = vec![MOST_ROWS; whole];
    sizes.extend(statement_sizes(n % MOST_ROWS, backend));
    sizes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delivery_rows_go_in_statements_of_at_most_512_and_few_sizes() {
        assert_eq!(sizes(0, DbBackend::Sqlite), Vec::<usize>::new());
        assert_eq!(sizes(13, DbBackend::Sqlite), vec![8, 5]);
        assert_eq!(sizes(13, DbBackend::Postgres), vec![13]);
        assert_eq!(sizes(1030, DbBackend::Sqlite), vec![512, 512, 6]);
        assert_eq!(sizes(1030, DbBackend::Postgres), vec![512, 512, 6]);
        assert_eq!(sizes(600, DbBackend::Sqlite), vec![512, 88]);
    }

    #[test]
    fn a_batch_of_deliveries_is_one_call_unless_sqlites_limit_on_values_splits_it() {
        let row = event_delivery::ActiveModel {
            attempts: sea_orm::ActiveValue::Set(0),
            ..Default::default()
        };
        let shape = |n: usize| -> Vec<usize> {
            calls(vec![row.clone(); n], DbBackend::Sqlite)
                .iter()
                .map(Vec::len)
                .collect()
        };
        assert_eq!(shape(0), Vec::<usize>::new());
        assert_eq!(shape(13), vec![2]);
        assert_eq!(shape(2048), vec![4]);
        assert_eq!(shape(2100), vec![4, 2]);
        assert_eq!(shape(5000), vec![4, 4, 2]);
    }
}
