use chrono::Utc;
use parley_persistence::{Role, clock, conversations, memory};
use serde_json::json;
use uuid::Uuid;

use super::*;
use crate::conversation::history::KeptHistory;
use crate::conversation::history::tests::message;
use crate::test_support::{deps, world};

/// A person as a turn leaves them cached: the identity as stored, two remembered facts, their
/// conversation on the channel and its history (a tool round among the turns).
async fn cached_person() -> (Context, i64, Uuid, tempfile::TempDir) {
    let (deps, dir, _model) = deps().await;
    let db = &deps.db;
    let (ws, channel_id, person, _) = world(db).await;
    let now = clock::now();
    for (key, value) in [
        ("preferences.language", json!("pt-BR")),
        (
            "orders",
            json!([{"id": 7, "items": ["tea", "cups"], "paid": true}]),
        ),
    ] {
        memory::upsert(db, ws, person, key, value, json!({"source": "tool"}), now)
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
    let messages = vec![
        message(Role::User, "olá, quero chá"),
        message(Role::Assistant, ""),
        message(Role::Tool, "{\"ok\":true}"),
        message(Role::Assistant, "Anotado: chá e xícaras."),
    ];
    context
        .histories
        .insert(channel_id, KeptHistory::loaded(conversation.id, messages));
    context.conversations.insert(channel_id, conversation);
    context.conversations_known = true;
    (context, ws, channel_id, dir)
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
async fn a_sealed_cache_is_one_block_smaller_than_the_cache() {
    let (context, _, _, _dir) = cached_person().await;
    let sealed = Sealed::seal(&context).expect("sealed");
    // The conversation row alone is about 250 bytes in memory, the identity 170, each kept
    // message 72 and its text: the four messages, two facts and the rows are held in about
    // 1.5 KiB of blocks. Sealed, the timestamps as text are the largest part.
    assert!(
        sealed.len() < 1_000,
        "sealed into {} bytes: {context:?}",
        sealed.len()
    );
}

#[tokio::test]
async fn a_change_is_applied_to_a_sealed_cache_as_to_an_open_one() {
    let (context, ws, channel_id, _dir) = cached_person().await;
    let identity_id = context.identity.id;
    let since = Utc::now();
    let changes = [
        Change::Inbox { workspace_id: ws },
        Change::Stages { workspace_id: ws },
        Change::Messages {
            workspace_id: ws,
            identity_id,
            since,
        },
        Change::Channel {
            workspace_id: ws,
            channel_id,
        },
        Change::Assistants { workspace_id: ws },
        Change::Identity {
            workspace_id: ws,
            identity_id,
        },
    ];
    for change in changes {
        let mut open = context.clone();
        let stands = open.changed(&change);
        let mut sealed = Sealed::seal(&context).expect("sealed");
        assert_eq!(sealed.changed(&change), stands, "{change:?}");
        if stands {
            assert_eq!(sealed.open().expect("opened"), open, "{change:?}");
        }
    }
}

#[test]
fn a_block_that_is_not_a_cache_opens_as_nothing() {
    let sealed = Sealed(Box::from(&b"\x93\x01\x02"[..]));
    assert!(sealed.open().is_none());
}
