//! The registry with its actors: one per identity, crashes contained, rests and their
//! caches, live actors published to turns; created identities taken as given (`created.rs`).

use std::time::Duration;

use parley_persistence::ConnectionTrait;
use uuid::Uuid;

use super::*;
use crate::ActorRuntime;
use crate::changes::Listener;
use crate::conversation::TurnOrigin;
use crate::conversation::{Conversations, TurnRequest};
use crate::test_support::{runtime_deps, world};

fn says(channel_id: Uuid, text: &str) -> TurnRequest {
    TurnRequest {
        channel_id,
        text: text.to_owned(),
        origin: TurnOrigin::Api { events: None },
        metadata: None,
        attachments: Vec::new(),
    }
}

#[tokio::test]
async fn a_crashed_conversation_actor_is_replaced_and_other_identities_are_untouched() {
    let t = started(|_| {}).await;
    let (conversations, ws, channel, a, b) = (&t.conversations, t.ws, t.channel, t.a, t.b);
    conversations
        .turn(ws, a, says(channel, "hi"))
        .await
        .expect("a answers");
    conversations
        .turn(ws, b, says(channel, "hi"))
        .await
        .expect("b answers");
    let a_before = conversations
        .local()
        .actor_of((ws, a))
        .await
        .expect("a live");
    let b_before = conversations
        .local()
        .actor_of((ws, b))
        .await
        .expect("b live");

    a_before.send_message(ConversationMsg::Crash).expect("send");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while conversations.local().actor_of((ws, a)).await.is_some() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the failed actor was not forgotten"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }

    let again = conversations
        .turn(ws, a, says(channel, "still there?"))
        .await
        .expect("a answers again");
    assert_eq!(again.reply, "You said: still there?");
    let a_after = conversations
        .local()
        .actor_of((ws, a))
        .await
        .expect("a live again");
    assert_ne!(a_after.get_id(), a_before.get_id());
    let b_after = conversations
        .local()
        .actor_of((ws, b))
        .await
        .expect("b still live");
    assert_eq!(
        b_after.get_id(),
        b_before.get_id(),
        "b's actor never noticed"
    );
    t.runtime.shutdown(Duration::from_secs(5)).await;
}

#[tokio::test]
async fn concurrent_first_messages_of_one_identity_spawn_one_actor() {
    let t = started(|_| {}).await;
    let (conversations, ws, channel, a) = (&t.conversations, t.ws, t.channel, t.a);

    let turns = (0..8).map(|n| {
        let conversations = conversations.clone();
        async move {
            conversations
                .turn(ws, a, says(channel, &format!("m{n}")))
                .await
        }
    });
    for outcome in futures_util::future::join_all(turns).await {
        outcome.expect("answered");
    }

    assert_eq!(conversations.live().await.expect("count"), 1);
    t.runtime.shutdown(Duration::from_secs(5)).await;
}

/// A runtime on a fresh database holding [`world`], its conversation settings adjusted.
struct Started {
    runtime: ActorRuntime,
    conversations: Conversations,
    model: parley_testkit::FakeModel,
    db: parley_persistence::DatabaseConnection,
    ws: i64,
    channel: Uuid,
    a: Uuid,
    b: Uuid,
    _dir: tempfile::TempDir,
}

async fn started(configure: impl FnOnce(&mut ConversationDeps)) -> Started {
    let (mut deps, dir, model) = runtime_deps().await;
    configure(&mut deps.conversations);
    let db = deps.conversations.db.clone();
    let (ws, channel, a, b) = world(&db).await;
    let runtime = ActorRuntime::start(deps).await.expect("runtime");
    let conversations = runtime.conversations().clone();
    Started {
        runtime,
        conversations,
        model,
        db,
        ws,
        channel,
        a,
        b,
        _dir: dir,
    }
}

/// The texts of the messages the model was sent in its most recent request.
fn last_request_texts(model: &parley_testkit::FakeModel) -> Vec<String> {
    model.last_request().expect("a request")["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .filter_map(|m| m["content"].as_str().map(str::to_owned))
        .collect()
}

async fn wait_until(what: &str, mut done: impl AsyncFnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while !done().await {
        assert!(tokio::time::Instant::now() < deadline, "{what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn a_resting_identity_has_no_actor_and_its_next_turn_starts_from_its_cache() {
    let t = started(|deps| deps.settings.actor_rest = Duration::from_millis(50)).await;
    let (conversations, ws, channel, a) = (&t.conversations, t.ws, t.channel, t.a);
    conversations
        .turn(ws, a, says(channel, "first"))
        .await
        .expect("answered");

    wait_until("the actor never rested", async || {
        conversations.live().await.expect("count") == 0
    })
    .await;
    assert_eq!(conversations.resting_in(None).await.expect("count"), 1);
    assert_eq!(
        conversations.resting_in(Some(ws + 1)).await.expect("count"),
        0
    );

    // Unannounced, so only a turn that reads the table would miss them: the history comes
    // from the cache the resting actor left.
    t.db.execute_unprepared("DELETE FROM messages")
        .await
        .expect("delete");
    conversations
        .turn(ws, a, says(channel, "second"))
        .await
        .expect("answered");
    let texts = last_request_texts(&t.model);
    assert!(texts.contains(&"first".to_owned()), "{texts:?}");
    assert!(texts.contains(&"You said: first".to_owned()), "{texts:?}");
    assert_eq!(conversations.resting_in(None).await.expect("count"), 0);
    t.runtime.shutdown(Duration::from_secs(5)).await;
}

#[tokio::test]
async fn an_actor_started_while_the_warm_ones_are_live_rests_after_the_busy_rest() {
    let t = started(|deps| {
        deps.settings.actor_rest = Duration::from_secs(60);
        deps.settings.warm_actors = 1;
        deps.settings.busy_rest = Duration::from_millis(50);
    })
    .await;
    let (conversations, ws, channel) = (&t.conversations, t.ws, t.channel);
    conversations
        .turn(ws, t.a, says(channel, "first"))
        .await
        .expect("answered");
    conversations
        .turn(ws, t.b, says(channel, "second"))
        .await
        .expect("answered");

    wait_until(
        "the actor started past the warm ones never rested",
        async || conversations.local().actor_of((ws, t.b)).await.is_none(),
    )
    .await;
    assert_eq!(
        conversations.held_in(None).await.expect("count"),
        (1, 1),
        "live and resting"
    );
    assert!(
        conversations.local().actor_of((ws, t.a)).await.is_some(),
        "the warm actor rested before its rest time"
    );
    t.runtime.shutdown(Duration::from_secs(5)).await;
}

#[tokio::test]
async fn a_turn_for_an_actor_finishing_its_mailbox_before_it_rests_waits_for_its_successor() {
    let t = started(|_| {}).await;
    let (conversations, ws, channel, a) = (&t.conversations, t.ws, t.channel, t.a);
    conversations
        .turn(ws, a, says(channel, "warm up"))
        .await
        .expect("answered");
    let first = conversations.local().actor_of((ws, a)).await.expect("live");

    t.model
        .set_latency(Duration::from_millis(300), Duration::ZERO);
    let slow = tokio::spawn({
        let conversations = conversations.clone();
        async move { conversations.turn(ws, a, says(channel, "slow")).await }
    });
    tokio::time::sleep(Duration::from_millis(50)).await;
    conversations
        .local()
        .registry()
        .get()
        .expect("registry")
        .send_message(RegistryMsg::Rest((ws, a), first.get_id()))
        .expect("rest");
    // Once the registry has taken the rest (its answer comes after it), the actor is no
    // longer published: the next turn asks the registry, which holds it for the successor.
    conversations.live().await.expect("count");
    assert!(conversations.local().published((ws, a)).is_none());
    t.model.set_latency(Duration::ZERO, Duration::ZERO);
    let next = conversations
        .turn(ws, a, says(channel, "next"))
        .await
        .expect("answered");

    assert_eq!(next.reply, "You said: next");
    let slow = slow.await.expect("task").expect("answered");
    assert_eq!(slow.reply, "You said: slow");
    // The successor started once the first had stored its turn, and from its cache.
    let texts = last_request_texts(&t.model);
    assert!(texts.contains(&"You said: slow".to_owned()), "{texts:?}");
    let successor = conversations.local().actor_of((ws, a)).await.expect("live");
    assert_ne!(successor.get_id(), first.get_id());
    assert_eq!(conversations.live().await.expect("count"), 1);
    t.runtime.shutdown(Duration::from_secs(5)).await;
}

#[tokio::test]
async fn a_live_actor_is_published_until_it_rests_and_its_successor_is_published_in_turn() {
    let t = started(|_| {}).await;
    let (conversations, ws, channel, a) = (&t.conversations, t.ws, t.channel, t.a);
    assert!(conversations.local().published((ws, a)).is_none());
    conversations
        .turn(ws, a, says(channel, "hi"))
        .await
        .expect("answered");
    let first = conversations.local().actor_of((ws, a)).await.expect("live");
    let published = conversations.local().published((ws, a)).expect("published");
    assert_eq!(published.get_id(), first.get_id());

    // A turn reaches the published actor: no second actor starts.
    conversations
        .turn(ws, a, says(channel, "again"))
        .await
        .expect("answered");
    let same = conversations.local().actor_of((ws, a)).await.expect("live");
    assert_eq!(same.get_id(), first.get_id());

    let registry = conversations.local().registry().get().expect("registry");
    registry
        .send_message(RegistryMsg::Rest((ws, a), first.get_id()))
        .expect("rest");
    wait_until("the rested actor stayed published", async || {
        conversations.live().await.expect("count") == 0
    })
    .await;
    assert!(conversations.local().published((ws, a)).is_none());

    let next = conversations
        .turn(ws, a, says(channel, "back"))
        .await
        .expect("answered");
    assert_eq!(next.reply, "You said: back");
    let successor = conversations.local().published((ws, a)).expect("published");
    assert_ne!(successor.get_id(), first.get_id());
    t.runtime.shutdown(Duration::from_secs(5)).await;
    assert!(
        conversations.local().published((ws, a)).is_none(),
        "withdrawn at shutdown"
    );
}

mod created;
