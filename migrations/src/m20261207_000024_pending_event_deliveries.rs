//! Event deliveries are looked up through an index of the pending ones only, and listed through
//! one of their endpoint's.
//!
//! Both indexes of `event_deliveries` held `status`: `(endpoint_id, status, next_attempt_at)`
//! for a lane's reads and the endpoints due, `(status, next_attempt_at)` for the backlog. Every
//! delivery settled changed a key of each (one entry out, one in, per index), and on PostgreSQL
//! no settle could be a heap-only update. Nearly every row is `succeeded` or `failed` and no
//! query looks for those through a status, so the lookups get one partial index of the pending
//! rows, which a success only leaves, and the endpoint's listing (newest first, and the cascade
//! of a deleted endpoint) one of `(endpoint_id, id)`, which no settle changes. A delivery
//! written then adds three index entries instead of four, and a success changes one index
//! instead of two.
//!
//! As with the messages' partial indexes (`m20261127_000016`), the queries repeat the index's
//! condition word for word (`parley_persistence::event_deliveries`): a bound `status = ?` proves
//! nothing to a plan made once for any value.

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub(crate) struct Migration;

/// The indexes made, each with its statement.
const MADE: [(&str, &str); 2] = [
    (
        "event_deliveries_pending_idx",
        "CREATE INDEX event_deliveries_pending_idx ON event_deliveries \
         (endpoint_id, next_attempt_at) WHERE status = 'pending'",
    ),
    (
        "event_deliveries_endpoint_id_idx",
        "CREATE INDEX event_deliveries_endpoint_id_idx ON event_deliveries (endpoint_id, id)",
    ),
];

/// The indexes they replace, each with its statement.
const REPLACED: [(&str, &str); 2] = [
    (
        "event_deliveries_endpoint_status_next_idx",
        "CREATE INDEX event_deliveries_endpoint_status_next_idx ON event_deliveries \
         (endpoint_id, status, next_attempt_at)",
    ),
    (
        "event_deliveries_status_next_idx",
        "CREATE INDEX event_deliveries_status_next_idx ON event_deliveries \
         (status, next_attempt_at)",
    ),
];

// async_trait cannot express the trait's lifetimes with `'_`, so the elided form is used.
#[allow(elided_lifetimes_in_paths)]
#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        replace(manager, &MADE, &REPLACED).await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        replace(manager, &REPLACED, &MADE).await
    }
}

/// Makes the indexes of `made` before dropping those of `dropped`, so that no lookup is left
/// without one between the two.
async fn replace(
    manager: &SchemaManager<'_>,
    made: &[(&str, &str)],
    dropped: &[(&str, &str)],
) -> Result<(), DbErr> {
    let db = manager.get_connection();
    for (_, statement) in made {
        db.execute_unprepared(statement).await?;
    }
    for (name, _) in dropped {
        db.execute_unprepared(&format!("DROP INDEX {name}")).await?;
    }
    Ok(())
}
