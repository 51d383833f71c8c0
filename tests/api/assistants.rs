use reqwest::Method;
use serde_json::json;

use crate::helpers::{expect_error, expect_status, spawn_app};

#[tokio::test]
async fn creating_an_assistant_answers_assistant_id_and_fills_defaults() {
    let app = spawn_app().await;
    let worker = app.worker("Support").await;

    let data = app
        .created(
            &format!("/workers/{worker}/assistants"),
            json!({"name": "Ana", "instructions": "Hi {{identity.name}}", "languages": ["en", "pt-BR"]}),
        )
        .await;

    assert_eq!(data["assistant_id"], data["id"]);
    assert_eq!(data["worker_id"], worker.as_str());
    assert_eq!(data["provider"], "PROVIDER_ONE");
    assert_eq!(data["languages"], json!(["en", "pt-BR"]));
    assert_eq!(data["instructions"], "Hi {{identity.name}}");
    assert_eq!(data["model"], json!(null));
    assert_eq!(
        data["settings"],
        json!({"temperature": null, "max_tokens": null, "history_turns": 20, "memory_enabled": true, "debounce_ms": 0, "fallback_message": null, "handoff": false, "handoff_timeout_minutes": 720, "assignment_timeout_minutes": 30, "vision": false, "transcribe": false})
    );
}

#[tokio::test]
async fn patch_changes_only_given_fields_and_answers_like_get() {
    let app = spawn_app().await;
    let worker = app.worker("Support").await;
    let assistant = app.assistant(&worker, "Ana").await;
    let path = format!("/assistant/{assistant}");

    let patched = app
        .send_json(Method::PATCH, &path, &json!({"model": "gpt-x", "settings": {"temperature": 0.3, "fallback_message": "One moment."}}))
        .await;
    let patched = expect_status(patched, 200).await;
    let fetched = expect_status(app.get(&path).await, 200).await;

    assert_eq!(patched["data"], fetched["data"]);
    let data = &fetched["data"];
    assert_eq!(data["name"], "Ana");
    assert_eq!(data["instructions"], "Be helpful.");
    assert_eq!(data["model"], "gpt-x");
    assert_eq!(data["settings"]["temperature"], 0.3);
    assert_eq!(data["settings"]["fallback_message"], "One moment.");
    assert_eq!(
        data["settings"]["history_turns"], 20,
        "untouched settings keep their value"
    );

    let cleared = expect_status(
        app.send_json(Method::PATCH, &path, &json!({"model": null}))
            .await,
        200,
    )
    .await;
    assert_eq!(cleared["data"]["model"], json!(null));
}

#[tokio::test]
async fn a_language_not_matching_xx_or_xx_xx_is_a_400_naming_its_index() {
    let app = spawn_app().await;
    let worker = app.worker("Support").await;
    let assistant = app.assistant(&worker, "Ana").await;

    let response = app
        .send_json(
            Method::PATCH,
            &format!("/assistant/{assistant}"),
            &json!({"languages": ["en", "pt_BR"]}),
        )
        .await;

    let body = expect_error(response, 400, "validation_failed").await;
    assert_eq!(body["details"][0]["path"], json!(["languages", 1]));
    let unchanged = expect_status(app.get(&format!("/assistant/{assistant}")).await, 200).await;
    assert_eq!(unchanged["data"]["languages"], json!([]));
}

#[tokio::test]
async fn an_unknown_provider_is_a_400() {
    let app = spawn_app().await;
    let worker = app.worker("Support").await;

    let response = app
        .send_json(
            Method::POST,
            &format!("/workers/{worker}/assistants"),
            &json!({"name": "Ana", "instructions": "x", "provider": "PROVIDER_TWO"}),
        )
        .await;

    let body = expect_error(response, 400, "validation_failed").await;
    assert_eq!(body["details"][0]["path"], json!(["provider"]));
}

#[tokio::test]
async fn name_and_instructions_are_required_on_create() {
    let app = spawn_app().await;
    let worker = app.worker("Support").await;
    let path = format!("/workers/{worker}/assistants");

    let no_name = expect_error(
        app.send_json(Method::POST, &path, &json!({"instructions": "x"}))
            .await,
        400,
        "validation_failed",
    )
    .await;
    assert_eq!(no_name["details"][0]["path"], json!(["name"]));
    let no_instructions = expect_error(
        app.send_json(Method::POST, &path, &json!({"name": "Ana"}))
            .await,
        400,
        "validation_failed",
    )
    .await;
    assert_eq!(
        no_instructions["details"][0]["path"],
        json!(["instructions"])
    );
}

#[tokio::test]
async fn instructions_whose_template_does_not_parse_are_a_400() {
    let app = spawn_app().await;
    let worker = app.worker("Support").await;

    let response = app
        .send_json(
            Method::POST,
            &format!("/workers/{worker}/assistants"),
            &json!({"name": "Ana", "instructions": "{{#if memory.x}}unclosed"}),
        )
        .await;

    let body = expect_error(response, 400, "validation_failed").await;
    assert_eq!(body["details"][0]["path"], json!(["instructions"]));
}

#[tokio::test]
async fn settings_out_of_range_or_of_the_wrong_type_name_the_setting() {
    let app = spawn_app().await;
    let worker = app.worker("Support").await;
    let assistant = app.assistant(&worker, "Ana").await;
    let path = format!("/assistant/{assistant}");

    let range = app
        .send_json(
            Method::PATCH,
            &path,
            &json!({"settings": {"temperature": 3, "history_turns": 1000, "handoff_timeout_minutes": 0}}),
        )
        .await;
    let body = expect_error(range, 400, "validation_failed").await;
    assert_eq!(
        body["details"][2]["path"],
        json!(["settings", "handoff_timeout_minutes"])
    );
    assert_eq!(body["details"][2]["message"], "must be between 1 and 43200");
    assert_eq!(
        body["details"][0]["path"],
        json!(["settings", "temperature"])
    );
    assert_eq!(
        body["details"][1]["path"],
        json!(["settings", "history_turns"])
    );

    let typed = app
        .send_json(
            Method::PATCH,
            &path,
            &json!({"settings": {"memory_enabled": "yes"}}),
        )
        .await;
    let body = expect_error(typed, 400, "validation_failed").await;
    assert_eq!(
        body["details"][0]["path"],
        json!(["settings", "memory_enabled"])
    );

    let not_object = app
        .send_json(Method::PATCH, &path, &json!({"settings": [1]}))
        .await;
    let body = expect_error(not_object, 400, "validation_failed").await;
    assert_eq!(body["details"][0]["path"], json!(["settings"]));
}

#[tokio::test]
async fn deleting_an_assistant_confirms_and_then_it_is_gone() {
    let app = spawn_app().await;
    let worker = app.worker("Support").await;
    let assistant = app.assistant(&worker, "Ana").await;

    let deleted = expect_status(app.delete(&format!("/assistant/{assistant}")).await, 200).await;

    assert!(
        deleted["message"]
            .as_str()
            .unwrap_or_default()
            .contains("deleted")
    );
    expect_error(
        app.get(&format!("/assistant/{assistant}")).await,
        404,
        "not_found",
    )
    .await;
    expect_error(
        app.delete(&format!("/assistant/{assistant}")).await,
        404,
        "not_found",
    )
    .await;
}

#[tokio::test]
async fn an_assistant_for_an_unknown_worker_is_a_404() {
    let app = spawn_app().await;

    let response = app
        .send_json(
            Method::POST,
            "/workers/01a200f8-0000-7000-8000-000000000000/assistants",
            &json!({"name": "Ana", "instructions": "x"}),
        )
        .await;

    expect_error(response, 404, "not_found").await;
}

#[tokio::test]
async fn a_workers_assistants_are_listed_oldest_first_in_pages() {
    let app = spawn_app().await;
    let worker = app.worker("Support").await;
    let other = app.worker("Sales").await;
    let ana = app.assistant(&worker, "Ana").await;
    let rui = app.assistant(&worker, "Rui").await;
    app.assistant(&other, "Eva").await;

    let listed = expect_status(app.get(&format!("/workers/{worker}/assistants")).await, 200).await;
    let ids: Vec<_> = listed["data"]
        .as_array()
        .expect("a list")
        .iter()
        .map(|a| a["id"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(ids, [ana.clone(), rui]);
    assert_eq!(listed["pagination"]["total"], 2);
    assert_eq!(listed["data"][0]["worker_id"], worker.as_str());

    let first = expect_status(
        app.get(&format!("/workers/{worker}/assistants?limit=1"))
            .await,
        200,
    )
    .await;
    assert_eq!(first["data"][0]["id"], ana.as_str());
    assert_eq!(first["pagination"]["total_pages"], 2);

    expect_error(
        app.get("/workers/01a200f8-0000-7000-8000-000000000000/assistants")
            .await,
        404,
        "not_found",
    )
    .await;
}
