//! The first answer to a request sent with an `Idempotency-Key`, replayed to its retries.

use sea_orm::entity::prelude::*;

/// One row of `idempotency_keys`.
#[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
#[sea_orm(table_name = "idempotency_keys")]
pub struct Model {
    /// UUID v7.
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: Uuid,
    /// The workspace whose key it is; keys of different workspaces never meet.
    pub workspace_id: i64,
    /// The client's key.
    pub key: String,
    /// Hash of the request (method, path and body), to tell a retry from another request.
    pub fingerprint: String,
    /// The answer's status; `None` while the first request is under way.
    pub status_code: Option<i32>,
    /// The answer's JSON body.
    pub response: Option<Json>,
    /// When the first request arrived; keys are kept 24 hours.
    pub created_at: DateTimeUtc,
}

/// Relations are expressed through explicit queries.
#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
