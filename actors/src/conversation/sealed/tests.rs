use chrono::Utc;
use parley_persistence::{Role, clock, conversations, memory};
use serde_json::json;
use uuid::Uuid;

use super::*;
use crate::conversation::history::KeptHistory;
use crate::conversation::history::tests::message;
use crate::test_support::{deps, world};

/// A person as a turn leaves them cached: the identity as stored, what they are remembered
/// for, their conversation on the channel and its history.
async fn cached(
    remembered: &[(&str, serde_json::Value)],
    messages: Vec<parley_persistence::entities::message::Model>,
) -> (Context, i64, Uuid, tempfile::TempDir) {
    let (deps, dir, _model) = deps().await;
    let db = &deps.db;
    let (ws, channel_id, person, _) = world(db).await;
    let now = clock::now();
    for (key, value) in remembered {
        memory::upsert(
            db,
            ws,
            person,
            key,
            value.clone(),
            json!({"source": "tool"}),
            now,
        )
        .await
        .expect("memory");
    }
    let conversation = conversations::start(db, ws, person, channel_id, None, now)
        .await
        .expect("conversation")
        .conversation();
    let mut context = Context::load(db, ws, person)
        .await
        .expect("read")
        .expect("identity");
    context
        .histories
        .insert(channel_id, KeptHistory::loaded(conversation.id, messages));
    context.conversations.insert(channel_id, conversation);
    context.conversations_known = true;
    (context, ws, channel_id, dir)
}

/// Two remembered facts and a tool round among the turns.
async fn cached_person() -> (Context, i64, Uuid, tempfile::TempDir) {
    cached(
        &[
            ("preferences.language", json!("pt-BR")),
            (
                "orders",
                json!([{"id": 7, "items": ["tea", "cups"], "paid": true}]),
            ),
        ],
        vec![
            message(Role::User, "olá, quero chá"),
            message(Role::Assistant, ""),
            message(Role::Tool, "{\"ok\":true}"),
            message(Role::Assistant, "Anotado: chá e xícaras."),
        ],
    )
    .await
}

#[tokio::test]
async fn a_sealed_cache_opens_as_it_was_sealed() {
    let (mut context, _, channel_id, _dir) = cached_person().await;
    context
        .histories
        .get_mut(&channel_id)
        .expect("history")
        .missed(Utc::now());
    let sealed = Sealed::seal(&context).expect("sealed");
    assert_eq!(sealed.open().expect("opened"), context);
}

#[tokio::test]
async fn a_sealed_cache_is_opened_for_its_messages_and_dropped_for_an_administrators_change() {
    let (context, ws, channel_id, _dir) = cached_person().await;
    let identity_id = context.identity.id;
    let sealed = || Sealed::seal(&context).expect("sealed");
    for untouched in [
        Change::Inbox { workspace_id: ws },
        Change::Stages { workspace_id: ws },
    ] {
        let mut kept = sealed();
        assert!(kept.changed(&untouched), "{untouched:?}");
        assert_eq!(kept.open().expect("opened"), context, "{untouched:?}");
    }

    let messages = Change::Messages {
        workspace_id: ws,
        identity_id,
        since: Utc::now(),
    };
    let mut open = context.clone();
    assert!(open.changed(&messages));
    let mut kept = sealed();
    assert!(kept.changed(&messages));
    assert_eq!(kept.open().expect("opened"), open);
    assert!(
        open.histories
            .get(&channel_id)
            .expect("history")
            .refresh_from()
            .is_some()
    );

    for dropping in [
        Change::Channel {
            workspace_id: ws,
            channel_id,
        },
        Change::Assistants { workspace_id: ws },
        Change::Identity {
            workspace_id: ws,
            identity_id,
        },
    ] {
        assert!(!sealed().changed(&dropping), "{dropping:?}");
    }
}

#[test]
fn a_block_that_is_not_a_cache_opens_as_nothing() {
    let sealed = Sealed(Box::from(&b"\x93\x01\x02"[..]));
    assert!(sealed.open().is_none());
}

#[tokio::test]
async fn a_person_who_wrote_once_is_sealed_into_less_than_half_a_kibibyte() {
    let (context, ..) = cached(
        &[],
        vec![
            message(Role::User, "Hi, do you deliver on Sundays?"),
            message(Role::Assistant, "We do, from 9 to 13."),
        ],
    )
    .await;
    let sealed = Sealed::seal(&context).expect("sealed");
    // 458 bytes when written; the timestamps as text are the largest part.
    assert!(sealed.len() < 512, "sealed into {} bytes", sealed.len());
}
