//! The lookups every resource shares: a workspace the caller may use, the caller's worker,
//! channel or campaign named by a path parameter (400 when malformed, 404 when unknown or in
//! another workspace), and identity paths. An identity path is an identity's id, external id,
//! phone or e-mail, tried in that order ([`IdentityPath`]); one path ([`resolve_identity`]) and
//! many ([`resolve_contacts`]) follow the same rules.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use parley_actors::changes::{Change, Listener};
use parley_actors::remembered::Remembered;
use parley_persistence::entities::{campaign, channel, identity, worker, workspace};
use parley_persistence::flows::NewRecipient;
use parley_persistence::{
    ConnectionTrait, ContactKind, campaigns, channels, identities, workers, workspaces,
};
use uuid::Uuid;

use crate::domain::{Email, Phone};
use crate::http::AppState;
use crate::http::auth::Caller;
use crate::http::error::{ApiError, FieldError, PathSegment, Result};
use crate::http::validation::parse_uuid;

/// Unknown contacts named in a refusal's details.
const SHOWN_UNKNOWN: usize = 100;

/// What an identity path may name, each read once: an id when it is a UUID, a phone when it is
/// a phone number, an e-mail when it is an address (normalised as stored); always an external
/// id, as written.
struct IdentityPath {
    id: Option<Uuid>,
    phone: Option<String>,
    email: Option<String>,
}

impl IdentityPath {
    fn read(raw: &str) -> Self {
        Self {
            id: Uuid::parse_str(raw).ok(),
            phone: Phone::try_from(raw).ok().map(|p| p.as_str().to_owned()),
            email: Email::try_from(raw).ok().map(|e| e.as_str().to_owned()),
        }
    }

    /// The contact point of `kind` the path is, normalised.
    fn contact(&self, kind: ContactKind) -> Option<String> {
        match kind {
            ContactKind::Phone => self.phone.clone(),
            ContactKind::Email => self.email.clone(),
        }
    }
}

/// Parses a workspace id given in a path or body.
pub(crate) fn parse_workspace_id(raw: &str) -> Result<i64> {
    raw.trim()
        .parse::<i64>()
        .ok()
        .filter(|id| *id > 0)
        .ok_or_else(|| ApiError::invalid_field(["workspace_id"], "must be a positive integer"))
}

/// The workspace `raw` names when the caller may use it: 404 when it is not in the caller's
/// business or does not exist, 403 when it is but the caller's user is not a member.
pub(crate) async fn accessible_workspace(
    state: &AppState,
    caller: &Caller,
    raw: &str,
) -> Result<workspace::Model> {
    let id = parse_workspace_id(raw)?;
    if let Some(found) =
        workspaces::find_for_member(&state.db, caller.business_id, caller.user_id, id).await?
    {
        return Ok(found);
    }
    match workspaces::find_by_id(&state.db, id).await? {
        Some(other) if other.business_id == caller.business_id => Err(ApiError::Forbidden(
            "This API key's user is not a member of that workspace".to_owned(),
        )),
        _ => Err(ApiError::NotFound("Workspace")),
    }
}

/// The caller's worker named by a path parameter (400 malformed, 404 unknown).
pub(crate) async fn find_worker(
    state: &AppState,
    caller: &Caller,
    raw: &str,
) -> Result<worker::Model> {
    let id = parse_uuid(raw, "worker_id")?;
    workers::find(&state.db, caller.workspace_id, id)
        .await?
        .ok_or(ApiError::NotFound("Worker"))
}

/// The caller's channel named by a path parameter (400 malformed, 404 unknown).
pub(crate) async fn find_channel(
    state: &AppState,
    caller: &Caller,
    raw: &str,
) -> Result<channel::Model> {
    channel_of(state, caller, parse_uuid(raw, "channel_id")?).await
}

/// The caller's channel `id` (404 unknown or another workspace's).
pub(crate) async fn channel_of(
    state: &AppState,
    caller: &Caller,
    id: Uuid,
) -> Result<channel::Model> {
    channels::find(&state.db, caller.workspace_id, id)
        .await?
        .ok_or(ApiError::NotFound("Channel"))
}

/// The caller's campaign named by a path parameter (400 malformed, 404 unknown).
pub(crate) async fn find_campaign(
    state: &AppState,
    caller: &Caller,
    raw: &str,
) -> Result<campaign::Model> {
    campaign_of(state, caller, parse_uuid(raw, "uid")?).await
}

/// The caller's campaign `id` (404 unknown or another workspace's).
pub(crate) async fn campaign_of(
    state: &AppState,
    caller: &Caller,
    id: Uuid,
) -> Result<campaign::Model> {
    campaigns::find(&state.db, caller.workspace_id, id)
        .await?
        .ok_or(ApiError::NotFound("Campaign"))
}

/// The identity an identity path names in the workspace, if any: tried as id, external id,
/// phone, then e-mail, one query each until one names an identity.
pub(crate) async fn resolve_identity(
    db: &impl ConnectionTrait,
    workspace_id: i64,
    raw: &str,
) -> Result<Option<identity::Model>> {
    let path = IdentityPath::read(raw);
    if let Some(id) = path.id
        && let Some(found) = identities::find(db, workspace_id, id).await?
    {
        return Ok(Some(found));
    }
    if let Some(found) = identities::find_by_external_id(db, workspace_id, raw).await? {
        return Ok(Some(found));
    }
    for kind in ContactKind::ALL {
        if let Some(value) = path.contact(kind)
            && let Some(found) = identities::find_by_contact(db, workspace_id, kind, &value).await?
        {
            return Ok(Some(found));
        }
    }
    Ok(None)
}

/// The identity a path id names, or 404.
pub(crate) async fn find_identity(
    db: &impl ConnectionTrait,
    workspace_id: i64,
    raw: &str,
) -> Result<identity::Model> {
    resolve_identity(db, workspace_id, raw)
        .await?
        .ok_or(ApiError::NotFound("Identity"))
}

/// Resolves many identity paths (a flow's `contactUids`, a task's contacts) by the same rules
/// as one, in a few queries for any number; duplicates collapse. Unknown ones are a 400
/// listing them.
pub(crate) async fn resolve_contacts(
    db: &impl ConnectionTrait,
    workspace_id: i64,
    contacts: Vec<String>,
) -> Result<Vec<NewRecipient>> {
    let mut found: HashMap<String, Uuid> = HashMap::new();
    let unresolved = |found: &HashMap<String, Uuid>| -> Vec<String> {
        let mut seen = HashSet::new();
        contacts
            .iter()
            .filter(|c| !found.contains_key(*c) && seen.insert(c.as_str()))
            .cloned()
            .collect()
    };
    let as_ids: Vec<(String, Uuid)> = unresolved(&found)
        .into_iter()
        .filter_map(|c| IdentityPath::read(&c).id.map(|id| (c, id)))
        .collect();
    let ids: Vec<Uuid> = as_ids.iter().map(|(_, id)| *id).collect();
    let existing: HashSet<Uuid> = identities::existing_ids(db, workspace_id, &ids)
        .await?
        .into_iter()
        .collect();
    for (raw, id) in as_ids {
        if existing.contains(&id) {
            found.insert(raw, id);
        }
    }
    for (external, id) in identities::by_external_ids(db, workspace_id, &unresolved(&found)).await?
    {
        found.insert(external, id);
    }
    for kind in ContactKind::ALL {
        let mut by_value: HashMap<String, Vec<String>> = HashMap::new();
        for raw in unresolved(&found) {
            if let Some(value) = IdentityPath::read(&raw).contact(kind) {
                by_value.entry(value).or_default().push(raw);
            }
        }
        let values: Vec<String> = by_value.keys().cloned().collect();
        for (value, id) in identities::by_contacts(db, workspace_id, kind, &values).await? {
            for raw in by_value.remove(&value).unwrap_or_default() {
                found.insert(raw, id);
            }
        }
    }
    let unknown = unresolved(&found);
    if !unknown.is_empty() {
        return Err(unknown_contacts(&contacts, &unknown));
    }
    let mut seen = HashSet::new();
    Ok(contacts
        .into_iter()
        .filter_map(|raw| {
            let identity_id = *found.get(&raw)?;
            seen.insert(identity_id).then_some(NewRecipient {
                identity_id,
                contact: raw,
            })
        })
        .collect())
}

/// The 400 for contacts that name no identity: the first of them in the details, with their
/// place in `contactUids`.
fn unknown_contacts(contacts: &[String], unknown: &[String]) -> ApiError {
    let details = unknown
        .iter()
        .take(SHOWN_UNKNOWN)
        .map(|raw| {
            let index = contacts.iter().position(|c| c == raw).unwrap_or_default();
            FieldError::new(
                [PathSegment::from("contactUids"), PathSegment::from(index)],
                format!("names no identity: {raw}"),
            )
        })
        .collect();
    ApiError::BadRequest {
        code: "unknown_contacts",
        message: format!(
            "{} contact(s) name no identity of this workspace: {}",
            unknown.len(),
            unknown
                .iter()
                .take(10)
                .cloned()
                .collect::<Vec<_>>()
                .join(", ")
        ),
        details,
    }
}

/// The id of the identity a conversation call's path names, from memory when the path
/// named it recently ([`IdentityPaths`]); 404 when it names none.
#[tracing::instrument(name = "resolve_identity", level = "debug", skip_all)]
pub(crate) async fn identity_id_of(
    state: &AppState,
    caller: &Caller,
    identity_path: &str,
) -> Result<Uuid> {
    let path = format!("{}/{identity_path}", caller.workspace_id);
    let workspace_id = caller.workspace_id;
    // What the read needs is copied only when it is made (a miss, or a refresh).
    let read = || {
        let (db, raw) = (state.db.clone(), identity_path.to_owned());
        async move {
            let found = resolve_identity(&db, workspace_id, &raw).await?;
            Ok::<_, ApiError>(found.map(|identity| identity.id))
        }
    };
    state
        .identity_paths
        .0
        .recall(&path, read)
        .await?
        .ok_or(ApiError::NotFound("Identity"))
}

/// How long a resolved identity path is answered from memory.
const IDENTITY_PATH_TTL: Duration = Duration::from_secs(10);

/// The identity each path (id, external id, phone, e-mail) of a workspace named when the
/// conversation endpoints last resolved it, so that a chat does not look its identity up on
/// every message. Only paths that named an identity are remembered; any identity write through
/// this server forgets them all (it listens to the actors' announcer), so a path that comes to name another
/// identity is read again at once; one changed through another server sharing the database is
/// read again within [`IDENTITY_PATH_TTL`]. A remembered identity deleted since is refused by
/// its conversation actor (404).
#[derive(Clone, Debug)]
pub(crate) struct IdentityPaths(Remembered<String, Uuid>);

impl Default for IdentityPaths {
    fn default() -> Self {
        Self(Remembered::new(IDENTITY_PATH_TTL))
    }
}

impl Listener for IdentityPaths {
    /// Any identity write may make a path name another identity (or none): every path is
    /// forgotten.
    fn changed(&self, change: &Change) {
        if matches!(change, Change::Identity { .. }) {
            self.0.clear();
        }
    }
}
