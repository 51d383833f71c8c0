use sea_orm::sea_query::Query;

use super::*;

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
