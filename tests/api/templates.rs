use reqwest::Method;
use serde_json::json;

use crate::helpers::{TOKEN, expect_error, expect_status, order_update, spawn_app};

const NUMBER: &str = "106540352242922";

#[tokio::test]
async fn templates_are_listed_from_meta() {
    let app = spawn_app().await;
    let channel = app.live_channel(NUMBER).await;
    app.graph.add_template("waba-1", order_update());

    let listed = expect_status(
        app.get(&format!("/channels/{channel}/waba/templates"))
            .await,
        200,
    )
    .await;

    assert_eq!(listed["data"][0]["name"], "order_update");
    assert_eq!(listed["data"][0]["status"], "APPROVED");
    // The specification's field name for the category.
    assert_eq!(listed["data"][0]["type"], listed["data"][0]["category"]);
    assert!(listed["data"][0]["type"].is_string(), "{listed}");
}

#[tokio::test]
async fn a_template_is_validated_then_submitted_to_meta() {
    let app = spawn_app().await;
    let channel = app.live_channel(NUMBER).await;
    let path = format!("/channels/{channel}/waba/templates");

    let created = app
        .send_json(Method::POST, &path, &json!({"name": "welcome_back", "type": "MARKETING", "language": "pt_BR", "content": "Olá {{1}}!", "isCarousel": false}))
        .await;
    let created = expect_status(created, 201).await;
    // The whole record: what was submitted, with Meta's id and status.
    let record = &created["data"];
    assert_eq!(record["status"], "PENDING");
    assert_eq!(record["name"], "welcome_back");
    assert_eq!(record["type"], "MARKETING");
    assert_eq!(record["language"], "pt_BR");
    assert!(record["id"].is_string(), "{record}");
    assert_eq!(
        record["components"],
        json!([{"type": "BODY", "text": "Olá {{1}}!"}])
    );
    let listed = expect_status(app.get(&path).await, 200).await;
    assert_eq!(
        listed["data"][0]["components"],
        json!([{"type": "BODY", "text": "Olá {{1}}!"}])
    );

    let invalid = app
        .send_json(Method::POST, &path, &json!({"name": "Bad Name", "type": "PROMO", "language": "pt-BR", "components": [{"type": "body", "text": "x"}], "isCarousel": true}))
        .await;
    let body = expect_error(invalid, 400, "validation_failed").await;
    let paths: Vec<_> = body["details"]
        .as_array()
        .expect("details")
        .iter()
        .map(|d| d["path"].clone())
        .collect();
    assert_eq!(
        paths,
        [
            json!(["name"]),
            json!(["type"]),
            json!(["language"]),
            json!(["components", 0, "type"]),
            json!(["components"]),
            json!(["isCarousel"])
        ]
    );
    assert_eq!(app.graph.subscriptions().len(), 0);
}

#[tokio::test]
async fn metas_refusal_of_a_template_is_a_502_with_its_code() {
    let app = spawn_app().await;
    let channel = app.live_channel(NUMBER).await;
    app.graph.fail_next_template_calls([100]);

    let response = app
        .send_json(Method::POST, &format!("/channels/{channel}/waba/templates"), &json!({"name": "x_1", "type": "UTILITY", "language": "en_US", "components": [{"type": "BODY", "text": "Hi"}]}))
        .await;

    let body = expect_error(response, 502, "upstream_failed").await;
    assert_eq!(body["details"][0]["code"], 100);
    assert!(
        body["details"][0]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("Invalid parameter")
    );
}

#[tokio::test]
async fn a_template_send_upserts_the_identity_sends_and_records_the_rendered_text() {
    let app = spawn_app().await;
    let channel = app.live_channel(NUMBER).await;
    app.graph.add_template("waba-1", order_update());

    let response = app
        .send_json(
            Method::POST,
            &format!("/channels/{channel}/waba/send"),
            &json!({"identity": {"name": "Ana", "phone": "5511987654321"}, "templateId": "order_update", "templateType": "text",
                    "templateLanguage": "en_US", "templateComponents": {"body": [{"type": "text", "text": "Ana"}, {"type": "text", "text": "#42"}]}}),
        )
        .await;

    let body = expect_status(response, 200).await;
    assert_eq!(body["data"]["status"], "sent");
    assert_eq!(
        body["data"]["content"],
        "Hi Ana, your order #42 has shipped."
    );
    let sent = app.graph.sent();
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].to(), "5511987654321");
    assert_eq!(sent[0].body["type"], "template");
    assert_eq!(sent[0].body["template"]["name"], "order_update");
    assert_eq!(sent[0].body["template"]["language"]["code"], "en_US");
    assert_eq!(
        sent[0].body["template"]["components"][0]["parameters"][1]["text"],
        "#42"
    );
    assert_eq!(sent[0].token, TOKEN);
    let identity = expect_status(app.get("/identity/+5511987654321").await, 200).await;
    assert_eq!(identity["data"]["name"], "Ana");
    let stored = app.stored_messages("+5511987654321").await;
    assert_eq!(
        stored,
        [(
            "assistant".to_owned(),
            "Hi Ana, your order #42 has shipped.".to_owned()
        )]
    );
}

#[tokio::test]
async fn bad_sends_are_refused_before_meta_and_meta_refusals_are_502() {
    let app = spawn_app().await;
    let channel = app.live_channel(NUMBER).await;
    app.graph.add_template("waba-1", order_update());
    let path = format!("/channels/{channel}/waba/send");

    let invalid = app
        .send_json(Method::POST, &path, &json!({"identity": {"phone": "12"}, "templateId": "", "templateType": "video", "templateLanguage": "english", "templateComponents": {"body": "x"}}))
        .await;
    let body = expect_error(invalid, 400, "validation_failed").await;
    let paths: Vec<_> = body["details"]
        .as_array()
        .expect("details")
        .iter()
        .map(|d| d["path"].clone())
        .collect();
    assert_eq!(
        paths,
        [
            json!(["identity", "phone"]),
            json!(["templateId"]),
            json!(["templateType"]),
            json!(["templateLanguage"]),
            json!(["templateComponents", "body"])
        ]
    );

    let unknown = app
        .send_json(Method::POST, &path, &json!({"identity": {"phone": "5511987654321"}, "templateId": "nope", "templateType": "text", "templateLanguage": "en_US"}))
        .await;
    let unknown = expect_error(unknown, 400, "validation_failed").await;
    assert_eq!(unknown["details"][0]["path"], json!(["templateId"]));
    assert!(
        unknown["details"][0]["message"]
            .as_str()
            .is_some_and(|m| m.contains("names no template")),
        "{unknown}"
    );
    assert!(app.graph.sent().is_empty());

    app.graph.fail_next_sends([131026]);
    let refused = app
        .send_json(Method::POST, &path, &json!({"identity": {"phone": "5511987654321"}, "templateId": "order_update", "templateType": "text", "templateLanguage": "en_US", "templateComponents": {"body": [{"type": "text", "text": "Ana"}, {"type": "text", "text": "#42"}]}}))
        .await;
    let body = expect_error(refused, 502, "upstream_failed").await;
    assert_eq!(body["details"][0]["code"], 131026);
}

#[tokio::test]
async fn metas_5xx_answers_that_carry_a_code_are_retried_and_4xx_refusals_are_not() {
    let app = spawn_app().await;
    let channel = app.live_channel(NUMBER).await;
    app.graph.add_template("waba-1", order_update());
    let path = format!("/channels/{channel}/waba/send");
    let body = crate::helpers::order_update_send("5511987654321");

    // Meta's own trouble answers 500 with a code (131000, 1): worth another try.
    app.graph.fail_next_sends([131_000, 1]);
    let sent = expect_status(app.send_json(Method::POST, &path, &body).await, 200).await;
    assert!(sent["data"]["platformMessageId"].is_string(), "{sent}");
    assert_eq!(app.graph.rejected().len(), 2);
    assert_eq!(app.graph.sent().len(), 1);

    // A refusal for this message is final at once.
    app.graph.fail_next_sends([100]);
    let refused = expect_error(
        app.send_json(Method::POST, &path, &body).await,
        502,
        "upstream_failed",
    )
    .await;
    assert_eq!(refused["details"][0]["code"], 100);
    assert_eq!(app.graph.rejected().len(), 3);
    assert_eq!(app.graph.sent().len(), 1);
}

#[tokio::test]
async fn a_parameter_value_is_shown_as_given_never_read_as_a_placeholder() {
    let app = spawn_app().await;
    let channel = app.live_channel(NUMBER).await;
    app.graph.add_template("waba-1", order_update());
    let mut body = crate::helpers::order_update_send("5511987654321");
    body["templateComponents"]["body"] =
        json!([{"type": "text", "text": "{{2}}"}, {"type": "text", "text": "SECRET"}]);

    let sent = expect_status(app.send_template(&channel, &body).await, 200).await;

    assert_eq!(
        sent["data"]["content"],
        "Hi {{2}}, your order SECRET has shipped."
    );
}

#[tokio::test]
async fn marketing_lite_channels_send_templates_to_marketing_messages() {
    let app = spawn_app().await;
    let channel = app
        .created("/channels/waba", json!({"name": "Promos", "integration": "mm_lite", "accessToken": TOKEN, "phoneNumberId": "555", "businessId": "waba-1"}))
        .await["id"]
        .as_str()
        .expect("id")
        .to_owned();
    app.graph.add_template("waba-1", order_update());

    let response = app
        .send_json(Method::POST, &format!("/channels/{channel}/waba/send"), &json!({"identity": {"phone": "5511987654321"}, "templateId": "7001", "templateType": "text", "templateLanguage": "en_US", "templateComponents": {"body": [{"type": "text", "text": "Ana"}, {"type": "text", "text": "#42"}]}}))
        .await;

    expect_status(response, 200).await;
    assert_eq!(app.graph.sent()[0].edge, "marketing_messages");
}

#[tokio::test]
async fn a_send_answers_in_camel_case_with_the_first_releases_names_as_aliases() {
    let app = spawn_app().await;
    let channel = app.live_channel(NUMBER).await;
    app.graph.add_template("waba-1", order_update());

    let response = app
        .send_template(
            &channel,
            &crate::helpers::order_update_send("5511987654321"),
        )
        .await;

    let data = expect_status(response, 200).await["data"].clone();
    for camel in [
        "messageId",
        "conversationId",
        "identityId",
        "platformMessageId",
    ] {
        assert!(data[camel].is_string(), "{camel}: {data}");
    }
    // The first release's snake_case aliases ended with this release, as the README said.
    for snake in [
        "message_id",
        "conversation_id",
        "identity_id",
        "platform_message_id",
    ] {
        assert!(data.get(snake).is_none(), "{snake}: {data}");
    }
    assert_eq!(
        data["platformMessageId"],
        app.graph.sent()[0].wamid.as_str()
    );
}

#[tokio::test]
async fn the_template_type_must_match_the_templates_shape() {
    let app = spawn_app().await;
    let channel = app.live_channel(NUMBER).await;
    app.graph.add_template("waba-1", order_update());
    app.graph.add_template(
        "waba-1",
        json!({"name": "gallery", "language": "en_US", "status": "APPROVED", "category": "MARKETING", "id": "7002",
               "components": [{"type": "BODY", "text": "Look"}, {"type": "CAROUSEL", "cards": []}]}),
    );
    let mut body = crate::helpers::order_update_send("5511987654321");
    body["templateType"] = json!("carousel");

    let response = app.send_template(&channel, &body).await;
    let refused = expect_error(response, 400, "validation_failed").await;
    assert_eq!(refused["details"][0]["path"], json!(["templateType"]));
    // Counted before anything reaches Meta: a value for {{1}} only is refused, naming the
    // component and the count it needs.
    let mut short = crate::helpers::order_update_send("5511987654321");
    short["templateComponents"]["body"] = json!([{"type": "text", "text": "Ana"}]);
    let refused = expect_error(
        app.send_template(&channel, &short).await,
        400,
        "validation_failed",
    )
    .await;
    assert_eq!(
        refused["details"][0]["path"],
        json!(["templateComponents", "body"])
    );
    assert!(
        refused["details"][0]["message"]
            .as_str()
            .is_some_and(|m| m.contains("exactly 2")),
        "{refused}"
    );

    body["templateId"] = json!("gallery");
    body["templateComponents"] = json!({});
    expect_status(app.send_template(&channel, &body).await, 200).await;
    body["templateType"] = json!("text");
    let response = app.send_template(&channel, &body).await;
    expect_error(response, 400, "validation_failed").await;
    assert_eq!(app.graph.sent().len(), 1);
}

#[tokio::test]
async fn parameter_values_beyond_metas_limits_are_refused_before_meta() {
    let app = spawn_app().await;
    let channel = app.live_channel(NUMBER).await;
    app.graph.add_template("waba-1", order_update());
    let mut body = crate::helpers::order_update_send("5511987654321");
    body["templateComponents"]["body"][1]["text"] = json!("x".repeat(1_025));
    body["templateComponents"]["header"] = json!([{"type": "text", "text": "h".repeat(61)}]);

    let response = app.send_template(&channel, &body).await;

    let refused = expect_error(response, 400, "validation_failed").await;
    let paths: Vec<&serde_json::Value> = refused["details"]
        .as_array()
        .expect("details")
        .iter()
        .map(|d| &d["path"])
        .collect();
    assert!(
        paths.contains(&&json!(["templateComponents", "body", 1, "text"])),
        "{refused}"
    );
    assert!(
        paths.contains(&&json!(["templateComponents", "header", 0, "text"])),
        "{refused}"
    );
    assert!(app.graph.sent().is_empty());
}

#[tokio::test]
async fn a_template_language_must_be_a_language_code_wherever_it_is_given() {
    let app = spawn_app().await;
    let channel = app.live_channel(NUMBER).await;
    app.graph.add_template("waba-1", order_update());
    app.put_identity("crm-1", json!({"phone": "+351912345678"}))
        .await;

    let campaign = app
        .send_json(
            Method::POST,
            "/campaigns",
            &json!({"channelUid": channel, "name": "Orders", "status": "ACTIVE",
                    "templateName": "order_update", "templateLanguage": "english",
                    "templateParamsStrategy": "USE_DEFAULT"}),
        )
        .await;
    let campaign = expect_error(campaign, 400, "validation_failed").await;
    assert_eq!(campaign["details"][0]["path"], json!(["templateLanguage"]));

    let task = app
        .send_json(
            Method::POST,
            "/scheduled-tasks",
            &json!({"name": "Remind", "task_type": "send_template",
                    "scheduled_at": "2099-01-01T00:00:00Z",
                    "payload": {"identity_id": "crm-1", "channel_id": channel,
                                "template_name": "order_update", "language": "english"}}),
        )
        .await;
    let task = expect_error(task, 400, "validation_failed").await;
    assert_eq!(task["details"][0]["path"], json!(["payload", "language"]));
    assert!(app.graph.sent().is_empty());
}

#[tokio::test]
async fn campaigns_and_tasks_give_exactly_the_parameters_the_template_needs() {
    let app = spawn_app().await;
    let channel = app.live_channel(NUMBER).await;
    // `order_update` has `{{1}}` and `{{2}}`, and no example values at Meta.
    app.graph.add_template("waba-1", order_update());
    app.put_identity("crm-1", json!({"phone": "+351912345678"}))
        .await;

    let defaults = app
        .send_json(
            Method::POST,
            "/campaigns",
            &json!({"channelUid": channel, "name": "Orders", "status": "ACTIVE",
                    "templateName": "order_update", "templateParamsStrategy": "USE_DEFAULT"}),
        )
        .await;
    let defaults = expect_error(defaults, 400, "validation_failed").await;
    let paths: Vec<&serde_json::Value> = defaults["details"]
        .as_array()
        .expect("details")
        .iter()
        .map(|d| &d["path"])
        .collect();
    assert_eq!(
        paths,
        [
            &json!(["templateParameters", "1"]),
            &json!(["templateParameters", "2"])
        ]
    );
    let half = app
        .send_json(
            Method::POST,
            "/campaigns",
            &json!({"channelUid": channel, "name": "Orders", "status": "ACTIVE",
                    "templateName": "order_update",
                    "templateParamsStrategy": "USE_CONTACT_ASSOCIATION",
                    "templateParameters": {"1": "name"}}),
        )
        .await;
    let half = expect_error(half, 400, "validation_failed").await;
    assert_eq!(
        half["details"][0]["path"],
        json!(["templateParameters", "2"])
    );

    let task = |parameters: serde_json::Value| {
        json!({"name": "Remind", "task_type": "send_template",
               "scheduled_at": "2099-01-01T00:00:00Z",
               "payload": {"identity_id": "crm-1", "channel_id": channel,
                           "template_name": "order_update", "language": "en_US",
                           "parameters": parameters}})
    };
    let short = app
        .send_json(Method::POST, "/scheduled-tasks", &task(json!(["Ana"])))
        .await;
    let short = expect_error(short, 400, "validation_failed").await;
    assert_eq!(
        short["details"][0]["path"],
        json!(["payload", "parameters", "body"])
    );
    let unknown = app
        .send_json(Method::POST, "/scheduled-tasks", &{
            let mut body = task(json!(["Ana", "#1"]));
            body["payload"]["template_name"] = json!("nope");
            body
        })
        .await;
    let unknown = expect_error(unknown, 400, "validation_failed").await;
    assert_eq!(
        unknown["details"][0]["path"],
        json!(["payload", "template_name"])
    );
    let fine = app
        .send_json(
            Method::POST,
            "/scheduled-tasks",
            &task(json!(["Ana", "#1"])),
        )
        .await;
    expect_status(fine, 201).await;
    assert!(app.graph.sent().is_empty());
}
