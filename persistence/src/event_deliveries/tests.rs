use sea_orm::ActiveModelTrait;
use sea_orm::sea_query::Query;

use super::insert::fresh_columns;
use super::*;
use crate::values::EventType;

fn ids(count: usize) -> Vec<Uuid> {
    (0..count).map(|_| Uuid::now_v7()).collect()
}

/// A recording's text, for `count` deliveries.
fn recording(backend: DbBackend, count: usize) -> String {
    backend
        .build(&succeeded(backend, &ids(count), Some(200), Utc::now()))
        .sql
}

/// A read's condition leaving out `count` busy deliveries, with the values it binds.
fn leaving_out(backend: DbBackend, count: usize) -> (String, usize) {
    let busy = ids(count);
    let select = Query::select()
        .column(event_delivery::Column::Id)
        .from(event_delivery::Entity)
        .and_where(id_in(backend, &busy, false))
        .to_owned();
    let statement = backend.build(&select);
    let values = statement.values.map_or(0, |values| values.0.len());
    (statement.sql, values)
}

#[test]
fn on_postgres_a_list_of_ids_is_one_array_whatever_its_length() {
    assert_eq!(
        recording(DbBackend::Postgres, 1),
        recording(DbBackend::Postgres, 100)
    );
    assert!(
        recording(DbBackend::Postgres, 3).contains(r#""event_deliveries"."id" = ANY($6)"#),
        "{}",
        recording(DbBackend::Postgres, 3)
    );
    let (one, bound) = leaving_out(DbBackend::Postgres, 1);
    assert_eq!(
        (one.clone(), bound),
        (leaving_out(DbBackend::Postgres, 64).0, 1)
    );
    assert!(
        one.contains(r#""event_deliveries"."id" <> ALL($1)"#),
        "{one}"
    );
}

#[test]
fn on_sqlite_a_list_of_ids_stays_a_list() {
    assert_ne!(
        recording(DbBackend::Sqlite, 1),
        recording(DbBackend::Sqlite, 3)
    );
    let (sql, bound) = leaving_out(DbBackend::Sqlite, 3);
    assert!(sql.contains("NOT IN (?, ?, ?)"), "{sql}");
    assert_eq!(bound, 3);
}

/// The lookups go through the index of pending deliveries (a lane's read in its order, with no
/// sort; the endpoints due; the backlog), the endpoint's listing through `(endpoint_id, id)`,
/// and no index holds the status of a settled delivery any more.
#[tokio::test]
async fn the_lookups_use_the_pending_index_and_the_listing_the_endpoints() {
    use sea_orm::QueryTrait;

    use crate::test_support::{indexes_of, migrated_for_plans, plan_of};

    let (_dir, db) = migrated_for_plans().await;
    let mut names = indexes_of(&db, "event_deliveries").await;
    names.retain(|name| !name.starts_with("sqlite_autoindex"));
    names.sort();
    assert_eq!(
        names,
        [
            "event_deliveries_endpoint_id_idx",
            "event_deliveries_pending_idx"
        ]
    );
    let sqlite = DbBackend::Sqlite;
    let (endpoint, now) = (Uuid::now_v7(), Utc::now());
    let read = event_delivery::Entity::find()
        .filter(event_delivery::Column::EndpointId.eq(endpoint))
        .filter(event_delivery::pending())
        .filter(event_delivery::Column::NextAttemptAt.lte(now))
        .filter(id_in(sqlite, &ids(3), false))
        .order_by_asc(event_delivery::Column::NextAttemptAt)
        .limit(64);
    let plan = plan_of(&db, read.build(sqlite)).await;
    assert!(
        plan.contains("USING INDEX event_deliveries_pending_idx"),
        "{plan}"
    );
    assert!(!plan.contains("TEMP B-TREE"), "{plan}");

    let due = sea_orm::sea_query::Query::select()
        .expr(Expr::val(1))
        .from(event_delivery::Entity)
        .and_where(event_delivery::Column::EndpointId.eq(endpoint))
        .and_where(event_delivery::pending())
        .and_where(event_delivery::Column::NextAttemptAt.lte(now))
        .to_owned();
    let plan = plan_of(&db, sqlite.build(&due)).await;
    assert!(
        plan.contains("USING COVERING INDEX event_deliveries_pending_idx"),
        "{plan}"
    );

    let backlog = event_delivery::Entity::find().filter(event_delivery::pending());
    let plan = plan_of(&db, backlog.build(sqlite)).await;
    assert!(plan.contains("event_deliveries_pending_idx"), "{plan}");

    let listed = event_delivery::Entity::find()
        .filter(event_delivery::Column::EndpointId.eq(endpoint))
        .order_by_desc(event_delivery::Column::Id)
        .limit(20);
    let plan = plan_of(&db, listed.build(sqlite)).await;
    assert!(
        plan.contains("USING INDEX event_deliveries_endpoint_id_idx"),
        "{plan}"
    );
    assert!(!plan.contains("TEMP B-TREE"), "{plan}");
}

/// New deliveries go to PostgreSQL as one array per column, in one statement text whatever
/// their number; a row that is not a delivery just written keeps the list of rows.
#[test]
fn fresh_deliveries_are_columns_and_others_stay_rows() {
    let now = Utc::now();
    let rows = |n: usize| -> Vec<event_delivery::ActiveModel> {
        let addressed = Addressed::new(
            NewEvent {
                id: Uuid::now_v7(),
                event_type: EventType::MessageReceived,
                workspace_id: 7,
                body: "{}".to_owned(),
            },
            ids(n),
        );
        addressed
            .committed(now)
            .map(|row| event_delivery::ActiveModel::from(row).reset_all())
            .collect()
    };
    let columns = fresh_columns(rows(3)).expect("fresh");
    assert_eq!(columns.id.len(), 3);
    assert_eq!(columns.at, vec![now; 3]);

    let postgres = DbBackend::Postgres;
    let built = |rows| postgres.build(&insert_statement(rows, postgres).expect("statement"));
    let (three, five) = (built(rows(3)), built(rows(5)));
    assert_eq!(three.sql, five.sql, "one text for any number of rows");
    assert_eq!(three.values.map_or(0, |values| values.0.len()), 7);
    assert!(
        three.sql.starts_with(
            r#"INSERT INTO "event_deliveries" ("id", "workspace_id", "endpoint_id", "event_id", "event_type", "body", "status", "attempts", "last_status_code", "last_error", "next_attempt_at", "created_at", "updated_at") SELECT "fresh"."id", "#
        ),
        "{}",
        three.sql
    );
    assert!(
        three.sql.contains("UNNEST($7::timestamptz[])"),
        "{}",
        three.sql
    );

    let mut retried = rows(3);
    retried[1].attempts = sea_orm::ActiveValue::Set(1);
    assert_eq!(
        fresh_columns(retried.clone()).expect_err("not fresh").len(),
        3
    );
    let listed = built(retried);
    assert!(listed.sql.contains("VALUES"), "{}", listed.sql);
    assert!(!listed.sql.contains("UNNEST"), "{}", listed.sql);
}
