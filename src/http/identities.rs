//! Identities: `GET /identity`, `GET|PUT|DELETE /identity/{id}`. A path id resolves, in order,
//! as UUID, external id, phone and e-mail, in the caller's workspace only. `PUT` creates or
//! updates, aggregating a new contact point into the identity that already owns its phone or
//! e-mail; either way the path becomes the identity's external id, so it addresses it next.

use std::collections::HashMap;

use axum::extract::State;
use chrono::{DateTime, Utc};
use parley_persistence::ContactKind;
use parley_persistence::entities::{contact_point, identity};
use parley_persistence::identities::{self, IdentityChanges, NewIdentity};
use parley_persistence::{ConnectionTrait, clock};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use uuid::Uuid;

use crate::domain::{Email, Permission, Phone};
use crate::http::AppState;
use crate::http::auth::Caller;
use crate::http::envelope::Envelope;
use crate::http::error::{ApiError, Result};
use crate::http::extract::{Json, Path, Query};
use crate::http::lookup::{find_identity, resolve_identity};
use crate::http::pagination::{ListQuery, PageResponse};
use crate::http::validation::{Problems, object_or_empty, optional_text, present};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

/// Longest name and external id.
const MAX_TEXT: usize = 200;

mod journey;

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

#[derive(Debug, Deserialize, utoipa::ToSchema)]
struct PutIdentityBody {
    #[serde(default, deserialize_with = "present")]
    name: Option<Option<String>>,
    phone: Option<String>,
    email: Option<String>,
    #[serde(default, deserialize_with = "present")]
    external_id: Option<Option<String>>,
    metadata: Option<Value>,
    opted_out: Option<bool>,
}

/// A PUT body, checked.
struct IdentityUpdate {
    name: Option<Option<String>>,
    external_id: Option<Option<String>>,
    phone: Option<Phone>,
    email: Option<Email>,
    metadata: Option<Value>,
    opted_out: Option<bool>,
}

impl IdentityUpdate {
    fn parse(body: PutIdentityBody) -> Result<Self> {
        let mut problems = Problems::default();
        let name = body
            .name
            .map(|n| optional_text(&mut problems, "name", n, MAX_TEXT));
        let external_id = body
            .external_id
            .map(|e| optional_text(&mut problems, "external_id", e, MAX_TEXT));
        let phone = body
            .phone
            .and_then(|p| problems.parse(["phone"], Phone::try_from(p.as_str())));
        let email = body
            .email
            .and_then(|e| problems.parse(["email"], Email::try_from(e.as_str())));
        let metadata = body
            .metadata
            .map(|m| object_or_empty(&mut problems, "metadata", Some(m)));
        problems.finish()?;
        Ok(Self {
            name,
            external_id,
            phone,
            email,
            metadata,
            opted_out: body.opted_out,
        })
    }
}

/// Who already owns the contact points of a PUT.
struct Owners {
    phone: Option<identity::Model>,
    email: Option<identity::Model>,
}

impl Owners {
    async fn of(txn: &impl ConnectionTrait, ws: i64, update: &IdentityUpdate) -> Result<Self> {
        let phone = match &update.phone {
            Some(p) => identities::find_by_contact(txn, ws, ContactKind::Phone, p.as_str()).await?,
            None => None,
        };
        let email = match &update.email {
            Some(e) => identities::find_by_contact(txn, ws, ContactKind::Email, e.as_str()).await?,
            None => None,
        };
        Ok(Self { phone, email })
    }

    /// 409 when a contact point belongs to another identity than `target`.
    fn check(&self, target: Uuid) -> Result<()> {
        for (owner, what) in [(&self.phone, "phone"), (&self.email, "e-mail")] {
            if let Some(owner) = owner
                && owner.id != target
            {
                return Err(ApiError::Conflict(format!(
                    "That {what} belongs to identity {}",
                    owner.id
                )));
            }
        }
        Ok(())
    }
}

#[utoipa::path(
    put,
    path = "/identity/{identity_id}",
    tag = "identities",
    params(("identity_id" = String, Path, description = "Identity: its id, or a path resolving to one (`external_id`, phone, e-mail)")),
    request_body = PutIdentityBody,
    responses(
        (status = 200, body = Envelope<IdentityRecord>, description = "Updated"),
        (status = 201, body = Envelope<IdentityRecord>, description = "Created")),
)]
#[tracing::instrument(skip_all, fields(workspace_id = caller.workspace_id))]
async fn put_identity(
    caller: Caller,
    State(state): State<AppState>,
    Path(identity_id): Path<String>,
    Json(body): Json<PutIdentityBody>,
) -> Result<Envelope<IdentityRecord>> {
    caller.require(Permission::Write)?;
    let mut update = IdentityUpdate::parse(body)?;
    let ws = caller.workspace_id;
    let now = clock::now();
    let txn = parley_persistence::begin_write(&state.db).await?;
    let owners = Owners::of(&txn, ws, &update).await?;
    let (target, created) =
        target_of_put(&txn, ws, &identity_id, &mut update, &owners, now).await?;
    owners.check(target.id)?;
    let target_id = target.id;
    let updated = if created {
        target
    } else {
        let changes = IdentityChanges {
            name: update.name,
            external_id: update.external_id,
            metadata: update.metadata,
            opted_out: update.opted_out,
        };
        identities::update(&txn, target, changes, now)
            .await
            .map_err(|e| ApiError::unique(e, "That external_id belongs to another identity"))?
    };
    if let Some(phone) = &update.phone {
        identities::attach_contact(&txn, ws, target_id, ContactKind::Phone, phone.as_str(), now)
            .await
            .map_err(|e| ApiError::unique(e, "That phone belongs to another identity"))?;
    }
    if let Some(email) = &update.email {
        identities::attach_contact(&txn, ws, target_id, ContactKind::Email, email.as_str(), now)
            .await
            .map_err(|e| ApiError::unique(e, "That e-mail belongs to another identity"))?;
    }
    let answer = record(&txn, updated).await?;
    state
        .actors
        .store()
        .commit_identities(txn, ws, &[target_id])
        .await?;
    Ok(if created {
        Envelope::created("Identity created successfully", answer)
    } else {
        Envelope::ok("Identity updated successfully", answer)
    })
}

/// The identity a PUT writes to, and whether it was created: the one the path names in the
/// caller's workspace; else the owner of the body's phone or e-mail (aggregation), which takes
/// the path as its external id (409 when it has another); else a new identity with a fresh id
/// and the path as its external id, whatever the path's shape (a UUID of another workspace is
/// just an external id here, and nothing says it exists elsewhere).
async fn target_of_put(
    txn: &impl ConnectionTrait,
    ws: i64,
    path: &str,
    update: &mut IdentityUpdate,
    owners: &Owners,
    now: chrono::DateTime<Utc>,
) -> Result<(identity::Model, bool)> {
    if let Some(found) = resolve_identity(txn, ws, path).await? {
        return Ok((found, false));
    }
    let external = update
        .external_id
        .clone()
        .unwrap_or_else(|| Some(path.to_owned()));
    match (&owners.phone, &owners.email) {
        (Some(a), Some(b)) if a.id != b.id => Err(ApiError::Conflict(format!(
            "The phone belongs to identity {} and the e-mail to identity {}",
            a.id, b.id
        ))),
        (Some(owner), _) | (None, Some(owner)) => {
            if owner.external_id.is_some() && owner.external_id != external {
                return Err(ApiError::Conflict(format!(
                    "That contact point belongs to identity {}, which has another external_id",
                    owner.id
                )));
            }
            update.external_id = Some(external);
            Ok((owner.clone(), false))
        }
        (None, None) => {
            let new = NewIdentity {
                id: Uuid::now_v7(),
                name: update.name.clone().flatten(),
                external_id: external,
                metadata: update.metadata.clone().unwrap_or_else(|| json!({})),
                opted_out: update.opted_out.unwrap_or(false),
            };
            let made = identities::create(txn, ws, new, now)
                .await
                .map_err(|e| ApiError::unique(e, "That external_id belongs to another identity"))?;
            Ok((made, true))
        }
    }
}

#[utoipa::path(
    delete,
    path = "/identity/{identity_id}",
    tag = "identities",
    params(("identity_id" = String, Path, description = "Identity: its id, or a path resolving to one (`external_id`, phone, e-mail)")),
    responses((status = 200, body = Envelope<Value>)),
)]
#[tracing::instrument(skip_all, fields(workspace_id = caller.workspace_id))]
async fn delete_identity(
    caller: Caller,
    State(state): State<AppState>,
    Path(identity_id): Path<String>,
) -> Result<Envelope<Value>> {
    caller.require(Permission::Write)?;
    let txn = parley_persistence::begin_write(&state.db).await?;
    let found = find_identity(&txn, caller.workspace_id, &identity_id).await?;
    identities::delete(&txn, caller.workspace_id, found.id).await?;
    state
        .actors
        .store()
        .commit_identities(txn, caller.workspace_id, &[found.id])
        .await?;
    Ok(Envelope::ok(
        "Identity deleted successfully",
        json!({ "id": found.id }),
    ))
}
