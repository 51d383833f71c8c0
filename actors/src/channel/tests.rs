//! The channel actor's own rules, with a sandbox channel.

use parley_persistence::clock;
use parley_persistence::conversations::{self, NewMessage};

use parley_persistence::MessageStatus;
use serde_json::json;
use uuid::Uuid;

use super::*;
use crate::test_support::{channel_deps, deps, world};

fn text(identity_id: Uuid) -> SendRequest {
    SendRequest {
        message_id: None,
        keep_when_unavailable: false,
        channel_retries: true,
        lane: Lane::Direct,
        outgoing: Outgoing {
            to: "351912345678".to_owned(),
            identity_id: Some(identity_id),
            operator: None,
            content: OutboundContent::Text {
                body: "Hello again".to_owned(),
                context: None,
            },
        },
    }
}

async fn wrote(
    db: &DatabaseConnection,
    ws: i64,
    channel_id: Uuid,
    identity_id: Uuid,
    hours_ago: i64,
) {
    let at = clock::now() - chrono::Duration::hours(hours_ago);
    let conversation = conversations::start(db, ws, identity_id, channel_id, None, at)
        .await
        .expect("conversation")
        .conversation();
    conversations::append_message(db, &conversation, NewMessage::from_person("hi".into()), at)
        .await
        .expect("message");
}

async fn send(actor: &ActorRef<ChannelMsg>, request: SendRequest) -> Result<Accepted, SendError> {
    ractor::call_t!(actor, ChannelMsg::Send, 5_000, request).expect("answer")
}

#[tokio::test]
async fn free_form_text_needs_the_24_hour_window_and_templates_do_not() {
    let (deps, _dir, _model) = deps().await;
    let (ws, channel_id, quiet, recent) = world(&deps.db).await;
    wrote(&deps.db, ws, channel_id, quiet, 30).await;
    wrote(&deps.db, ws, channel_id, recent, 1).await;
    let channel = channels::find(&deps.db, ws, channel_id)
        .await
        .expect("query")
        .expect("channel");
    let args = ChannelArgs {
        channel,
        deps: Arc::new(channel_deps(&deps)),
    };
    let (actor, _) = Actor::spawn(None, ChannelActor, args).await.expect("spawn");

    assert_eq!(
        send(&actor, text(quiet)).await,
        Err(SendError::WindowClosed)
    );
    let never = Uuid::now_v7();
    assert_eq!(
        send(&actor, text(never)).await,
        Err(SendError::WindowClosed)
    );
    assert_eq!(
        send(&actor, text(recent)).await.map(|a| a.status),
        Ok(MessageStatus::Delivered)
    );
    let mut template = text(quiet);
    template.outgoing.content = OutboundContent::Template(crate::whatsapp::TemplateMessage {
        name: "order_update".to_owned(),
        language: "en_US".to_owned(),
        components: json!([]),
        category: Some("UTILITY".to_owned()),
    });
    assert_eq!(
        send(&actor, template).await.map(|a| a.status),
        Ok(MessageStatus::Delivered)
    );
    actor.stop(None);
}

#[tokio::test]
async fn claims_run_together_give_each_message_to_one_claim() {
    use parley_persistence::{DatabaseExecutor, Merged, deliveries};
    let (deps, _dir, _model) = deps().await;
    let db = &deps.db;
    let (ws, channel_id, identity_id, _) = world(db).await;
    let conversation = conversations::start(db, ws, identity_id, channel_id, None, clock::now())
        .await
        .expect("conversation")
        .conversation();
    let mut pending = Vec::new();
    for _ in 0..2 {
        let reply = NewMessage::to_person("Hi".into(), MessageStatus::Pending);
        let stored = conversations::append_message(db, &conversation, reply, clock::now())
            .await
            .expect("reply");
        pending.push(stored.id);
    }
    let claim = |message_id| deliveries::Claim {
        message_id,
        fence: None,
    };
    let (a, b, missing) = (claim(pending[0]), claim(pending[1]), claim(Uuid::now_v7()));
    let executor = DatabaseExecutor::Connection(db);
    let taken = deliveries::Claim::run_all(&executor, vec![&a, &b, &a, &missing])
        .await
        .expect("claims");
    assert_eq!(taken, vec![true, true, false, false]);
    // Taken already: a later claim of either finds it sending.
    let again = deliveries::Claim::run_all(&executor, vec![&b])
        .await
        .expect("claims");
    assert_eq!(again, vec![false]);

    // Meta's answers to both, recorded in one statement, each with its own platform id.
    let accepted = |message_id, wamid: &str| deliveries::Accepted {
        message_id,
        status: MessageStatus::Sent,
        platform_message_id: wamid.to_owned(),
        counted: None,
        told: Vec::new(),
    };
    let (a, b) = (
        accepted(pending[0], "wamid.A"),
        accepted(pending[1], "wamid.B"),
    );
    deliveries::Accepted::run_all(&executor, vec![&a, &b])
        .await
        .expect("recorded");
    for (id, wamid) in [(pending[0], "wamid.A"), (pending[1], "wamid.B")] {
        let found = deliveries::find_by_platform_id(db, channel_id, wamid)
            .await
            .expect("read")
            .expect("recorded with its id");
        assert_eq!((found.id, found.status), (id, MessageStatus::Sent));
    }
}

/// Meta's reports waiting in one batch of the writer: each moves its own message once, and
/// only forward.
#[tokio::test]
async fn reports_run_together_move_each_message_once_and_only_forward() {
    use parley_persistence::{DatabaseExecutor, Merged, deliveries};
    let (deps, _dir, _model) = deps().await;
    let db = &deps.db;
    let (ws, channel_id, a, b) = world(db).await;
    let sent = |identity_id, wamid| {
        crate::test_support::sent_message(db, ws, channel_id, identity_id, wamid)
    };
    sent(a, "wamid.A").await;
    sent(b, "wamid.B").await;
    let executor = DatabaseExecutor::Connection(db);
    let report = |wamid: &str, status| deliveries::Reported {
        channel_id,
        platform_message_id: wamid.to_owned(),
        status,
        error: None,
    };
    let (delivered, read, behind, unknown) = (
        report("wamid.A", MessageStatus::Delivered),
        report("wamid.B", MessageStatus::Read),
        report("wamid.A", MessageStatus::Sent),
        report("wamid.C", MessageStatus::Delivered),
    );
    let moved = deliveries::Reported::run_all(
        &executor,
        vec![&delivered, &read, &delivered, &behind, &unknown],
    )
    .await
    .expect("reported");
    assert_eq!(moved, vec![true, true, false, false, false]);
    for (wamid, status) in [
        ("wamid.A", MessageStatus::Delivered),
        ("wamid.B", MessageStatus::Read),
    ] {
        let found = deliveries::find_by_platform_id(db, channel_id, wamid)
            .await
            .expect("read")
            .expect("stored");
        assert_eq!(found.status, status);
    }
}

#[tokio::test]
async fn events_stored_together_keep_one_per_message_and_are_answered_together() {
    use parley_persistence::webhook_events::{self, Answered, NewEvent};
    use parley_persistence::{DatabaseExecutor, Merged};
    let (deps, _dir, _model) = deps().await;
    let db = &deps.db;
    let (ws, channel_id, _, _) = world(db).await;
    let event = |wamid: &str| NewEvent {
        workspace_id: ws,
        channel_id,
        platform_message_id: wamid.to_owned(),
        payload: json!({"n": wamid}),
        now: clock::now(),
    };
    let (one, two) = (event("wamid.1"), event("wamid.2"));
    let executor = DatabaseExecutor::Connection(db);
    let stored = NewEvent::run_all(&executor, vec![&one, &two, &one])
        .await
        .expect("events");
    let ids: Vec<_> = stored.iter().map(|e| e.as_ref().map(|e| e.id)).collect();
    assert!(ids[0].is_some() && ids[1].is_some(), "{ids:?}");
    assert_eq!(
        ids[2], None,
        "a copy in the same statement is a re-delivery"
    );
    let again = NewEvent::run_all(&executor, vec![&event("wamid.2")])
        .await
        .expect("events");
    assert!(again[0].is_none(), "a stored message id is a re-delivery");

    let due = webhook_events::due(db, clock::now(), 10, None)
        .await
        .expect("due");
    assert_eq!(due.len(), 2);
    let answered: Vec<_> = due
        .iter()
        .map(|e| Answered {
            id: e.id,
            now: clock::now(),
        })
        .collect();
    Answered::run_all(&executor, answered.iter().collect())
        .await
        .expect("answered");
    assert!(
        webhook_events::due(db, clock::now(), 10, None)
            .await
            .expect("due")
            .is_empty()
    );
}
