use parley_persistence::conversations::{self, NewMessage};
use parley_persistence::{channels, clock, identities};
use serde_json::json;
use uuid::Uuid;

use crate::helpers::{TestApp, expect_error, expect_status, spawn_app};

/// Stores a conversation of `identity_id` on `channel_id` with user messages `texts`, as the
/// conversation engine will; answers its id.
pub async fn seed_conversation(
    app: &TestApp,
    identity_id: &str,
    channel_id: &str,
    texts: &[&str],
) -> String {
    let db = app.db().await;
    let ws = app.owner.workspace_id;
    let identity = identities::find(&db, ws, Uuid::parse_str(identity_id).expect("uuid"))
        .await
        .expect("query")
        .expect("identity");
    let channel = channels::find(&db, ws, Uuid::parse_str(channel_id).expect("uuid"))
        .await
        .expect("query")
        .expect("channel");
    let conversation = conversations::start(&db, ws, identity.id, channel.id, None, clock::now())
        .await
        .expect("start")
        .conversation();
    for text in texts {
        conversations::append_message(
            &db,
            &conversation,
            NewMessage::from_person((*text).to_owned()),
            clock::now(),
        )
        .await
        .expect("message");
    }
    conversation.id.to_string()
}

/// The id of the identity `crm` (named `name`), put now.
async fn identity_id(app: &TestApp, crm: &str, name: &str) -> String {
    let put = app.put_identity(crm, json!({"name": name})).await;
    put["id"].as_str().expect("id").to_owned()
}

/// Ana (`crm-1`) and a sandbox channel: their ids.
async fn ana_on_a_channel(app: &TestApp) -> (String, String) {
    let channel = app.sandbox_channel("Main line").await;
    (identity_id(app, "crm-1", "Ana").await, channel)
}

#[tokio::test]
async fn conversations_are_listed_and_filtered_by_identity_and_channel() {
    let app = spawn_app().await;
    let main = app.sandbox_channel("Main line").await;
    let other = app.sandbox_channel("Other line").await;
    let ana = identity_id(&app, "crm-1", "Ana").await;
    let bo = identity_id(&app, "crm-2", "Bo").await;
    let first = seed_conversation(&app, &ana, &main, &["hi"]).await;
    seed_conversation(&app, &ana, &other, &["hello"]).await;
    seed_conversation(&app, &bo, &main, &["hey"]).await;

    let all = expect_status(app.get("/conversations").await, 200).await;
    assert_eq!(all["pagination"]["total"], 3);
    let anas = expect_status(app.get("/conversations?identity_id=crm-1").await, 200).await;
    assert_eq!(anas["pagination"]["total"], 2);
    let on_main = expect_status(
        app.get(&format!(
            "/conversations?identity_id={ana}&channel_id={main}"
        ))
        .await,
        200,
    )
    .await;
    assert_eq!(on_main["pagination"]["total"], 1);
    let record = &on_main["data"][0];
    assert_eq!(record["id"], first.as_str());
    assert_eq!(record["identity_id"], ana.as_str());
    assert_eq!(record["channel_id"], main.as_str());
    assert_eq!(record["status"], "open");
    for field in ["assistant_id", "started_at", "last_message_at"] {
        assert!(record.get(field).is_some(), "{field}");
    }

    expect_error(
        app.get("/conversations?identity_id=ghost").await,
        404,
        "not_found",
    )
    .await;
    expect_error(
        app.get("/conversations?channel_id=nope").await,
        400,
        "validation_failed",
    )
    .await;
}

#[tokio::test]
async fn a_conversation_and_its_messages_are_read_oldest_message_first() {
    let app = spawn_app().await;
    let (ana, channel) = ana_on_a_channel(&app).await;
    let conversation = seed_conversation(&app, &ana, &channel, &["one", "two", "three"]).await;

    let fetched = expect_status(
        app.get(&format!("/conversations/{conversation}")).await,
        200,
    )
    .await;
    assert_eq!(fetched["data"]["id"], conversation.as_str());

    let messages = expect_status(
        app.get(&format!("/conversations/{conversation}/messages?limit=2"))
            .await,
        200,
    )
    .await;
    let texts: Vec<_> = messages["data"]
        .as_array()
        .expect("array")
        .iter()
        .map(|m| m["content"].clone())
        .collect();
    assert_eq!(texts, [json!("one"), json!("two")]);
    assert_eq!(
        messages["pagination"],
        json!({"page": 1, "limit": 2, "total": 3, "total_pages": 2})
    );
    let message = &messages["data"][0];
    assert_eq!(message["direction"], "inbound");
    assert_eq!(message["role"], "user");
    assert_eq!(message["status"], "received");
    assert_eq!(message["conversation_id"], conversation.as_str());
}

#[tokio::test]
async fn an_unknown_conversation_is_a_404() {
    let app = spawn_app().await;

    expect_error(
        app.get("/conversations/01a200f8-0000-7000-8000-000000000000")
            .await,
        404,
        "not_found",
    )
    .await;
    expect_error(
        app.get("/conversations/01a200f8-0000-7000-8000-000000000000/messages")
            .await,
        404,
        "not_found",
    )
    .await;
}

#[tokio::test]
async fn an_idle_conversation_reads_closed_and_a_send_starts_a_new_one() {
    let app = crate::helpers::spawn_app_with(|s| s.actors.conversation_idle_hours = 0).await;
    let channel = app.live_channel("106540352242922").await;
    app.graph
        .add_template("waba-1", crate::helpers::order_update());
    let body = crate::helpers::order_update_send("5511987654321");
    let first = expect_status(app.send_template(&channel, &body).await, 200).await;

    let read = expect_status(
        app.get(&format!(
            "/conversations/{}",
            first["data"]["conversationId"].as_str().expect("id")
        ))
        .await,
        200,
    )
    .await;
    assert_eq!(read["data"]["status"], "closed", "idle past the limit");

    let second = expect_status(app.send_template(&channel, &body).await, 200).await;
    assert_ne!(
        second["data"]["conversationId"], first["data"]["conversationId"],
        "a new conversation, not the idle one"
    );
}

#[tokio::test]
async fn the_migration_to_one_open_conversation_closes_all_but_the_latest_of_a_thread() {
    use parley_migrations::MigratorTrait;
    use parley_persistence::ConversationStatus;
    use parley_persistence::entities::conversation;
    use sea_orm::{EntityTrait, Set};

    let app = spawn_app().await;
    let (ana, channel) = ana_on_a_channel(&app).await;
    let db = app.db().await;
    // Back to the schema before the index, where a thread could hold several open ones: the
    // index's migration and every one after it are undone.
    let undone = parley_migrations::Migrator::migrations()
        .iter()
        .rev()
        .position(|m| m.name() == "m20261125_000011_one_open_conversation")
        .expect("the index's migration")
        + 1;
    parley_migrations::Migrator::down(&db, Some(undone as u32))
        .await
        .expect("down");
    let mut seeded = Vec::new();
    for hours_ago in [3, 1, 2] {
        let at = clock::now() - chrono::Duration::hours(hours_ago);
        // The columns of that schema only: later ones (the handoff's) are not there yet.
        let id = Uuid::now_v7();
        let open = conversation::ActiveModel {
            id: Set(id),
            workspace_id: Set(app.owner.workspace_id),
            identity_id: Set(Uuid::parse_str(&ana).expect("uuid")),
            channel_id: Set(Uuid::parse_str(&channel).expect("uuid")),
            assistant_id: Set(None),
            status: Set(ConversationStatus::Open),
            started_at: Set(at),
            last_message_at: Set(at),
            ..Default::default()
        };
        conversation::Entity::insert(open)
            .exec_without_returning(&db)
            .await
            .expect("an open conversation");
        seeded.push(id.to_string());
    }

    parley_migrations::Migrator::up(&db, None)
        .await
        .expect("up");

    let listed = expect_status(
        app.get(&format!(
            "/conversations?identity_id={ana}&channel_id={channel}"
        ))
        .await,
        200,
    )
    .await;
    let statuses: Vec<(&str, &str)> = listed["data"]
        .as_array()
        .expect("conversations")
        .iter()
        .map(|c| {
            let id = c["id"].as_str().expect("id");
            (id, c["status"].as_str().expect("status"))
        })
        .collect();
    // Most recently active first: the one of an hour ago stays open.
    assert_eq!(
        statuses,
        [
            (seeded[1].as_str(), "open"),
            (seeded[2].as_str(), "closed"),
            (seeded[0].as_str(), "closed"),
        ]
    );
}
