//! Finding the person behind a phone number: the one place where an identity is found or
//! created by phone, used by the inbound pipeline (the sender of a WhatsApp message), the
//! template send endpoint, flows and scheduled tasks.

use parley_persistence::ContactKind;
use parley_persistence::entities::identity;
use parley_persistence::identities::{self, ByContact, IdentityChanges};
use parley_persistence::{
    ConnectionTrait, DatabaseConnection, EventType, GroupCommit, PersistenceError, clock,
};
use serde_json::json;
use uuid::Uuid;

use crate::domain::Phone;
use crate::events::Events;

/// The identity owning `phone` in the workspace, created when there is none. `name` (a
/// WhatsApp profile name, or the name an integrator gave) becomes the name of a new identity
/// and fills in the name of an existing one that has none. Two first messages of one new
/// number at once end with one identity: the contact point is unique in the database. A new
/// identity gets `new_id`.
///
/// # Errors
/// Fails on a database error.
pub async fn find_or_create_by_phone(
    db: &DatabaseConnection,
    writer: &GroupCommit,
    workspace_id: i64,
    phone: &Phone,
    name: Option<&str>,
    new_id: Uuid,
) -> Result<identity::Model, PersistenceError> {
    Ok(
        find_or_create(db, db, writer, workspace_id, phone, name, new_id)
            .await?
            .0,
    )
}

/// As [`find_or_create_by_phone`], also answering whether this call created the identity; the
/// phone is looked up through `lookups` (the database itself, or the inbound pipeline's
/// [`parley_persistence::identities::ContactLookups`], which asks for many senders at once).
/// A new identity gets `new_id`.
///
/// # Errors
/// Fails on a database error.
#[tracing::instrument(name = "find_or_create_person", level = "debug", skip_all)]
pub async fn find_or_create(
    db: &DatabaseConnection,
    lookups: &impl ByContact,
    writer: &GroupCommit,
    workspace_id: i64,
    phone: &Phone,
    name: Option<&str>,
    new_id: Uuid,
) -> Result<(identity::Model, bool), PersistenceError> {
    let name = name.map(str::trim).filter(|n| !n.is_empty());
    for _ in 0..3 {
        if let Some(found) = lookups
            .by_contact(workspace_id, ContactKind::Phone, phone.as_str())
            .await?
        {
            let found = match (&found.name, name) {
                (None, Some(name)) => {
                    let changes = IdentityChanges {
                        name: Some(Some(name.to_owned())),
                        ..IdentityChanges::default()
                    };
                    identities::update(db, found, changes, clock::now()).await?
                }
                _ => found,
            };
            return Ok((found, false));
        }
        let person = identities::NewPerson {
            id: new_id,
            workspace_id,
            name: name.map(str::to_owned),
            kind: ContactKind::Phone,
            value: phone.as_str().to_owned(),
            now: clock::now(),
        };
        let created = writer.write_merged(person).await;
        match created {
            Ok(created) => return Ok((created, true)),
            // Someone created them meanwhile: theirs wins, found on the next round.
            Err(PersistenceError::Conflict(_)) => {}
            Err(other) => return Err(other),
        }
    }
    Err(PersistenceError::Conflict(format!(
        "could not settle the identity of {phone}"
    )))
}

/// The phone to reach an identity on: its primary phone contact point, else any.
///
/// # Errors
/// Fails on a database error.
pub async fn phone_of(
    db: &impl ConnectionTrait,
    identity_id: Uuid,
) -> Result<Option<Phone>, PersistenceError> {
    let contacts = identities::contacts_of(db, &[identity_id]).await?;
    Ok(contacts
        .iter()
        .filter(|c| c.kind == ContactKind::Phone)
        .max_by_key(|c| c.is_primary)
        .and_then(|c| Phone::try_from(c.value.as_str()).ok()))
}

/// Opts the identity out of campaign templates (`why`: a stop word, Meta's 131050), with its
/// `identity.opted_out` event in the same transaction when it was not out already.
///
/// # Errors
/// The database's.
pub(crate) async fn opt_out(
    db: &DatabaseConnection,
    events: &Events,
    workspace_id: i64,
    identity_id: Uuid,
    why: &'static str,
) -> Result<(), PersistenceError> {
    let event = events.event(
        workspace_id,
        EventType::IdentityOptedOut,
        || json!({"identity_id": identity_id, "reason": why}),
    );
    let now = clock::now();
    let txn = parley_persistence::begin_write(db).await?;
    let changed = identities::opt_out(&txn, identity_id, now).await?;
    if changed && let Some(event) = &event {
        event.write(&txn, now).await?;
    }
    txn.commit().await?;
    if changed && event.is_some() {
        events.wake();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use parley_persistence::identities::NewPerson;
    use parley_persistence::{DatabaseExecutor, Merged};

    use super::*;
    use crate::test_support::{deps, world};

    #[tokio::test]
    async fn new_people_stored_together_each_get_their_phone_and_a_taken_phone_stores_nothing() {
        let (deps, _dir, _model) = deps().await;
        let (db, writer) = (&deps.db, &deps.writer);
        let (ws, _, _, _) = world(db).await;
        let person = |phone: &str| NewPerson {
            id: Uuid::now_v7(),
            workspace_id: ws,
            name: Some(format!("P{phone}")),
            kind: ContactKind::Phone,
            value: phone.to_owned(),
            now: clock::now(),
        };
        let (one, two) = (person("+351910000001"), person("+351910000002"));
        let executor = DatabaseExecutor::Connection(db);
        let created = NewPerson::run_all(&executor, vec![&one, &two])
            .await
            .expect("created");
        for (made, phone) in created.iter().zip(["+351910000001", "+351910000002"]) {
            let found = identities::find_by_contact(db, ws, ContactKind::Phone, phone)
                .await
                .expect("read")
                .expect("found by phone");
            assert_eq!(
                (found.id, found.name.as_deref()),
                (made.id, Some(&*format!("P{phone}")))
            );
        }

        // Alone, a piece commits both rows or neither: the taken phone leaves no identity.
        let page = parley_persistence::Page {
            page: 1,
            limit: 100,
        };
        let count = || async move { identities::list(db, ws, page).await.expect("list").total };
        let before = count().await;
        let taken = writer.write_merged(person("+351910000002")).await;
        assert!(
            matches!(taken, Err(PersistenceError::Conflict(_))),
            "{taken:?}"
        );
        let after = count().await;
        assert_eq!(after, before);
    }

    #[tokio::test]
    async fn lookups_waiting_together_each_find_their_own_owner() {
        use parley_persistence::identities::ContactLookups;

        let (deps, _dir, _model) = deps().await;
        let db = &deps.db;
        let (ws, _, _, _) = world(db).await;
        let phones = ["+351910000011", "+351910000012", "+351910000013"];
        let people: Vec<NewPerson> = phones
            .iter()
            .map(|phone| NewPerson {
                id: Uuid::now_v7(),
                workspace_id: ws,
                name: None,
                kind: ContactKind::Phone,
                value: (*phone).to_owned(),
                now: clock::now(),
            })
            .collect();
        let executor = DatabaseExecutor::Connection(db);
        let created = NewPerson::run_all(&executor, people.iter().collect())
            .await
            .expect("people");
        // Asked at once (the test's runtime runs them all up to their wait before the lookups'
        // task takes them): known phones, unknown ones, a known one in another workspace and
        // one asked twice, in one query per workspace.
        let lookups = ContactLookups::start(db.clone());
        let asks = [
            (ws, phones[2]),
            (ws, "+351910000099"),
            (ws, phones[0]),
            (ws + 1000, phones[1]),
            (ws, phones[1]),
            (ws, phones[0]),
        ];
        let found = futures_util::future::join_all(
            asks.iter()
                .map(|&(ws, phone)| lookups.by_contact(ws, ContactKind::Phone, phone)),
        )
        .await;
        let ids: Vec<Option<Uuid>> = found
            .into_iter()
            .map(|found| found.expect("looked up").map(|identity| identity.id))
            .collect();
        let id = |i: usize| Some(created[i].id);
        assert_eq!(ids, vec![id(2), None, id(0), None, id(1), id(0)]);
        // The same answers as the database alone gives.
        for (ws, phone) in asks {
            let direct = db.by_contact(ws, ContactKind::Phone, phone).await;
            let batched = lookups.by_contact(ws, ContactKind::Phone, phone).await;
            assert_eq!(
                direct.expect("direct").map(|i| i.id),
                batched.expect("batched").map(|i| i.id)
            );
        }
    }
}
