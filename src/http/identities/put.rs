//! `PUT /identity/{id}`: creates or updates an identity, aggregating a new phone or e-mail
//! into the identity that already owns it; either way the path becomes the identity's
//! external id, so it addresses it next.

use axum::extract::State;
use chrono::Utc;
use parley_persistence::ContactKind;
use parley_persistence::entities::identity;
use parley_persistence::identities::{self, IdentityChanges, NewIdentity};
use parley_persistence::{ConnectionTrait, clock};
use serde::Deserialize;
use serde_json::{Value, json};
use uuid::Uuid;

use super::{IdentityRecord, MAX_TEXT, record};
use crate::domain::{Email, Permission, Phone};
use crate::http::AppState;
use crate::http::auth::Caller;
use crate::http::envelope::Envelope;
use crate::http::error::{ApiError, Result};
use crate::http::extract::{Json, Path};
use crate::http::lookup::resolve_identity;
use crate::http::validation::{Problems, object_or_empty, optional_text, present};

#[derive(Debug, Deserialize, utoipa::ToSchema)]
pub(super) struct PutIdentityBody {
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<String>, max_length = 200)]
    name: Option<Option<String>>,
    /// With its country code; E.164 recommended.
    #[schema(value_type = Option<String>, example = "+351912345678")]
    phone: Option<String>,
    #[schema(value_type = Option<String>, format = Email, max_length = 254)]
    email: Option<String>,
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<String>, max_length = 200)]
    external_id: Option<Option<String>>,
    #[schema(value_type = Option<Object>)]
    metadata: Option<Value>,
    #[schema(value_type = Option<bool>)]
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

/// Create or update an identity.
///
/// Keyed by the path given (id, `external_id`, phone or e-mail): the identity it resolves to is
/// updated, or a new one is made.
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
pub(super) async fn put_identity(
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
