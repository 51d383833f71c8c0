//! What a batch keeps back to its end: event deliveries written with their facts, in one
//! statement for the batch, and nothing of a fact whose deliveries fail.

use super::*;
use crate::event_deliveries::{Addressed, NewEvent, insert_all};
use crate::values::EventType;
use uuid::Uuid;

/// A key to insert (merged with the others of its batch) and the events it makes.
struct Told(i64, Vec<Addressed>);

impl Merged for Told {
    type Answer = ();

    fn atomic(&self) -> bool {
        !self.1.is_empty()
    }

    fn one_statement(_pieces: &[&Self]) -> bool {
        true
    }

    fn run_all<'e>(db: &'e DatabaseExecutor<'e>, pieces: Vec<&'e Self>) -> Writes<'e, Vec<()>> {
        Box::pin(async move {
            let keys: Vec<i64> = pieces.iter().map(|told| told.0).collect();
            insert_keys(db, &keys).await?;
            for told in &pieces {
                insert_all(db, &told.1, chrono::Utc::now()).await?;
            }
            Ok(vec![(); pieces.len()])
        })
    }
}

/// A writer on a migrated database with the test table, and an endpoint of a workspace.
async fn with_endpoint() -> (
    tempfile::TempDir,
    DatabaseConnection,
    GroupCommit,
    i64,
    Uuid,
) {
    let (dir, db, writer) = fresh().await;
    crate::migrate(&db).await.expect("migrate");
    let now = chrono::Utc::now();
    let workspace_id = crate::test_support::workspace(&db, "acme", now).await;
    let endpoint = crate::event_webhooks::NewEndpoint {
        url: "https://hooks.example.com/parley".to_owned(),
        events: serde_json::json!(["*"]),
        description: None,
        sealed_secret: "sealed".to_owned(),
    };
    let endpoint = crate::event_webhooks::create(&db, workspace_id, endpoint, now)
        .await
        .expect("endpoint");
    (dir, db, writer, workspace_id, endpoint.id)
}

fn event(workspace_id: i64, k: i64, endpoint_id: Uuid) -> Addressed {
    let event = NewEvent {
        id: Uuid::now_v7(),
        event_type: EventType::MessageReceived,
        workspace_id,
        body: format!(r#"{{"k":{k}}}"#),
    };
    Addressed::new(event, [endpoint_id])
}

/// The bodies of the stored deliveries, in order.
async fn delivered(db: &DatabaseConnection) -> Vec<String> {
    column(db, "SELECT body FROM event_deliveries ORDER BY body").await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_writes_its_facts_event_deliveries_with_them() {
    let (_dir, db, writer, workspace_id, endpoint_id) = with_endpoint().await;
    // Keys 1..=9 make an event each; 10..=12 none.
    let results = one_batch_of(&writer, 1..=12, move |writer, k| async move {
        let told = if k < 10 {
            vec![event(workspace_id, k, endpoint_id)]
        } else {
            Vec::new()
        };
        writer.write_merged(Told(k, told)).await
    })
    .await;
    for (k, result) in results {
        result.unwrap_or_else(|error| panic!("key {k}: {error}"));
    }
    assert_eq!(keys(&db).await, (1..=12).collect::<Vec<_>>());
    let expected: Vec<String> = (1..=9).map(|k| format!(r#"{{"k":{k}}}"#)).collect();
    assert_eq!(delivered(&db).await, expected);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fact_whose_event_deliveries_fail_leaves_nothing_and_the_rest_of_its_batch_commits() {
    let (_dir, db, writer, workspace_id, endpoint_id) = with_endpoint().await;
    // Key 4's event goes to an endpoint that does not exist: its delivery row is refused
    // when the batch writes what it kept back, and again when key 4 runs alone.
    let results = one_batch_of(&writer, 1..=6, move |writer, k| async move {
        let to = if k == 4 { Uuid::now_v7() } else { endpoint_id };
        writer
            .write_merged(Told(k, vec![event(workspace_id, k, to)]))
            .await
    })
    .await;
    for (k, result) in results {
        assert_eq!(result.is_ok(), k != 4, "key {k}: {result:?}");
    }
    assert_eq!(keys(&db).await, vec![1, 2, 3, 5, 6]);
    let expected: Vec<String> = [1, 2, 3, 5, 6]
        .iter()
        .map(|k| format!(r#"{{"k":{k}}}"#))
        .collect();
    assert_eq!(delivered(&db).await, expected);
}
