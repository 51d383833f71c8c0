//! Whom a flow recipient reaches: gone, opted out, without a phone, or a person with what the
//! campaign's parameter expressions read of them (memory and the stage only when one reads
//! them).

use std::collections::HashMap;

use parley_persistence::entities::{contact_point, identity};
use parley_persistence::{ContactKind, DatabaseConnection, PersistenceError, identities, memory};
use serde_json::Value;
use uuid::Uuid;

use super::params::{self, Filling, Person};
use crate::domain::Phone;

/// Whom a recipient reaches.
pub(super) enum Reach {
    Gone,
    OptedOut,
    NoPhone,
    Person(Phone, Box<Person>),
}

/// The recipients' identities (`identity_ids`, a runner's claim) as the parameter expressions
/// read them, in their order: the identities and their contact points are two reads for the
/// whole claim, not two per recipient.
pub(super) async fn people_of(
    db: &DatabaseConnection,
    workspace_id: i64,
    filling: &Filling,
    identity_ids: &[Uuid],
) -> Result<Vec<Reach>, PersistenceError> {
    let mut found: HashMap<Uuid, identity::Model> =
        identities::find_many(db, workspace_id, identity_ids)
            .await?
            .into_iter()
            .map(|identity| (identity.id, identity))
            .collect();
    let live: Vec<Uuid> = found
        .values()
        .filter(|identity| !identity.opted_out)
        .map(|identity| identity.id)
        .collect();
    let mut contacts: HashMap<Uuid, Vec<contact_point::Model>> = HashMap::new();
    for contact in identities::contacts_of(db, &live).await? {
        contacts
            .entry(contact.identity_id)
            .or_default()
            .push(contact);
    }
    let mut reaches = Vec::with_capacity(identity_ids.len());
    for id in identity_ids {
        let reach = match found.remove(id) {
            None => Reach::Gone,
            Some(identity) if identity.opted_out => Reach::OptedOut,
            Some(identity) => {
                let contacts = contacts.remove(id).unwrap_or_default();
                person(db, filling, identity, &contacts).await?
            }
        };
        reaches.push(reach);
    }
    Ok(reaches)
}

/// Whom `identity`, with its `contacts`, is to the parameter expressions.
async fn person(
    db: &DatabaseConnection,
    filling: &Filling,
    identity: identity::Model,
    contacts: &[contact_point::Model],
) -> Result<Reach, PersistenceError> {
    let primary = |kind: ContactKind| {
        contacts
            .iter()
            .filter(|c| c.kind == kind)
            .max_by_key(|c| c.is_primary)
            .map(|c| c.value.clone())
    };
    let Some(phone) = primary(ContactKind::Phone).and_then(|p| Phone::try_from(p.as_str()).ok())
    else {
        return Ok(Reach::NoPhone);
    };
    // Memory and the stage are read only when an expression reads them.
    let memory: HashMap<String, Value> =
        if filling.reads(|s| matches!(s, params::Source::Memory(_))) {
            memory::list(db, identity.id)
                .await?
                .into_iter()
                .map(|entry| (entry.key, entry.value))
                .collect()
        } else {
            HashMap::new()
        };
    let wants_stage = filling.reads(|s| matches!(s, params::Source::Stage));
    let stage = match identity.stage_id.filter(|_| wants_stage) {
        Some(stage_id) => identities::stages_by_id(db, &[stage_id])
            .await?
            .into_iter()
            .next()
            .map(|s| s.name),
        None => None,
    };
    let person = Person {
        name: identity.name,
        phone: Some(phone.as_str().to_owned()),
        email: primary(ContactKind::Email),
        external_id: identity.external_id,
        metadata: identity.metadata,
        memory,
        stage,
    };
    Ok(Reach::Person(phone, Box::new(person)))
}
