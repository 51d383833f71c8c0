use reqwest::Method;
use sea_orm::{ConnectionTrait, Statement};
use serde_json::json;

use crate::helpers::{expect_error, expect_status, spawn_app};

#[tokio::test]
async fn a_live_cloud_api_channel_is_created_with_a_write_only_encrypted_token() {
    let app = spawn_app().await;

    let data = app
        .created(
            "/channels/waba",
            json!({"name": "Main line", "accessToken": "EAAB-secret-token", "phoneNumberId": "106540352242922", "businessId": "102290129340398"}),
        )
        .await;

    assert_eq!(data["type"], "waba");
    assert_eq!(data["integration"], "cloud_api");
    assert_eq!(data["active"], true);
    assert_eq!(data["phoneNumberId"], "106540352242922");
    assert_eq!(data["businessId"], "102290129340398");
    assert_eq!(data["hasAccessToken"], true);
    assert_eq!(data["workerId"], json!(null));
    assert_eq!(data["settings"], json!({}));
    assert!(
        data["webhook"]["verifyToken"]
            .as_str()
            .is_some_and(|t| t.len() >= 20)
    );
    assert!(data["createdAt"].is_string() && data["updatedAt"].is_string());
    assert!(
        !data.to_string().contains("EAAB-secret-token"),
        "the token is never answered"
    );
    let listed = expect_status(app.get("/channels").await, 200).await;
    assert!(!listed.to_string().contains("EAAB-secret-token"));
    // The verify token answers Meta's verification: admin keys only read it.
    let token = data["webhook"]["verifyToken"].as_str().expect("token");
    let reader = app.key_with(&["read"]).await;
    let id = data["id"].as_str().expect("id");
    for path in [format!("/channels/{id}"), "/channels".to_owned()] {
        let read = expect_status(app.get_with(&path, &reader).await, 200).await;
        assert!(!read.to_string().contains(token), "{path}: {read}");
    }

    let db = app.db().await;
    let row = db
        .query_one_raw(Statement::from_string(
            db.get_database_backend(),
            "SELECT access_token_encrypted FROM channels",
        ))
        .await
        .expect("query")
        .expect("row");
    let stored: String = row.try_get("", "access_token_encrypted").expect("column");
    assert!(
        !stored.contains("EAAB-secret-token"),
        "stored encrypted: {stored}"
    );
    assert!(stored.starts_with("v1:"));
}

#[tokio::test]
async fn the_second_form_makes_an_inactive_channel_awaiting_credentials() {
    let app = spawn_app().await;

    let data = app
        .created(
            "/channels/waba",
            json!({"name": "Later line", "businessId": "102290129340398"}),
        )
        .await;

    assert_eq!(data["active"], false);
    assert_eq!(data["hasAccessToken"], false);
    let id = data["id"].as_str().expect("id");

    let refused = app
        .send_json(
            Method::PUT,
            &format!("/channels/{id}"),
            &json!({"active": true}),
        )
        .await;
    expect_error(refused, 409, "conflict").await;

    let completed = app
        .send_json(
            Method::PUT,
            &format!("/channels/{id}"),
            &json!({"active": true, "accessToken": "EAAB-x", "phoneNumberId": "1065403522"}),
        )
        .await;
    let completed = expect_status(completed, 200).await;
    assert_eq!(completed["data"]["active"], true);
    assert_eq!(completed["data"]["hasAccessToken"], true);
}

#[tokio::test]
async fn the_first_form_needs_all_its_credentials() {
    let app = spawn_app().await;

    let response = app
        .send_json(
            Method::POST,
            "/channels/waba",
            &json!({"name": "Main line", "accessToken": "EAAB-x"}),
        )
        .await;

    let body = expect_error(response, 400, "validation_failed").await;
    let paths: Vec<_> = body["details"]
        .as_array()
        .expect("details")
        .iter()
        .map(|d| d["path"].clone())
        .collect();
    assert_eq!(paths, [json!(["phoneNumberId"]), json!(["businessId"])]);
}

#[tokio::test]
async fn integrations_are_cloud_api_mm_lite_or_sandbox() {
    let app = spawn_app().await;

    let mm_lite = app
        .created("/channels/waba", json!({"name": "Marketing", "integration": "mm_lite", "accessToken": "t", "phoneNumberId": "123", "businessId": "456"}))
        .await;
    assert_eq!(mm_lite["integration"], "mm_lite");
    let sandbox = app
        .created(
            "/channels/waba",
            json!({"name": "Playground", "integration": "sandbox"}),
        )
        .await;
    assert_eq!(sandbox["integration"], "sandbox");
    assert_eq!(sandbox["active"], true);

    let response = app
        .send_json(
            Method::POST,
            "/channels/waba",
            &json!({"name": "Other", "integration": "telegram"}),
        )
        .await;
    let body = expect_error(response, 400, "validation_failed").await;
    assert_eq!(body["details"][0]["path"], json!(["integration"]));
}

#[tokio::test]
async fn a_channel_name_must_be_3_to_100_characters() {
    let app = spawn_app().await;
    let channel = app.sandbox_channel("Playground").await;

    for name in [json!("ab"), json!("x".repeat(101))] {
        let response = app
            .send_json(
                Method::PUT,
                &format!("/channels/{channel}"),
                &json!({"name": name}),
            )
            .await;
        let body = expect_error(response, 400, "validation_failed").await;
        assert_eq!(body["details"][0]["path"], json!(["name"]));
    }
    let created = app
        .send_json(
            Method::POST,
            "/channels/waba",
            &json!({"name": "ab", "integration": "sandbox"}),
        )
        .await;
    expect_error(created, 400, "validation_failed").await;
}

#[tokio::test]
async fn put_changes_name_settings_and_active() {
    let app = spawn_app().await;
    let channel = app.sandbox_channel("Playground").await;

    let updated = app
        .send_json(
            Method::PUT,
            &format!("/channels/{channel}"),
            &json!({"name": "Renamed", "settings": {"greeting": "hi"}, "active": false}),
        )
        .await;

    let updated = expect_status(updated, 200).await;
    assert_eq!(updated["data"]["name"], "Renamed");
    assert_eq!(updated["data"]["settings"], json!({"greeting": "hi"}));
    assert_eq!(updated["data"]["active"], false);
    let bad = app
        .send_json(
            Method::PUT,
            &format!("/channels/{channel}"),
            &json!({"settings": "x"}),
        )
        .await;
    let body = expect_error(bad, 400, "validation_failed").await;
    assert_eq!(body["details"][0]["path"], json!(["settings"]));
}

#[tokio::test]
async fn one_phone_number_is_one_channel() {
    let app = spawn_app().await;
    let body = json!({"name": "Main line", "accessToken": "t", "phoneNumberId": "106540352242922", "businessId": "1"});
    app.created("/channels/waba", body.clone()).await;

    let again = app.send_json(Method::POST, "/channels/waba", &body).await;

    expect_error(again, 409, "conflict").await;
}

#[tokio::test]
async fn syncing_a_worker_replaces_the_previous_one() {
    let app = spawn_app().await;
    let channel = app.sandbox_channel("Playground").await;
    let first = app.worker("First").await;
    let second = app.worker("Second").await;

    let synced = app
        .send_json(
            Method::POST,
            &format!("/channels/{channel}/worker/{first}"),
            &json!({}),
        )
        .await;
    assert_eq!(
        expect_status(synced, 200).await["data"]["workerId"],
        first.as_str()
    );
    let resynced = app
        .request(
            Method::POST,
            &format!("/channels/{channel}/worker/{second}"),
            Some(&app.owner.api_key),
        )
        .send()
        .await
        .expect("request");
    assert_eq!(
        expect_status(resynced, 200).await["data"]["workerId"],
        second.as_str()
    );

    let unknown = app
        .send_json(
            Method::POST,
            &format!("/channels/{channel}/worker/01a200f8-0000-7000-8000-000000000000"),
            &json!({}),
        )
        .await;
    expect_error(unknown, 404, "not_found").await;
}

#[tokio::test]
async fn a_deleted_channel_is_gone() {
    let app = spawn_app().await;
    let channel = app.sandbox_channel("Playground").await;

    expect_status(app.delete(&format!("/channels/{channel}")).await, 200).await;

    expect_error(
        app.get(&format!("/channels/{channel}")).await,
        404,
        "not_found",
    )
    .await;
    expect_error(
        app.delete(&format!("/channels/{channel}")).await,
        404,
        "not_found",
    )
    .await;
    let listed = expect_status(app.get("/channels").await, 200).await;
    assert_eq!(listed["pagination"]["total"], 0);
}

#[tokio::test]
async fn deleting_a_channel_keeps_its_conversations_readable_and_closed() {
    let app = spawn_app().await;
    let (_, channel) = app.chat_channel("Echo.", json!({})).await;
    app.put_identity("crm-1", json!({"name": "Ana", "phone": "+351912345678"}))
        .await;
    expect_status(app.chat("crm-1", &channel, "hello").await, 200).await;

    expect_status(app.delete(&format!("/channels/{channel}")).await, 200).await;

    let listed = expect_status(app.get("/conversations?identity_id=crm-1").await, 200).await;
    assert_eq!(listed["pagination"]["total"], 1);
    let conversation = &listed["data"][0];
    assert_eq!(conversation["status"], "closed");
    assert_eq!(conversation["channel_id"], channel.as_str());
    let id = conversation["id"].as_str().expect("id");
    let messages =
        expect_status(app.get(&format!("/conversations/{id}/messages")).await, 200).await;
    assert_eq!(messages["pagination"]["total"], 2);
    expect_error(app.chat("crm-1", &channel, "again").await, 404, "not_found").await;

    // Its number is free again.
    let live = app.live_channel("106540352242922").await;
    expect_status(app.delete(&format!("/channels/{live}")).await, 200).await;
    app.live_channel("106540352242922").await;
}

#[tokio::test]
async fn a_live_channel_is_created_only_with_credentials_meta_confirms_hold_the_number() {
    let app = spawn_app().await;
    let body = |token: &str| {
        json!({"name": "Main line", "accessToken": token, "phoneNumberId": "106540352242922",
               "businessId": "waba-1"})
    };

    app.graph.invalidate_token("EAAB-expired");
    let expired = app
        .send_json(Method::POST, "/channels/waba", &body("EAAB-expired"))
        .await;
    let refused = expect_error(expired, 400, "validation_failed").await;
    assert_eq!(refused["details"][0]["path"], json!(["accessToken"]));

    app.graph.not_held("106540352242922");
    let foreign = app
        .send_json(Method::POST, "/channels/waba", &body("EAAB-other"))
        .await;
    expect_error(foreign, 400, "validation_failed").await;

    let app = spawn_app().await;
    app.graph.fail_next_number_checks([1]);
    let down = app
        .send_json(Method::POST, "/channels/waba", &body("EAAB-good"))
        .await;
    expect_error(down, 502, "upstream_failed").await;

    let created = app
        .send_json(Method::POST, "/channels/waba", &body("EAAB-good"))
        .await;
    let created = expect_status(created, 201).await;
    assert_eq!(created["data"]["displayPhoneNumber"], "+1 555-010-0000");
    assert_eq!(created["data"]["verifiedName"], "Acme Support");
    assert_eq!(
        app.graph.number_checks(),
        ["106540352242922", "106540352242922"]
    );
    let listed = expect_status(app.get("/channels").await, 200).await;
    assert_eq!(
        listed["pagination"]["total"], 1,
        "refused channels were not kept"
    );
}

#[tokio::test]
async fn a_number_held_in_another_workspace_is_only_not_available() {
    let app = spawn_app().await;
    let other = app
        .bootstrap_another("Globex", "Globex HQ", "boss@globex.test")
        .await;
    let body = json!({"name": "Main line", "accessToken": "EAAB-x", "phoneNumberId": "106540352242922",
                      "businessId": "waba-1"});
    let theirs = app
        .send_json_with(Method::POST, "/channels/waba", &other.api_key, &body)
        .await;
    let theirs = expect_status(theirs, 201).await;

    let response = app.send_json(Method::POST, "/channels/waba", &body).await;

    let refused = expect_error(response, 409, "conflict").await;
    let text = refused.to_string();
    assert!(
        refused["message"]
            .as_str()
            .is_some_and(|m| m.contains("not available"))
    );
    assert!(
        !text.contains(theirs["data"]["id"].as_str().expect("id")),
        "{text}"
    );
    assert!(!text.contains("Globex"), "{text}");
}

#[tokio::test]
async fn activating_a_channel_awaiting_credentials_verifies_them() {
    let app = spawn_app().await;
    let created = app
        .send_json(
            Method::POST,
            "/channels/waba",
            &json!({"name": "Later line", "businessId": "waba-1"}),
        )
        .await;
    let channel = expect_status(created, 201).await["data"]["id"]
        .as_str()
        .expect("id")
        .to_owned();
    app.graph.invalidate_token("EAAB-bad");

    let refused = app
        .send_json(
            Method::PUT,
            &format!("/channels/{channel}"),
            &json!({"active": true, "accessToken": "EAAB-bad", "phoneNumberId": "106540352242922"}),
        )
        .await;
    expect_error(refused, 400, "validation_failed").await;
    let still = expect_status(app.get(&format!("/channels/{channel}")).await, 200).await;
    assert_eq!(still["data"]["active"], false);

    let activated = app
        .send_json(
            Method::PUT,
            &format!("/channels/{channel}"),
            &json!({"active": true, "accessToken": "EAAB-good", "phoneNumberId": "106540352242922"}),
        )
        .await;
    let activated = expect_status(activated, 200).await;
    assert_eq!(activated["data"]["active"], true);
    assert_eq!(activated["data"]["verifiedName"], "Acme Support");
}
