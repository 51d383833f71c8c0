use reqwest::Method;
use serde_json::{Value, json};

use crate::helpers::{expect_error, expect_status, spawn_app};

#[tokio::test]
async fn put_with_an_external_id_path_creates_the_identity_with_normalised_contacts() {
    let app = spawn_app().await;

    let response = app
        .send_json(Method::PUT, "/identity/crm-42", &json!({"name": "Ana", "phone": "+351 912 345 678", "email": "Ana@Example.COM", "metadata": {"tier": "gold"}}))
        .await;

    let body = expect_status(response, 201).await;
    let data = &body["data"];
    assert_eq!(data["external_id"], "crm-42");
    assert_eq!(data["name"], "Ana");
    assert_eq!(data["phone"], "+351912345678");
    assert_eq!(data["email"], "ana@example.com");
    assert_eq!(data["metadata"], json!({"tier": "gold"}));
    assert_eq!(data["stage"], json!(null));
    assert_eq!(
        data["contacts"],
        json!([{"type": "phone", "value": "+351912345678"}, {"type": "email", "value": "ana@example.com"}])
    );
    assert!(uuid::Uuid::parse_str(data["id"].as_str().expect("id")).is_ok());
}

#[tokio::test]
async fn an_identity_is_addressed_by_uuid_external_id_phone_or_email() {
    let app = spawn_app().await;
    let created = app
        .put_identity(
            "crm-42",
            json!({"phone": "+351912345678", "email": "ana@example.com"}),
        )
        .await;
    let id = created["id"].as_str().expect("id");

    for path in [
        id,
        "crm-42",
        "+351912345678",
        "351912345678",
        "ana@example.com",
        "ANA@example.com",
    ] {
        let response = app.get(&format!("/identity/{path}")).await;
        let body = expect_status(response, 200).await;
        assert_eq!(body["data"]["id"], id, "addressed as {path}");
    }
    expect_error(
        app.get("/identity/nobody@example.com").await,
        404,
        "not_found",
    )
    .await;
}

#[tokio::test]
async fn put_with_a_uuid_that_names_nothing_creates_an_identity_with_it_as_external_id() {
    let app = spawn_app().await;
    let chosen = "01a200f8-1111-7000-8000-000000000001";

    let data = app.put_identity(chosen, json!({"name": "Bo"})).await;

    assert_ne!(data["id"], chosen, "a fresh id");
    assert_eq!(data["external_id"], chosen);
    let found = expect_status(app.get(&format!("/identity/{chosen}")).await, 200).await;
    assert_eq!(found["data"]["id"], data["id"]);
}

#[tokio::test]
async fn put_with_another_workspaces_uuid_creates_here_and_reveals_nothing() {
    let app = spawn_app().await;
    let theirs = app
        .bootstrap_another("Globex", "Globex HQ", "boss@globex.test")
        .await;
    let their_identity = app
        .send_json_with(
            Method::PUT,
            "/identity/globex-1",
            &theirs.api_key,
            &json!({"name": "Hank"}),
        )
        .await;
    let their_id = expect_status(their_identity, 201).await["data"]["id"]
        .as_str()
        .expect("id")
        .to_owned();

    let response = app
        .send_json(
            Method::PUT,
            &format!("/identity/{their_id}"),
            &json!({"name": "Ana"}),
        )
        .await;

    let ours = expect_status(response, 201).await;
    assert_ne!(ours["data"]["id"], their_id.as_str());
    assert_eq!(ours["data"]["external_id"], their_id.as_str());
    assert_eq!(ours["data"]["name"], "Ana");
    let theirs_now = expect_status(
        app.get_with(&format!("/identity/{their_id}"), &theirs.api_key)
            .await,
        200,
    )
    .await;
    assert_eq!(theirs_now["data"]["name"], "Hank", "untouched");
}

#[tokio::test]
async fn aggregation_gives_the_path_to_the_owner_of_the_contact_point() {
    let app = spawn_app().await;
    let owner = app
        .put_identity(
            "+351912345678",
            json!({"phone": "+351912345678", "name": "Ana"}),
        )
        .await;
    assert_eq!(owner["external_id"], "+351912345678");
    let plain = app
        .send_json(
            Method::PUT,
            &format!("/identity/{}", owner["id"].as_str().expect("id")),
            &json!({"external_id": null}),
        )
        .await;
    expect_status(plain, 200).await;

    let joined = app
        .put_identity(
            "crm-42",
            json!({"phone": "+351 912 345 678", "email": "ana@x.test"}),
        )
        .await;

    assert_eq!(joined["id"], owner["id"]);
    assert_eq!(joined["external_id"], "crm-42");
    let found = expect_status(app.get("/identity/crm-42").await, 200).await;
    assert_eq!(found["data"]["id"], owner["id"]);
    assert_eq!(found["data"]["email"], "ana@x.test");

    let refused = app
        .send_json(
            Method::PUT,
            "/identity/crm-43",
            &json!({"email": "ana@x.test"}),
        )
        .await;
    expect_error(refused, 409, "conflict").await;
}

#[tokio::test]
async fn put_on_an_existing_identity_changes_only_given_fields() {
    let app = spawn_app().await;
    app.put_identity("crm-1", json!({"name": "Ana", "metadata": {"a": 1}}))
        .await;

    let response = app
        .send_json(
            Method::PUT,
            "/identity/crm-1",
            &json!({"email": "ana@example.com"}),
        )
        .await;

    let body = expect_status(response, 200).await;
    assert_eq!(body["data"]["name"], "Ana");
    assert_eq!(body["data"]["metadata"], json!({"a": 1}));
    assert_eq!(body["data"]["email"], "ana@example.com");
    let listed = expect_status(app.get("/identity").await, 200).await;
    assert_eq!(listed["pagination"]["total"], 1);
}

#[tokio::test]
async fn a_known_phone_under_a_path_other_than_its_owners_external_id_is_a_409() {
    let app = spawn_app().await;
    let ana = app
        .put_identity("crm-1", json!({"name": "Ana", "phone": "+351912345678"}))
        .await;

    // A different path that resolves to nothing, but the phone is Ana's, and Ana is crm-1.
    let refused = app
        .send_json(
            Method::PUT,
            "/identity/web-visitor-9",
            &json!({"phone": "351912345678", "email": "ana@example.com"}),
        )
        .await;

    expect_error(refused, 409, "conflict").await;
    let found = expect_status(app.get("/identity/crm-1").await, 200).await;
    assert_eq!(found["data"]["id"], ana["id"]);
    assert_eq!(found["data"]["email"], json!(null), "nothing joined");
    let listed = expect_status(app.get("/identity").await, 200).await;
    assert_eq!(listed["pagination"]["total"], 1);
}

#[tokio::test]
async fn a_contact_point_owned_by_another_identity_is_a_409_naming_the_owner() {
    let app = spawn_app().await;
    let ana = app
        .put_identity("crm-1", json!({"phone": "+351912345678"}))
        .await;
    app.put_identity("crm-2", json!({"name": "Bo"})).await;

    let response = app
        .send_json(
            Method::PUT,
            "/identity/crm-2",
            &json!({"phone": "+351912345678"}),
        )
        .await;

    let body = expect_error(response, 409, "conflict").await;
    assert!(
        body["message"]
            .as_str()
            .unwrap_or_default()
            .contains(ana["id"].as_str().expect("id")),
        "{body}"
    );
    let bo = expect_status(app.get("/identity/crm-2").await, 200).await;
    assert_eq!(bo["data"]["phone"], json!(null), "nothing changed");
}

#[tokio::test]
async fn a_phone_of_one_identity_and_an_email_of_another_is_a_409() {
    let app = spawn_app().await;
    app.put_identity("crm-1", json!({"phone": "+351912345678"}))
        .await;
    app.put_identity("crm-2", json!({"email": "bo@example.com"}))
        .await;

    let response = app
        .send_json(
            Method::PUT,
            "/identity/new-one",
            &json!({"phone": "+351912345678", "email": "bo@example.com"}),
        )
        .await;

    expect_error(response, 409, "conflict").await;
}

#[tokio::test]
async fn an_external_id_taken_by_another_identity_is_a_409() {
    let app = spawn_app().await;
    app.put_identity("crm-1", json!({"name": "Ana"})).await;
    app.put_identity("crm-2", json!({"name": "Bo"})).await;

    let response = app
        .send_json(
            Method::PUT,
            "/identity/crm-2",
            &json!({"external_id": "crm-1"}),
        )
        .await;

    expect_error(response, 409, "conflict").await;
}

#[tokio::test]
async fn invalid_phone_email_and_metadata_are_400s_naming_the_field() {
    let app = spawn_app().await;

    let response = app
        .send_json(
            Method::PUT,
            "/identity/crm-1",
            &json!({"phone": "12", "email": "not-an-email", "metadata": "x"}),
        )
        .await;

    let body = expect_error(response, 400, "validation_failed").await;
    let paths: Vec<_> = body["details"]
        .as_array()
        .expect("details")
        .iter()
        .map(|d| d["path"].clone())
        .collect();
    assert_eq!(
        paths,
        [json!(["phone"]), json!(["email"]), json!(["metadata"])]
    );
}

#[tokio::test]
async fn identities_are_listed_page_by_page() {
    let app = spawn_app().await;
    for n in 1..=3 {
        app.put_identity(&format!("crm-{n}"), json!({"name": format!("Person {n}")}))
            .await;
    }

    let page = expect_status(app.get("/identity?page=1&limit=2").await, 200).await;

    assert_eq!(page["data"].as_array().expect("array").len(), 2);
    assert_eq!(page["data"][0]["external_id"], "crm-1");
    assert_eq!(
        page["pagination"],
        json!({"page": 1, "limit": 2, "total": 3, "total_pages": 2})
    );
}

#[tokio::test]
async fn setting_a_stage_by_id_or_name_records_the_history() {
    let app = spawn_app().await;
    let lead = app.stage("Lead").await;
    app.stage("Customer").await;
    app.put_identity("crm-1", json!({"name": "Ana"})).await;

    let by_id = app
        .send_json(
            Method::POST,
            "/identity/crm-1/stage",
            &json!({"stage_id": lead, "metadata": {"by": "form"}}),
        )
        .await;
    assert_eq!(expect_status(by_id, 200).await["data"]["stage"], "Lead");
    let by_name = app
        .send_json(
            Method::POST,
            "/identity/crm-1/stage",
            &json!({"stage_id": "Customer"}),
        )
        .await;
    let by_name = expect_status(by_name, 200).await;
    assert_eq!(by_name["data"]["stage"], "Customer");

    let history = expect_status(app.get("/identity/crm-1/stages").await, 200).await;
    let stages: Vec<_> = history["data"]
        .as_array()
        .expect("array")
        .iter()
        .map(|e| e["stage"].clone())
        .collect();
    assert_eq!(stages, [json!("Lead"), json!("Customer")]);
    assert_eq!(history["data"][0]["metadata"], json!({"by": "form"}));
}

#[tokio::test]
async fn an_unknown_identity_is_a_404_and_a_body_naming_no_stage_a_400_when_setting_a_stage() {
    let app = spawn_app().await;
    app.put_identity("crm-1", json!({"name": "Ana"})).await;
    app.stage("Lead").await;

    // The body names something missing: a 400 naming the field, as a campaign's template or a
    // task's stage is.
    let nope = expect_error(
        app.send_json(
            Method::POST,
            "/identity/crm-1/stage",
            &json!({"stage_id": "Nope"}),
        )
        .await,
        400,
        "validation_failed",
    )
    .await;
    assert_eq!(nope["details"][0]["path"], json!(["stage_id"]));
    assert!(
        nope["details"][0]["message"]
            .as_str()
            .is_some_and(|m| m.contains("names no stage")),
        "{nope}"
    );
    expect_error(
        app.send_json(
            Method::POST,
            "/identity/ghost/stage",
            &json!({"stage_id": "Lead"}),
        )
        .await,
        404,
        "not_found",
    )
    .await;
    let missing = app
        .send_json(
            Method::POST,
            "/identity/crm-1/stage",
            &json!({"metadata": {}}),
        )
        .await;
    let body = expect_error(missing, 400, "validation_failed").await;
    assert_eq!(body["details"][0]["path"], json!(["stage_id"]));
}

#[tokio::test]
async fn merging_moves_contacts_memory_and_history_and_the_target_wins_on_a_key() {
    let app = spawn_app().await;
    let stage = app.stage("Lead").await;
    let target = app
        .put_identity("crm-1", json!({"name": "Ana", "phone": "+351912345678"}))
        .await;
    let source = app
        .put_identity(
            "crm-2",
            json!({"email": "ana@example.com", "metadata": {"from": "web"}}),
        )
        .await;
    expect_status(
        app.send_json(
            Method::POST,
            "/identity/crm-2/stage",
            &json!({"stage_id": stage}),
        )
        .await,
        200,
    )
    .await;
    for (who, key, value) in [
        ("crm-1", "profile.name", "Ana"),
        ("crm-2", "profile.name", "Anna"),
        ("crm-2", "preferences.language", "pt"),
    ] {
        let put = app
            .send_json(
                Method::PUT,
                &format!("/memory/from/{who}"),
                &json!({"key": key, "value": value}),
            )
            .await;
        assert!(put.status().is_success());
    }

    let merged = app
        .send_json(
            Method::POST,
            "/identity/crm-1/merge",
            &json!({"source_id": "crm-2"}),
        )
        .await;

    let merged = expect_status(merged, 200).await["data"].clone();
    assert_eq!(merged["id"], target["id"]);
    assert_eq!(merged["phone"], "+351912345678");
    assert_eq!(merged["email"], "ana@example.com");
    assert_eq!(merged["stage"], "Lead");
    assert_eq!(merged["metadata"], json!({"from": "web"}));
    let memory = expect_status(app.get("/memory/from/crm-1").await, 200).await;
    let entries: Vec<_> = memory["data"]
        .as_array()
        .expect("array")
        .iter()
        .map(|e| (e["key"].clone(), e["value"].clone()))
        .collect();
    assert_eq!(
        entries,
        [
            (json!("preferences.language"), json!("pt")),
            (json!("profile.name"), json!("Ana"))
        ]
    );
    let history = expect_status(app.get("/identity/crm-1/stages").await, 200).await;
    assert_eq!(history["pagination"]["total"], 1);
    expect_error(
        app.get(&format!("/identity/{}", source["id"].as_str().expect("id")))
            .await,
        404,
        "not_found",
    )
    .await;
    let by_email = expect_status(app.get("/identity/ana@example.com").await, 200).await;
    assert_eq!(by_email["data"]["id"], target["id"]);
}

#[tokio::test]
async fn merging_an_identity_into_itself_is_a_400() {
    let app = spawn_app().await;
    app.put_identity("crm-1", json!({"name": "Ana"})).await;

    let response = app
        .send_json(
            Method::POST,
            "/identity/crm-1/merge",
            &json!({"source_id": "crm-1"}),
        )
        .await;

    let body = expect_error(response, 400, "validation_failed").await;
    assert_eq!(body["details"][0]["path"], json!(["source_id"]));
}

#[tokio::test]
async fn deleting_an_identity_removes_contacts_memory_history_and_conversations() {
    let app = spawn_app().await;
    let channel = app.sandbox_channel("Playground").await;
    let stage = app.stage("Lead").await;
    let ana = app
        .put_identity("crm-1", json!({"phone": "+351912345678"}))
        .await;
    expect_status(
        app.send_json(
            Method::POST,
            "/identity/crm-1/stage",
            &json!({"stage_id": stage}),
        )
        .await,
        200,
    )
    .await;
    let put = app
        .send_json(
            Method::PUT,
            "/memory/from/crm-1",
            &json!({"key": "profile.name", "value": "Ana"}),
        )
        .await;
    assert_eq!(put.status().as_u16(), 201);
    let conversation = crate::conversations::seed_conversation(
        &app,
        ana["id"].as_str().expect("id"),
        &channel,
        &["hello"],
    )
    .await;

    let deleted = expect_status(app.delete("/identity/crm-1").await, 200).await;

    assert_eq!(deleted["data"]["id"], ana["id"]);
    expect_error(app.get("/identity/crm-1").await, 404, "not_found").await;
    expect_error(
        app.get(&format!("/conversations/{conversation}")).await,
        404,
        "not_found",
    )
    .await;
    // The phone is free again: a new identity can take it.
    let again = app
        .put_identity("crm-9", json!({"phone": "+351912345678"}))
        .await;
    assert_ne!(again["id"], ana["id"]);
    let memory = expect_status(app.get("/memory/from/crm-9").await, 200).await;
    assert_eq!(memory["data"], json!([]));
    let history = expect_status(app.get("/identity/crm-9/stages").await, 200).await;
    assert_eq!(history["pagination"]["total"], 0);
}

#[tokio::test]
async fn concurrent_identity_writes_all_succeed() {
    let app = spawn_app().await;

    let puts = (0..30).map(|n| {
        let app = &app;
        async move {
            app.send_json(
                Method::PUT,
                &format!("/identity/crm-{n}"),
                &json!({"name": format!("P{n}"), "email": format!("p{n}@example.com")}),
            )
            .await
            .status()
            .as_u16()
        }
    });
    let statuses = futures_util::future::join_all(puts).await;

    assert!(statuses.iter().all(|s| *s == 201), "{statuses:?}");
    let listed = expect_status(app.get("/identity").await, 200).await;
    assert_eq!(listed["pagination"]["total"], 30);
}

#[tokio::test]
async fn merging_two_people_who_talked_on_one_channel_and_got_one_flow_keeps_both() {
    let app = spawn_app().await;
    let (_, channel) = app.chat_channel("Echo.", json!({})).await;
    let template = json!({"name": "order_update", "type": "UTILITY", "language": "en_US",
        "components": [{"type": "BODY", "text": "Hi {{1}}, your order {{2}} has shipped.",
                        "example": {"body_text": [["Ana", "#1"]]}}]});
    app.created(&format!("/channels/{channel}/waba/templates"), template)
        .await;
    let target = app
        .put_identity("crm-1", json!({"name": "Ana", "phone": "+351912345678"}))
        .await;
    app.put_identity("crm-2", json!({"name": "Ana", "phone": "+351912345679"}))
        .await;
    // Both got one flow.
    let campaign = crate::flows::campaign(&app, &channel, "Orders", json!({})).await;
    let flow = app
        .created(
            "/flows",
            json!({"campaignUid": campaign, "channelUid": channel,
                   "contactUids": ["crm-1", "crm-2"],
                   "configuration": {"pauseBetweenContactsMs": 0}}),
        )
        .await;
    let uid = flow["uid"].as_str().expect("uid");
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let read = expect_status(app.get(&format!("/flows/{uid}")).await, 200).await;
        if read["data"]["status"] == "completed" {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "{read}");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    // Both talked on the channel; the second number's conversation was handed to a person,
    // then the first wrote last.
    expect_status(app.chat("crm-2", &channel, "second number").await, 200).await;
    let handed = app
        .send_json(
            Method::POST,
            &format!("/conversation/crm-2/handoff/{channel}"),
            &json!({"reason": "VIP"}),
        )
        .await;
    expect_status(handed, 200).await;
    expect_status(app.chat("crm-1", &channel, "first number").await, 200).await;
    // A task is addressed to the second number.
    let task = app
        .created(
            "/scheduled-tasks",
            json!({"name": "Follow up", "task_type": "send_message",
                   "scheduled_at": "2099-01-01T00:00:00Z",
                   "payload": {"identity_id": "crm-2", "channel_id": channel, "message": "Hi"}}),
        )
        .await;

    let merged = app
        .send_json(
            Method::POST,
            "/identity/crm-1/merge",
            &json!({"source_id": "crm-2"}),
        )
        .await;

    let merged = expect_status(merged, 200).await["data"].clone();
    assert_eq!(merged["id"], target["id"]);
    let id = target["id"].as_str().expect("id");
    let conversations = expect_status(
        app.get(&format!("/conversations?identity_id={id}")).await,
        200,
    )
    .await;
    let conversations = conversations["data"].as_array().expect("conversations");
    assert_eq!(conversations.len(), 2, "{conversations:#?}");
    let open: Vec<&Value> = conversations
        .iter()
        .filter(|c| c["status"] == "open")
        .collect();
    assert_eq!(open.len(), 1, "one open conversation per channel");
    assert_eq!(open[0]["mode"], "human", "the handoff is kept");
    assert_eq!(open[0]["handoff_reason"], "VIP");
    for conversation in conversations {
        let cid = conversation["id"].as_str().expect("id");
        let messages = expect_status(
            app.get(&format!("/conversations/{cid}/messages")).await,
            200,
        )
        .await;
        assert!(
            messages["pagination"]["total"].as_u64() >= Some(2),
            "{messages}"
        );
    }
    let recipients = expect_status(app.get(&format!("/flows/{uid}/recipients")).await, 200).await;
    assert_eq!(recipients["data"].as_array().map(Vec::len), Some(1));
    let task = expect_status(
        app.get(&format!(
            "/scheduled-tasks/{}",
            task["id"].as_str().expect("id")
        ))
        .await,
        200,
    )
    .await;
    assert_eq!(task["data"]["payload"]["identity_id"], id);
}

#[tokio::test]
async fn a_phone_written_with_the_international_00_prefix_finds_the_same_person() {
    let app = spawn_app().await;
    let ana = app
        .put_identity(
            "crm-1",
            json!({"name": "Ana", "phone": "00351 912 345 678"}),
        )
        .await;
    assert_eq!(ana["phone"], "+351912345678");

    for path in ["00351912345678", "+351912345678", "351912345678"] {
        let found = expect_status(app.get(&format!("/identity/{path}")).await, 200).await;
        assert_eq!(found["data"]["id"], ana["id"], "{path}");
    }
    let memory = app
        .send_json(
            Method::PUT,
            "/memory/from/00351912345678",
            &json!({"key": "profile.name", "value": "Ana"}),
        )
        .await;
    assert!(memory.status().is_success());
    let read = expect_status(app.get("/memory/from/crm-1").await, 200).await;
    assert_eq!(read["data"][0]["value"], "Ana");
}
