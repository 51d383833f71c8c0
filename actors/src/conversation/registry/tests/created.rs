//! A created identity handed to its first actor: taken as given unless a change came in
//! between.

use super::*;

#[tokio::test]
async fn a_created_identity_is_taken_as_given_unless_a_change_came_in_between() {
    let t = started(|_| {}).await;
    let (conversations, ws, channel, a, b) = (&t.conversations, t.ws, t.channel, t.a, t.b);
    t.db.execute_unprepared("UPDATE assistants SET instructions = 'You help {{identity.name}}.'")
        .await
        .expect("instructions");
    let given = async |id| {
        let mut found = parley_persistence::identities::find(&t.db, ws, id)
            .await
            .expect("read")
            .expect("identity");
        found.name = Some("Given".to_owned());
        found
    };

    // Taken as given: the table still says "A".
    let before = conversations.announced();
    conversations
        .turn_of_created(ws, given(a).await, before, says(channel, "hi"))
        .await
        .expect("answered");
    assert_eq!(last_request_texts(&t.model)[0], "You help Given.");

    // An identity change applied in between (of any identity): the identity is read.
    let before = conversations.announced();
    conversations.changed(&Change::Identity {
        workspace_id: ws,
        identity_id: a,
    });
    wait_until("the change was not applied", async || {
        conversations.announced() != before
    })
    .await;
    conversations
        .turn_of_created(ws, given(b).await, before, says(channel, "hi"))
        .await
        .expect("answered");
    assert_eq!(last_request_texts(&t.model)[0], "You help B.");
    t.runtime.shutdown(Duration::from_secs(5)).await;
}

#[tokio::test]
async fn a_created_identitys_first_turn_joins_a_conversation_started_meanwhile() {
    let t = started(|_| {}).await;
    let (conversations, ws, channel, a, b) = (&t.conversations, t.ws, t.channel, t.a, t.b);
    // Unannounced: only a turn that looks in the table finds these conversations.
    let (open_a, open_b) = (
        open_conversation(&t.db, ws, a, channel).await,
        open_conversation(&t.db, ws, b, channel).await,
    );
    let identity = async |id| {
        parley_persistence::identities::find(&t.db, ws, id)
            .await
            .expect("read")
            .expect("identity")
    };

    let before = conversations.announced();
    let first = conversations
        .turn_of_created(ws, identity(a).await, before, says(channel, "hi"))
        .await
        .expect("answered");
    // Nothing was announced in between, so the turn starts a conversation without looking
    // for one; the database has one open already and the start takes it.
    assert_eq!(first.conversation_id, open_a);

    // Messages stored for someone outside their actor in between: they may have started
    // the created identity's conversation, so its first turn looks, and finds it.
    let before = conversations.announced();
    conversations.changed(&Change::Messages {
        workspace_id: ws,
        identity_id: a,
        since: parley_persistence::clock::now(),
    });
    wait_until("the change was not applied", async || {
        conversations.announced() != before
    })
    .await;
    let first = conversations
        .turn_of_created(ws, identity(b).await, before, says(channel, "hi"))
        .await
        .expect("answered");
    assert_eq!(first.conversation_id, open_b);
    t.runtime.shutdown(Duration::from_secs(5)).await;
}

async fn open_conversation(
    db: &parley_persistence::DatabaseConnection,
    ws: i64,
    identity_id: Uuid,
    channel_id: Uuid,
) -> Uuid {
    let now = parley_persistence::clock::now();
    parley_persistence::conversations::start(db, ws, identity_id, channel_id, None, now)
        .await
        .expect("conversation")
        .conversation()
        .id
}
