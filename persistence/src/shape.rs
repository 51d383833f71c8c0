//! SQL built once. A hot read whose shape never changes keeps its statement's text from the
//! first build and binds each call's values to it, instead of building the text through
//! sea-query on every call (a twentieth of the CPU of `GET /workers` or `GET /identity/{id}`,
//! by the `crud_reads` profile).

use std::sync::OnceLock;

use sea_orm::{DbBackend, Statement, Value, Values};

/// The text of one query, per backend, from its first build. Only for a query whose text does
/// not depend on its values: no optional filter, no `IN` list of varying length, no value that
/// sea-query would render as `NULL` rather than bind.
pub(crate) struct Shape {
    sqlite: OnceLock<String>,
    postgres: OnceLock<String>,
}

impl Shape {
    pub(crate) const fn new() -> Self {
        Self {
            sqlite: OnceLock::new(),
            postgres: OnceLock::new(),
        }
    }

    /// The statement `build` makes on `backend`, with `values` bound to the text of its first
    /// build. `values` must be what `build` binds, in its order: debug builds (every test) build
    /// it each time and check both the values and the text.
    pub(crate) fn statement(
        &self,
        backend: DbBackend,
        values: Vec<Value>,
        build: impl Fn(DbBackend) -> Statement,
    ) -> Statement {
        let slot = match backend {
            DbBackend::Postgres => &self.postgres,
            _ => &self.sqlite,
        };
        if cfg!(debug_assertions) {
            let built = build(backend);
            let built_values = built.values.map(|v| v.0).unwrap_or_default();
            assert_eq!(built_values, values, "the values of `{}`", built.sql);
            if let Some(sql) = slot.get() {
                assert_eq!(sql, &built.sql, "a shape whose text changed");
            }
        }
        let sql = slot.get_or_init(|| build(backend).sql);
        Statement {
            sql: sql.clone(),
            values: Some(Values(values)),
            db_backend: backend,
        }
    }
}

#[cfg(test)]
mod tests {
    use sea_orm::{ColumnTrait, EntityTrait, QueryFilter, QueryTrait};

    use super::*;
    use crate::entities::worker;

    fn by_workspace(backend: DbBackend, workspace_id: i64) -> Statement {
        worker::Entity::find()
            .filter(worker::Column::WorkspaceId.eq(workspace_id))
            .build(backend)
    }

    #[test]
    fn the_text_is_kept_and_each_call_binds_its_own_values() {
        let shape = Shape::new();
        for workspace_id in [1_i64, 2] {
            let made = shape.statement(DbBackend::Sqlite, vec![workspace_id.into()], |b| {
                by_workspace(b, workspace_id)
            });
            assert_eq!(made, by_workspace(DbBackend::Sqlite, workspace_id));
        }
        let on_postgres = shape.statement(DbBackend::Postgres, vec![3_i64.into()], |b| {
            by_workspace(b, 3)
        });
        assert_eq!(on_postgres, by_workspace(DbBackend::Postgres, 3));
    }

    #[test]
    #[should_panic(expected = "the values of")]
    fn values_that_are_not_the_builds_are_caught() {
        Shape::new().statement(DbBackend::Sqlite, vec![2_i64.into()], |b| {
            by_workspace(b, 1)
        });
    }
}
