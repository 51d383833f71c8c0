//! Requests that race each other answer 2xx or 4xx, never 500: a delete that wins makes the
//! loser a 404, of concurrent merges of one source exactly one happens, and messages racing
//! to start an identity's thread on a channel all land in one conversation.

use std::collections::BTreeSet;

use futures_util::future::join_all;
use reqwest::Method;
use serde_json::{Value, json};

use crate::helpers::{TestApp, expect_status, spawn_app};

async fn statuses(requests: Vec<(Method, String, Value)>, app: &TestApp) -> Vec<u16> {
    let sent = requests.into_iter().map(|(method, path, body)| async move {
        app.send_json(method, &path, &body).await.status().as_u16()
    });
    join_all(sent).await
}

#[tokio::test]
async fn deleting_a_worker_while_assistants_are_created_on_it_never_answers_500() {
    let app = spawn_app().await;
    for _ in 0..3 {
        let worker = app.worker("Support").await;
        let mut requests: Vec<(Method, String, Value)> = (0..12)
            .map(|n| {
                (
                    Method::POST,
                    format!("/workers/{worker}/assistants"),
                    json!({"name": format!("A{n}"), "instructions": "Help."}),
                )
            })
            .collect();
        requests.insert(
            4,
            (Method::DELETE, format!("/workers/{worker}"), json!(null)),
        );

        let answered = statuses(requests, &app).await;

        assert!(
            answered.iter().all(|s| [200, 201, 400, 404].contains(s)),
            "{answered:?}"
        );
    }
}

#[tokio::test]
async fn deleting_and_updating_one_identity_at_once_never_answers_500() {
    let app = spawn_app().await;
    for round in 0..5 {
        let path = format!("/identity/crm-{round}");
        app.put_identity(&format!("crm-{round}"), json!({"name": "Ana"}))
            .await;
        let requests = vec![
            (
                Method::PUT,
                path.clone(),
                json!({"name": "Ana B", "phone": format!("+35191234567{round}")}),
            ),
            (Method::DELETE, path.clone(), json!(null)),
            (
                Method::PUT,
                format!("/memory/from/crm-{round}"),
                json!({"key": "profile.name", "value": "Ana"}),
            ),
            (
                Method::POST,
                format!("{path}/stage"),
                json!({"stage_id": "nothing-yet"}),
            ),
        ];

        let answered = statuses(requests, &app).await;

        assert!(
            answered.iter().all(|s| [200, 201, 400, 404].contains(s)),
            "round {round}: {answered:?}"
        );
    }
}

#[tokio::test]
async fn concurrent_merges_of_one_source_merge_it_once() {
    let app = spawn_app().await;
    let target = app.put_identity("target", json!({"name": "Ana"})).await;
    app.put_identity("source", json!({"email": "ana@x.test"}))
        .await;
    let requests = (0..10)
        .map(|_| {
            (
                Method::POST,
                "/identity/target/merge".to_owned(),
                json!({"source_id": "source"}),
            )
        })
        .collect();

    let answered = statuses(requests, &app).await;

    assert_eq!(
        answered.iter().filter(|s| **s == 200).count(),
        1,
        "{answered:?}"
    );
    assert!(
        answered.iter().all(|s| [200, 404].contains(s)),
        "{answered:?}"
    );
    let merged = expect_status(app.get("/identity/target").await, 200).await;
    assert_eq!(merged["data"]["id"], target["id"]);
    assert_eq!(merged["data"]["email"], "ana@x.test");
}

#[tokio::test]
async fn deleting_a_channel_while_messages_arrive_never_answers_500() {
    let app = spawn_app().await;
    let (_, channel) = app.chat_channel("Echo.", json!({})).await;
    app.put_identity("crm-1", json!({"name": "Ana"})).await;
    let mut requests: Vec<(Method, String, Value)> = (0..8)
        .flat_map(|n| {
            [
                (
                    Method::POST,
                    format!("/conversation/crm-1/chat/{channel}"),
                    json!({"message": format!("hi {n}")}),
                ),
                (
                    Method::POST,
                    format!("/channels/{channel}/sandbox/inbound"),
                    json!({"from": format!("+35191234560{n}"), "text": "hello"}),
                ),
            ]
        })
        .collect();
    requests.insert(
        5,
        (Method::DELETE, format!("/channels/{channel}"), json!(null)),
    );

    let answered = statuses(requests, &app).await;

    assert!(
        answered.iter().all(|s| [200, 201, 404, 409].contains(s)),
        "{answered:?}"
    );
}

#[tokio::test]
async fn sends_and_turns_that_race_for_a_new_thread_share_one_conversation() {
    let app = spawn_app().await;
    let channel = app.live_channel("106540352242922").await;
    app.graph
        .add_template("waba-1", crate::helpers::order_update());
    for round in 0..3 {
        let phone = format!("+55119876543{round:02}");
        let crm = format!("crm-race-{round}");
        app.put_identity(&crm, json!({"name": "Ana", "phone": phone}))
            .await;
        let mut requests: Vec<(Method, String, Value)> = (0..6)
            .flat_map(|n| {
                [
                    (
                        Method::POST,
                        format!("/channels/{channel}/waba/send"),
                        crate::helpers::order_update_send(&phone),
                    ),
                    (
                        Method::POST,
                        format!("/conversation/{crm}/chat/{channel}"),
                        json!({"message": format!("hi {n}")}),
                    ),
                ]
            })
            .collect();
        requests.rotate_left(round);

        let sent = requests.into_iter().map(|(method, path, body)| {
            let app = &app;
            async move { expect_status(app.send_json(method, &path, &body).await, 200).await }
        });
        let answered = join_all(sent).await;

        let conversations: BTreeSet<&str> = answered
            .iter()
            .map(|a| {
                let data = &a["data"];
                data.get("conversationId")
                    .unwrap_or(&data["conversation_id"])
                    .as_str()
                    .expect("every answer names its conversation")
            })
            .collect();
        assert_eq!(conversations.len(), 1, "round {round}: {conversations:?}");
        let listed = expect_status(
            app.get(&format!(
                "/conversations?identity_id={crm}&channel_id={channel}"
            ))
            .await,
            200,
        )
        .await;
        assert_eq!(listed["pagination"]["total"], 1, "round {round}: {listed}");
        assert_eq!(
            listed["data"][0]["id"].as_str(),
            conversations.first().copied()
        );
    }
}
