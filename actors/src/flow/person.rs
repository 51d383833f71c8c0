//! Whom a flow recipient reaches: gone, opted out, without a phone, or a person with what the
//! campaign's parameter expressions read of them (memory and the stage only when one reads
//! them).

use std::collections::HashMap;

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

/// The recipient's identity as the parameter expressions read it.
pub(super) async fn person_of(
    db: &DatabaseConnection,
    workspace_id: i64,
    filling: &Filling,
    identity_id: Uuid,
) -> Result<Reach, PersistenceError> {
    let Some(identity) = identities::find(db, workspace_id, identity_id).await? else {
        return Ok(Reach::Gone);
    };
    if identity.opted_out {
        return Ok(Reach::OptedOut);
    }
    let contacts = identities::contacts_of(db, &[identity.id]).await?;
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
