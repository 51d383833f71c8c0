//! Identities: `GET /identity`, `GET|PUT|DELETE /identity/{id}`. A path id resolves, in order,
//! as UUID, external id, phone and e-mail, in the caller's workspace only. `PUT` creates or
//! updates, aggregating a new contact point into the identity that already owns its phone or
//! e-mail; either way the path becomes the identity's external id, so it addresses it next.

use std::collections::HashMap;

use axum::extract::State;
use chrono::{DateTime, Utc};
use parley_persistence::ConnectionTrait;
use parley_persistence::ContactKind;
use parley_persistence::entities::{contact_point, identity};
use parley_persistence::identities::{self};
use serde::Serialize;
use serde_json::Value;
use uuid::Uuid;

use crate::domain::Permission;
use crate::http::AppState;
use crate::http::auth::Caller;
use crate::http::envelope::{DeletedRecord, Envelope};
use crate::http::error::{ApiError, Result};
use crate::http::extract::{Path, Query};
use crate::http::lookup::find_identity;
use crate::http::pagination::{ListQuery, PageResponse};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

/// Longest name and external id.
const MAX_TEXT: usize = 200;

mod journey;
mod put;

use self::put::{__path_put_identity, put_identity};

pub(crate) fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .merge(journey::router())
        .routes(routes!(list_identities))
        .routes(routes!(get_identity, put_identity, delete_identity))
}

/// An identity as the API shows it.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub(crate) struct IdentityRecord {
    id: Uuid,
    name: Option<String>,
    phone: Option<String>,
    email: Option<String>,
    external_id: Option<String>,
    metadata: Value,
    stage: Option<String>,
    stage_id: Option<Uuid>,
    opted_out: bool,
    contacts: Vec<ContactRecord>,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
struct ContactRecord {
    #[serde(rename = "type")]
    kind: ContactKind,
    value: String,
}

/// Builds records for `found` with two more queries (contacts and stages), whatever their number.
pub(crate) async fn records(
    db: &impl ConnectionTrait,
    found: Vec<identity::Model>,
) -> Result<Vec<IdentityRecord>> {
    let ids: Vec<Uuid> = found.iter().map(|i| i.id).collect();
    let mut contacts: HashMap<Uuid, Vec<contact_point::Model>> = HashMap::new();
    for contact in identities::contacts_of(db, &ids).await? {
        contacts
            .entry(contact.identity_id)
            .or_default()
            .push(contact);
    }
    let stage_ids: Vec<Uuid> = found.iter().filter_map(|i| i.stage_id).collect();
    let stage_names: HashMap<Uuid, String> = identities::stages_by_id(db, &stage_ids)
        .await?
        .into_iter()
        .map(|s| (s.id, s.name))
        .collect();
    Ok(found
        .into_iter()
        .map(|i| {
            let own = contacts.remove(&i.id).unwrap_or_default();
            let primary = |kind: ContactKind| {
                own.iter()
                    .find(|c| c.kind == kind && c.is_primary)
                    .or_else(|| own.iter().find(|c| c.kind == kind))
                    .map(|c| c.value.clone())
            };
            IdentityRecord {
                phone: primary(ContactKind::Phone),
                email: primary(ContactKind::Email),
                stage: i.stage_id.and_then(|s| stage_names.get(&s).cloned()),
                contacts: own
                    .iter()
                    .map(|c| ContactRecord {
                        kind: c.kind,
                        value: c.value.clone(),
                    })
                    .collect(),
                id: i.id,
                name: i.name,
                external_id: i.external_id,
                metadata: i.metadata,
                stage_id: i.stage_id,
                opted_out: i.opted_out,
                created_at: i.created_at,
                updated_at: i.updated_at,
            }
        })
        .collect())
}

/// The record of one identity.
pub(crate) async fn record(
    db: &impl ConnectionTrait,
    found: identity::Model,
) -> Result<IdentityRecord> {
    records(db, vec![found])
        .await?
        .pop()
        .ok_or_else(|| ApiError::Internal(anyhow::anyhow!("identity record went missing")))
}

/// List identities.
///
/// The workspace's people, in pages, with their phones, e-mails and stage.
#[utoipa::path(
    get,
    path = "/identity",
    tag = "identities",
    params(ListQuery),
    responses((status = 200, body = PageResponse<IdentityRecord>)),
)]
#[tracing::instrument(skip_all, fields(workspace_id = caller.workspace_id))]
async fn list_identities(
    caller: Caller,
    State(state): State<AppState>,
    Query(query): Query<ListQuery>,
) -> Result<PageResponse<IdentityRecord>> {
    caller.require(Permission::Read)?;
    let page = query.page()?;
    let paged = identities::list(&state.db, caller.workspace_id, page).await?;
    let total = paged.total;
    let items = records(&state.db, paged.items).await?;
    Ok(PageResponse::new(
        "Identities retrieved successfully",
        page,
        parley_persistence::Paged { items, total },
        |r| r,
    ))
}

/// Read an identity.
///
/// By its id, or by a path that resolves to one: `external_id`, a phone (`+351…`) or an e-mail.
#[utoipa::path(
    get,
    path = "/identity/{identity_id}",
    tag = "identities",
    params(("identity_id" = String, Path, description = "Identity: its id, or a path resolving to one (`external_id`, phone, e-mail)")),
    responses((status = 200, body = Envelope<IdentityRecord>)),
)]
#[tracing::instrument(skip_all, fields(workspace_id = caller.workspace_id))]
async fn get_identity(
    caller: Caller,
    State(state): State<AppState>,
    Path(identity_id): Path<String>,
) -> Result<Envelope<IdentityRecord>> {
    caller.require(Permission::Read)?;
    let found = find_identity(&state.db, caller.workspace_id, &identity_id).await?;
    Ok(Envelope::ok(
        "Identity retrieved successfully",
        record(&state.db, found).await?,
    ))
}

/// Delete an identity.
///
/// With its memory, conversations and the files they carried.
#[utoipa::path(
    delete,
    path = "/identity/{identity_id}",
    tag = "identities",
    params(("identity_id" = String, Path, description = "Identity: its id, or a path resolving to one (`external_id`, phone, e-mail)")),
    responses((status = 200, body = Envelope<DeletedRecord>)),
)]
#[tracing::instrument(skip_all, fields(workspace_id = caller.workspace_id))]
async fn delete_identity(
    caller: Caller,
    State(state): State<AppState>,
    Path(identity_id): Path<String>,
) -> Result<Envelope<DeletedRecord>> {
    caller.require(Permission::Write)?;
    let txn = parley_persistence::begin_write(&state.db).await?;
    let found = find_identity(&txn, caller.workspace_id, &identity_id).await?;
    let files = parley_persistence::attachments::keys_of_identity(&txn, found.id).await?;
    identities::delete(&txn, caller.workspace_id, found.id).await?;
    state
        .actors
        .store()
        .commit_identities(txn, caller.workspace_id, &[found.id])
        .await?;
    parley_actors::media::delete_files(&state.db, state.actors.media(), &files).await;
    Ok(Envelope::ok(
        "Identity deleted successfully",
        DeletedRecord { id: found.id },
    ))
}
