//! A person writing for the first time: a new identity with its first contact point, stored
//! by the database's writer with the others waiting.

use chrono::{DateTime, Utc};
use sea_orm::{DatabaseExecutor, EntityTrait};
use serde_json::Value;
use uuid::Uuid;

use super::primary_contact;
use crate::entities::{contact_point, identity};
use crate::values::ContactKind;
use crate::{Merged, Writes};

/// A new identity with its first contact point, primary (a person writing for the first
/// time), for the writer to store with the others waiting: two INSERTs for all of them, nothing
/// read back (every column is given). Alone it runs in a transaction of its own; on SQLite that
/// transaction holds the writer lock until it commits, so it is kept to the two statements.
/// Storing fails with [`crate::PersistenceError::Conflict`] when the contact point belongs to
/// another identity.
#[derive(Clone, Debug)]
pub struct NewPerson {
    /// The new identity's id (a UUID v7; the caller may choose where it belongs on a cluster).
    pub id: Uuid,
    /// The workspace.
    pub workspace_id: i64,
    /// The name the person gave, if any.
    pub name: Option<String>,
    /// How they are reached.
    pub kind: ContactKind,
    /// Their address of that kind (a phone in E.164).
    pub value: String,
    /// When they came.
    pub now: DateTime<Utc>,
}

impl Merged for NewPerson {
    type Answer = identity::Model;
    const ATOMIC: bool = true;

    fn run_all<'e>(
        db: &'e DatabaseExecutor<'e>,
        pieces: Vec<&'e Self>,
    ) -> Writes<'e, Vec<Self::Answer>> {
        Box::pin(async move {
            let created: Vec<identity::Model> = pieces
                .iter()
                .map(|person| {
                    let now = crate::clock::at_storage_precision(person.now);
                    identity::Model {
                        id: person.id,
                        workspace_id: person.workspace_id,
                        name: person.name.clone(),
                        external_id: None,
                        metadata: Value::Object(serde_json::Map::new()),
                        stage_id: None,
                        opted_out: false,
                        created_at: now,
                        updated_at: now,
                    }
                })
                .collect();
            identity::Entity::insert_many(created.iter().cloned().map(identity::ActiveModel::from))
                .exec_without_returning(db)
                .await?;
            let contacts = pieces.iter().zip(&created).map(|(person, identity)| {
                let (kind, value) = (person.kind, person.value.as_str());
                primary_contact(
                    person.workspace_id,
                    identity.id,
                    kind,
                    value,
                    identity.created_at,
                )
            });
            contact_point::Entity::insert_many(contacts)
                .exec_without_returning(db)
                .await?;
            Ok(created)
        })
    }
}
