//! Campaigns and flows: records, lists with cursors, refusals, and flows sent to the end on the
//! sandbox and through the fake Graph API (parameters per identity, delivery reports, retries,
//! permanent failures, opt-out, pause/resume/cancel, timeout, fatal errors).

use std::time::Duration;

use parley_testkit::graph::{status_payload, text_message};
use reqwest::Method;
use serde_json::{Value, json};

use crate::helpers::{TestApp, expect_error, expect_status, order_update, spawn_app};

/// A campaign of `channel` sending `template` with `strategy` and `parameters`; answers its uid.
pub async fn campaign(app: &TestApp, channel: &str, name: &str, extra: Value) -> String {
    let mut body = json!({"channelUid": channel, "name": name, "status": "ACTIVE",
                          "templateName": "order_update", "templateParamsStrategy": "USE_DEFAULT"});
    if let (Some(body), Some(extra)) = (body.as_object_mut(), extra.as_object()) {
        body.extend(extra.clone());
    }
    app.created("/campaigns", body).await["uid"]
        .as_str()
        .expect("uid")
        .to_owned()
}

/// A sandbox channel with its own approved `order_update` (example values `Ana`, `#1`).
pub async fn sandbox_with_template(app: &TestApp, name: &str) -> String {
    let channel = app.sandbox_channel(name).await;
    let template = json!({"name": "order_update", "type": "UTILITY", "language": "en_US",
        "components": [{"type": "BODY", "text": "Hi {{1}}, your order {{2}} has shipped.",
                        "example": {"body_text": [["Ana", "#1"]]}}]});
    app.created(&format!("/channels/{channel}/waba/templates"), template)
        .await;
    channel
}

/// Parameters of `order_update` read from each identity.
pub fn per_person() -> Value {
    json!({"templateParamsStrategy": "USE_CONTACT_ASSOCIATION",
           "templateParameters": {"1": "name", "2": "external_id"}})
}

/// Identities with phones `+3519123<i:05>`, external ids `p<i>`; answers their external ids.
pub async fn people(app: &TestApp, count: usize) -> Vec<String> {
    let mut ids = Vec::new();
    for i in 0..count {
        let external = format!("p{i}");
        app.put_identity(
            &external,
            json!({"name": format!("Person {i}"), "phone": format!("+3519123{i:05}"),
                   "metadata": {"first_name": format!("First{i}")}}),
        )
        .await;
        ids.push(external);
    }
    ids
}

async fn flow(app: &TestApp, body: Value) -> Value {
    app.created("/flows", body).await
}

/// The first page of the flow's recipients, as answered.
async fn recipients_of(app: &TestApp, uid: &str) -> Value {
    expect_status(app.get(&format!("/flows/{uid}/recipients")).await, 200).await
}

/// Polls the flow until `check` holds for its record.
pub async fn wait_flow(app: &TestApp, uid: &str, check: impl Fn(&Value) -> bool) -> Value {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let record =
            expect_status(app.get(&format!("/flows/{uid}")).await, 200).await["data"].clone();
        if check(&record) {
            return record;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the flow never matched: {record:#}"
        );
        tokio::time::sleep(Duration::from_millis(30)).await;
    }
}

fn uid(record: &Value) -> String {
    record["uid"].as_str().expect("uid").to_owned()
}

#[tokio::test]
async fn campaigns_are_listed_newest_first_with_filters_and_cursors() {
    let app = spawn_app().await;
    let sandbox = sandbox_with_template(&app, "Sandbox").await;
    let other = sandbox_with_template(&app, "Other").await;
    let ws = app.owner.workspace_id;
    let first = campaign(&app, &sandbox, "Spring sale", json!({})).await;
    let second = campaign(&app, &sandbox, "Summer SALE", json!({"status": "PENDING"})).await;
    let third = campaign(&app, &other, "Welcome", json!({})).await;

    let all = expect_status(app.get(&format!("/campaigns?workspaceId={ws}")).await, 200).await;
    let uids: Vec<&str> = all["data"]
        .as_array()
        .expect("present")
        .iter()
        .map(|c| c["uid"].as_str().expect("present"))
        .collect();
    assert_eq!(uids, [third.as_str(), second.as_str(), first.as_str()]);
    assert_eq!(all["total"], 3);
    assert_eq!(all["nextCursor"], Value::Null);
    assert_eq!(all["prevCursor"], Value::Null);
    let record = &all["data"][2];
    assert_eq!(record["channelUid"], sandbox.as_str());
    assert_eq!(record["templateName"], "order_update");
    assert_eq!(record["templateLanguage"], "en_US");
    assert_eq!(record["templateParamsStrategy"], "USE_DEFAULT");
    assert_eq!(record["workspaceId"], ws);

    let sales = expect_status(
        app.get(&format!("/campaigns?workspaceId={ws}&name=sale"))
            .await,
        200,
    )
    .await;
    assert_eq!(sales["total"], 2);
    let pending = expect_status(
        app.get(&format!("/campaigns?workspaceId={ws}&status=PENDING"))
            .await,
        200,
    )
    .await;
    assert_eq!(pending["data"][0]["uid"], second.as_str());
    assert_eq!(pending["total"], 1);
    let of_other = expect_status(
        app.get(&format!("/campaigns?workspaceId={ws}&channelUid={other}"))
            .await,
        200,
    )
    .await;
    assert_eq!(of_other["data"][0]["uid"], third.as_str());

    // Two per page; a campaign created meanwhile does not shift the next page.
    let page1 = expect_status(
        app.get(&format!("/campaigns?workspaceId={ws}&limit=2"))
            .await,
        200,
    )
    .await;
    assert_eq!(page1["data"].as_array().expect("present").len(), 2);
    assert_eq!(page1["prevCursor"], Value::Null);
    let next = page1["nextCursor"]
        .as_str()
        .expect("a next cursor")
        .to_owned();
    campaign(&app, &sandbox, "Late", json!({})).await;
    let page2 = expect_status(
        app.get(&format!(
            "/campaigns?workspaceId={ws}&limit=2&cursor={next}"
        ))
        .await,
        200,
    )
    .await;
    assert_eq!(page2["data"][0]["uid"], first.as_str());
    assert_eq!(page2["nextCursor"], Value::Null);
    assert_eq!(page2["total"], 4);
    let prev = page2["prevCursor"]
        .as_str()
        .expect("a previous cursor")
        .to_owned();
    let back = expect_status(
        app.get(&format!(
            "/campaigns?workspaceId={ws}&limit=2&cursor={prev}"
        ))
        .await,
        200,
    )
    .await;
    let back_uids: Vec<&str> = back["data"]
        .as_array()
        .expect("present")
        .iter()
        .map(|c| c["uid"].as_str().expect("present"))
        .collect();
    assert_eq!(back_uids, [third.as_str(), second.as_str()]);
    assert!(
        back["prevCursor"].is_string(),
        "the new campaign is before them: {back}"
    );
}

#[tokio::test]
async fn campaign_requests_that_cannot_work_are_refused() {
    let app = spawn_app().await;
    let sandbox = sandbox_with_template(&app, "Sandbox").await;
    let ws = app.owner.workspace_id;
    expect_error(app.get("/campaigns").await, 400, "validation_failed").await;
    expect_error(
        app.get(&format!("/campaigns?workspaceId={}", ws + 1000))
            .await,
        404,
        "not_found",
    )
    .await;
    expect_error(
        app.get(&format!("/campaigns?workspaceId={ws}&limit=101"))
            .await,
        400,
        "validation_failed",
    )
    .await;
    expect_error(
        app.get(&format!("/campaigns?workspaceId={ws}&cursor=bogus"))
            .await,
        400,
        "validation_failed",
    )
    .await;

    let base = json!({"channelUid": sandbox, "name": "Sale", "status": "ACTIVE",
                      "templateName": "order_update", "templateParamsStrategy": "USE_CONTACT_ASSOCIATION"});
    let with = |extra: Value| {
        let mut body = base.clone();
        body.as_object_mut()
            .expect("present")
            .extend(extra.as_object().expect("present").clone());
        body
    };
    let bad_strategy = expect_error(
        app.send_json(
            Method::POST,
            "/campaigns",
            &with(json!({"templateParamsStrategy": "GUESS"})),
        )
        .await,
        400,
        "validation_failed",
    )
    .await;
    assert_eq!(
        bad_strategy["details"][0]["path"],
        json!(["templateParamsStrategy"])
    );
    let bad_expression = expect_error(
        app.send_json(
            Method::POST,
            "/campaigns",
            &with(json!({"templateParameters": {"1": "name, shoe_size"}})),
        )
        .await,
        400,
        "validation_failed",
    )
    .await;
    assert_eq!(
        bad_expression["details"][0]["path"],
        json!(["templateParameters", "1"])
    );
    expect_error(
        app.send_json(Method::POST, "/campaigns", &with(json!({"status": "LIVE"})))
            .await,
        400,
        "validation_failed",
    )
    .await;
    expect_error(
        app.send_json(Method::POST, "/campaigns", &json!({"name": "x"}))
            .await,
        400,
        "validation_failed",
    )
    .await;
    expect_error(
        app.send_json(
            Method::POST,
            "/campaigns",
            &with(json!({"channelUid": uuid::Uuid::now_v7()})),
        )
        .await,
        404,
        "not_found",
    )
    .await;

    // A live channel: the template must exist at Meta, and the parameters must be its own.
    app.graph.add_template("waba-1", order_update());
    let live = app.live_channel("100001").await;
    let missing = expect_error(
        app.send_json(
            Method::POST,
            "/campaigns",
            &with(json!({"channelUid": live, "templateName": "nope"})),
        )
        .await,
        400,
        "validation_failed",
    )
    .await;
    assert_eq!(missing["details"][0]["path"], json!(["templateName"]));
    let foreign = expect_error(
        app.send_json(
            Method::POST,
            "/campaigns",
            &with(json!({"channelUid": live, "templateParameters": {"7": "name"}})),
        )
        .await,
        400,
        "validation_failed",
    )
    .await;
    assert_eq!(
        foreign["details"][0]["path"],
        json!(["templateParameters", "7"])
    );
    let made = campaign(&app, &live, "Live", json!({"templateParameters": {"1": "name", "2": "external_id"}, "templateParamsStrategy": "USE_CONTACT_ASSOCIATION"})).await;
    let changed = expect_error(
        app.send_json(
            Method::PATCH,
            &format!("/campaigns/{made}"),
            &json!({"channelUid": sandbox}),
        )
        .await,
        400,
        "validation_failed",
    )
    .await;
    assert_eq!(changed["details"][0]["path"], json!(["channelUid"]));
    let inactive = expect_status(
        app.send_json(
            Method::PATCH,
            &format!("/campaigns/{made}"),
            &json!({"status": "INACTIVE"}),
        )
        .await,
        200,
    )
    .await;
    assert_eq!(inactive["data"]["status"], "INACTIVE");
    assert_eq!(
        inactive["data"]["templateParameters"],
        json!({"1": "name", "2": "external_id"})
    );

    // Another workspace sees none of it.
    let other = app
        .bootstrap_another("Globex", "Globex HQ", "boss@globex.test")
        .await;
    expect_error(
        app.get_with(&format!("/campaigns/{made}"), &other.api_key)
            .await,
        404,
        "not_found",
    )
    .await;
}

#[tokio::test]
async fn a_sandbox_flow_reaches_every_identity_once_and_completes() {
    let app = spawn_app().await;
    let sandbox = sandbox_with_template(&app, "Sandbox").await;
    let campaign = campaign(&app, &sandbox, "Welcome", json!({})).await;
    let people = people(&app, 3).await;
    // By external id, phone and duplicate: three identities.
    let contacts = json!([people[0], "+351912300001", people[2], people[0]]);
    let created = flow(&app, json!({"channelUid": sandbox, "campaignUid": campaign, "contactUids": contacts,
                                    "configuration": {"pauseBetweenContactsMs": 0, "maxConcurrentMessages": 2}})).await;
    assert_eq!(created["statistics"]["total"], 3);
    assert_eq!(
        created["configuration"]["maxRetries"], 3,
        "defaults filled in: {created}"
    );
    let done = wait_flow(&app, &uid(&created), |f| f["status"] == "completed").await;
    assert_eq!(done["statistics"]["delivered"], 3, "{done}");
    assert_eq!(done["statistics"]["pending"], 0);
    assert!(done["metadata"]["startedAt"].is_string());
    assert!(done["metadata"]["finishedAt"].is_string());

    let recipients = recipients_of(&app, &uid(&created)).await;
    let listed: Vec<(&str, &str)> = recipients["data"]
        .as_array()
        .expect("present")
        .iter()
        .map(|r| {
            (
                r["contactUid"].as_str().expect("present"),
                r["status"].as_str().expect("present"),
            )
        })
        .collect();
    assert_eq!(
        listed,
        [
            (people[0].as_str(), "delivered"),
            ("+351912300001", "delivered"),
            (people[2].as_str(), "delivered")
        ]
    );
    // The template is in each person's conversation, sent once.
    let identity = app.put_identity(&people[1], json!({})).await["id"]
        .as_str()
        .expect("present")
        .to_owned();
    let messages = app.wait_for_messages(&identity, |m| !m.is_empty()).await;
    assert_eq!(messages.len(), 1, "{messages:#?}");
    assert_eq!(
        messages[0]["content"], "Hi Ana, your order #1 has shipped.",
        "USE_DEFAULT fills the template's examples: {messages:#?}"
    );

    let listed = expect_status(
        app.get(&format!("/flows?campaignUid={campaign}&status=completed"))
            .await,
        200,
    )
    .await;
    assert_eq!(listed["total"], 1);
    let by_contact = expect_status(
        app.get(&format!("/flows?contactUid={}", people[1])).await,
        200,
    )
    .await;
    assert_eq!(by_contact["total"], 1);
    let nobody = expect_status(app.get("/flows?contactUid=nobody").await, 200).await;
    assert_eq!(nobody["total"], 0);
}

#[tokio::test]
async fn flow_requests_that_cannot_work_are_refused() {
    let app = spawn_app().await;
    let sandbox = sandbox_with_template(&app, "Sandbox").await;
    let campaign = campaign(&app, &sandbox, "Welcome", json!({})).await;
    let people = people(&app, 1).await;
    let body = |extra: Value| {
        let mut body =
            json!({"channelUid": sandbox, "campaignUid": campaign, "contactUids": [people[0]]});
        body.as_object_mut()
            .expect("present")
            .extend(extra.as_object().expect("present").clone());
        body
    };
    let unknown = expect_error(
        app.send_json(
            Method::POST,
            "/flows",
            &body(json!({"contactUids": [people[0], "ghost", "+351919999999"]})),
        )
        .await,
        400,
        "unknown_contacts",
    )
    .await;
    assert!(
        unknown["message"]
            .as_str()
            .expect("present")
            .contains("ghost"),
        "{unknown}"
    );
    assert_eq!(unknown["details"].as_array().expect("present").len(), 2);
    assert_eq!(unknown["details"][0]["path"], json!(["contactUids", 1]));
    let too_many = expect_error(
        app.send_json(
            Method::POST,
            "/flows",
            &body(json!({"configuration": {"maxConcurrentMessages": 11}})),
        )
        .await,
        400,
        "validation_failed",
    )
    .await;
    assert_eq!(
        too_many["details"][0]["path"],
        json!(["configuration", "maxConcurrentMessages"])
    );
    expect_error(
        app.send_json(Method::POST, "/flows", &body(json!({"contactUids": []})))
            .await,
        400,
        "validation_failed",
    )
    .await;
    expect_error(
        app.send_json(Method::POST, "/flows", &json!({})).await,
        400,
        "validation_failed",
    )
    .await;
    expect_status(
        app.send_json(
            Method::PATCH,
            &format!("/campaigns/{campaign}"),
            &json!({"status": "BLOCKED"}),
        )
        .await,
        200,
    )
    .await;
    expect_error(
        app.send_json(Method::POST, "/flows", &body(json!({})))
            .await,
        409,
        "campaign_not_usable",
    )
    .await;
    expect_error(
        app.get("/flows?status=finished").await,
        400,
        "validation_failed",
    )
    .await;
    expect_error(
        app.get(&format!("/flows/{}", uuid::Uuid::now_v7())).await,
        404,
        "not_found",
    )
    .await;
}

#[tokio::test]
async fn statuses_move_only_as_the_table_allows_and_active_flows_hold_their_campaign_and_channel() {
    let app = spawn_app().await;
    let sandbox = sandbox_with_template(&app, "Sandbox").await;
    let campaign = campaign(&app, &sandbox, "Welcome", json!({})).await;
    let people = people(&app, 4).await;
    // A draft does not start.
    let draft = flow(&app, json!({"channelUid": sandbox, "campaignUid": campaign, "contactUids": people, "status": "draft"})).await;
    assert_eq!(draft["status"], "draft");
    let bad = expect_error(
        app.send_json(
            Method::PATCH,
            &format!("/flows/{}", uid(&draft)),
            &json!({"status": "completed"}),
        )
        .await,
        409,
        "invalid_transition",
    )
    .await;
    assert!(
        bad["message"].as_str().expect("present").contains("draft"),
        "{bad}"
    );

    // Slow pacing, so that the flow is still sending when paused.
    let slow = flow(
        &app,
        json!({"channelUid": sandbox, "campaignUid": campaign, "contactUids": people,
                                 "configuration": {"pauseBetweenContactsMs": 400}}),
    )
    .await;
    let slow_uid = uid(&slow);
    expect_error(
        app.delete(&format!("/flows/{slow_uid}")).await,
        409,
        "flow_active",
    )
    .await;
    expect_error(
        app.delete(&format!("/campaigns/{campaign}")).await,
        409,
        "campaign_has_active_flows",
    )
    .await;
    expect_error(
        app.delete(&format!("/channels/{sandbox}")).await,
        409,
        "channel_has_active_flows",
    )
    .await;
    wait_flow(&app, &slow_uid, |f| f["status"] == "running").await;
    let paused = expect_status(
        app.send_json(
            Method::PATCH,
            &format!("/flows/{slow_uid}"),
            &json!({"status": "paused", "description": "held"}),
        )
        .await,
        200,
    )
    .await;
    assert_eq!(paused["data"]["status"], "paused");
    assert_eq!(paused["data"]["description"], "held");
    // Pausing a paused flow is not a move DESIGN lists.
    expect_error(
        app.send_json(
            Method::PATCH,
            &format!("/flows/{slow_uid}"),
            &json!({"status": "paused"}),
        )
        .await,
        409,
        "invalid_transition",
    )
    .await;
    // Within one pacing step nothing more goes out.
    let before = wait_flow(&app, &slow_uid, |_| true).await["statistics"]["delivered"]
        .as_u64()
        .expect("present");
    tokio::time::sleep(Duration::from_millis(900)).await;
    let after = wait_flow(&app, &slow_uid, |_| true).await;
    assert!(
        after["statistics"]["delivered"].as_u64().expect("present") <= before + 1,
        "{after}"
    );
    assert!(
        after["statistics"]["pending"].as_u64().expect("present") > 0,
        "{after}"
    );
    expect_error(
        app.send_json(
            Method::PATCH,
            &format!("/flows/{slow_uid}"),
            &json!({"status": "completed"}),
        )
        .await,
        409,
        "invalid_transition",
    )
    .await;
    // A paused flow may be deleted? No: it is resumed and then cancelled.
    expect_status(
        app.send_json(
            Method::PATCH,
            &format!("/flows/{slow_uid}"),
            &json!({"status": "running"}),
        )
        .await,
        200,
    )
    .await;
    let cancelled = expect_status(
        app.send_json(
            Method::PATCH,
            &format!("/flows/{slow_uid}"),
            &json!({"status": "cancelled"}),
        )
        .await,
        200,
    )
    .await;
    assert_eq!(cancelled["data"]["status"], "cancelled");
    // Neither another move nor a move to the same state is one of DESIGN's moves.
    for to in ["running", "cancelled"] {
        let refused = expect_error(
            app.send_json(
                Method::PATCH,
                &format!("/flows/{slow_uid}"),
                &json!({"status": to}),
            )
            .await,
            409,
            "invalid_transition",
        )
        .await;
        assert!(
            refused["message"]
                .as_str()
                .is_some_and(|m| m.contains("from cancelled to")),
            "{refused}"
        );
    }
    let settled = wait_flow(&app, &slow_uid, |f| {
        f["statistics"]["pending"].as_u64().is_some()
    })
    .await;
    assert_eq!(settled["status"], "cancelled");

    // The draft is cancelled too; then everything may be deleted.
    expect_status(
        app.send_json(
            Method::PATCH,
            &format!("/flows/{}", uid(&draft)),
            &json!({"status": "cancelled"}),
        )
        .await,
        200,
    )
    .await;
    expect_status(app.delete(&format!("/flows/{slow_uid}")).await, 200).await;
    expect_error(
        app.get(&format!("/flows/{slow_uid}")).await,
        404,
        "not_found",
    )
    .await;
    // The cancelled flow outlives its campaign: its statistics and recipients stay readable.
    let kept = uid(&draft);
    expect_status(app.delete(&format!("/campaigns/{campaign}")).await, 200).await;
    expect_error(
        app.get(&format!("/campaigns/{campaign}")).await,
        404,
        "not_found",
    )
    .await;
    let listed = expect_status(
        app.get(&format!(
            "/campaigns?workspaceId={}",
            app.owner.workspace_id
        ))
        .await,
        200,
    )
    .await;
    assert!(!listed.to_string().contains(&campaign), "{listed}");
    let flow = expect_status(app.get(&format!("/flows/{kept}")).await, 200).await;
    assert_eq!(flow["data"]["campaignUid"], campaign.as_str(), "{flow}");
    assert_eq!(flow["data"]["status"], "cancelled", "{flow}");
    expect_status(app.get(&format!("/flows/{kept}/recipients")).await, 200).await;
    expect_status(app.delete(&format!("/channels/{sandbox}")).await, 200).await;
}

#[tokio::test]
async fn a_live_flow_fills_parameters_per_identity_and_follows_delivery_reports() {
    let app = spawn_app().await;
    app.graph.add_template("waba-1", order_update());
    let live = app.live_channel("100001").await;
    let campaign = campaign(&app, &live, "Orders", json!({"templateParamsStrategy": "USE_CONTACT_ASSOCIATION",
        "templateParameters": {"1": "metadata.first_name, name", "2": "memory.order.id, external_id"}})).await;
    let people = people(&app, 2).await;
    expect_status(
        app.send_json(
            Method::PUT,
            &format!("/memory/from/{}", people[1]),
            &json!({"key": "order.id", "value": "#77"}),
        )
        .await,
        201,
    )
    .await;
    let created = flow(
        &app,
        json!({"channelUid": live, "campaignUid": campaign, "contactUids": people,
                                    "configuration": {"pauseBetweenContactsMs": 0}}),
    )
    .await;
    let sent = app.wait_for_sends(2).await;
    let texts = |i: usize| -> Vec<String> {
        let to = format!("3519123{i:05}");
        let message = sent
            .iter()
            .find(|s| s.to() == to)
            .expect("sent to each person");
        assert_eq!(message.body["type"], "template");
        assert_eq!(message.body["template"]["name"], "order_update");
        message.body["template"]["components"][0]["parameters"]
            .as_array()
            .expect("present")
            .iter()
            .map(|p| p["text"].as_str().expect("present").to_owned())
            .collect()
    };
    assert_eq!(texts(0), ["First0", "p0"]);
    assert_eq!(texts(1), ["First1", "#77"]);
    let running = wait_flow(&app, &uid(&created), |f| f["statistics"]["sent"] == 2).await;
    assert_eq!(
        running["status"], "running",
        "waiting for delivery reports: {running}"
    );

    // Reports move the recipients forward, never back.
    for (message, status) in [
        (&sent[0], "read"),
        (&sent[1], "delivered"),
        (&sent[0], "delivered"),
    ] {
        let payload = status_payload("100001", &message.wamid, status, None);
        assert_eq!(app.webhook(Some(&live), &payload).await, 200);
    }
    let done = wait_flow(&app, &uid(&created), |f| f["status"] == "completed").await;
    // A funnel: both were sent and delivered, one of them read.
    assert_eq!(done["statistics"]["sent"], 2, "{done}");
    assert_eq!(done["statistics"]["delivered"], 2, "{done}");
    assert_eq!(done["statistics"]["read"], 1, "{done}");
    assert_eq!(done["statistics"]["deliveryRate"], 1.0, "{done}");
    assert_eq!(done["statistics"]["readRate"], 0.5, "{done}");
    // The rendered template is in the conversation, with its status.
    let identity = app.put_identity(&people[1], json!({})).await["id"]
        .as_str()
        .expect("present")
        .to_owned();
    let messages = app
        .wait_for_messages(&identity, |m| m.iter().any(|m| m["status"] == "delivered"))
        .await;
    assert_eq!(
        messages[0]["content"],
        "Hi First1, your order #77 has shipped."
    );
}

#[tokio::test]
async fn failures_are_retried_or_final_by_metas_code_and_unconfirmed_sends_time_out() {
    let app = spawn_app().await;
    app.graph.add_template("waba-1", order_update());
    let live = app.live_channel("100001").await;
    let campaign = campaign(&app, &live, "Orders", per_person()).await;
    let people = people(&app, 4).await;
    app.put_identity(&people[3], json!({"opted_out": true}))
        .await;
    // p0: refused for good (131026); p1: stopped marketing (131050, opted out);
    // p2: Meta down once (5xx-like 131000? no: a transient code), then accepted.
    app.graph.fail_next_sends([131_026, 131_050]);
    let created = flow(
        &app,
        json!({"channelUid": live, "campaignUid": campaign, "contactUids": people,
        "configuration": {"pauseBetweenContactsMs": 0, "retryDelayMs": 0, "timeoutMs": 300}}),
    )
    .await;
    let done = wait_flow(&app, &uid(&created), |f| {
        !["queued", "running"].contains(&f["status"].as_str().expect("present"))
    })
    .await;
    assert_eq!(
        done["status"], "timeout",
        "one accepted, never confirmed: {done}"
    );
    assert_eq!(done["statistics"]["failed"], 2, "{done}");
    assert_eq!(done["statistics"]["skipped"], 1, "{done}");
    assert_eq!(done["statistics"]["sent"], 1, "{done}");
    assert_eq!(done["metadata"]["errorCounts"]["131026"], 1, "{done}");
    assert_eq!(done["metadata"]["errorCounts"]["131050"], 1, "{done}");
    assert_eq!(done["metadata"]["errorCounts"]["opted_out"], 1, "{done}");
    assert_eq!(
        done["metadata"]["failures"]
            .as_array()
            .expect("present")
            .len(),
        2,
        "{done}"
    );
    let stopped = app.put_identity(&people[1], json!({})).await;
    assert_eq!(
        stopped["opted_out"], true,
        "131050 opts the person out: {stopped}"
    );
}

#[tokio::test]
async fn a_flows_own_retries_govern_its_sends_and_every_attempt_at_meta_is_counted() {
    let app = spawn_app().await;
    app.graph.add_template("waba-1", order_update());
    let live = app.live_channel("100001").await;
    let campaign = campaign(&app, &live, "Orders", per_person()).await;
    let people = people(&app, 1).await;
    // Meta throttles twice, then takes it: the flow (maxRetries 3) tries again after its
    // retryDelayMs; the channel adds no attempts of its own to a flow's send.
    app.graph.fail_next_sends([130_429, 130_429]);
    let created = flow(
        &app,
        json!({"channelUid": live, "campaignUid": campaign, "contactUids": people.clone(),
        "configuration": {"pauseBetweenContactsMs": 0, "retryDelayMs": 50, "timeoutMs": 0}}),
    )
    .await;
    let done = wait_flow(&app, &uid(&created), |f| {
        f["status"] != "queued" && f["status"] != "running"
    })
    .await;
    assert_eq!(done["statistics"]["sent"], 1, "{done}");
    assert_eq!(done["statistics"]["retries"], 2, "{done}");
    assert_eq!(app.graph.rejected().len() + app.graph.sent().len(), 3);
    let recipients = recipients_of(&app, &uid(&created)).await;
    assert_eq!(recipients["data"][0]["attempts"], 3);
    // The success does not keep the throttle it came through.
    assert_eq!(recipients["data"][0]["error"], Value::Null, "{recipients}");

    // maxRetries 0: one attempt at Meta, counted, and no more.
    let campaign = crate::flows::campaign(&app, &live, "Orders again", per_person()).await;
    app.graph.fail_next_sends([130_429]);
    let before = app.graph.rejected().len() + app.graph.sent().len();
    let created = flow(
        &app,
        json!({"channelUid": live, "campaignUid": campaign, "contactUids": people,
        "configuration": {"pauseBetweenContactsMs": 0, "maxRetries": 0, "timeoutMs": 0}}),
    )
    .await;
    let done = wait_flow(&app, &uid(&created), |f| {
        f["status"] != "queued" && f["status"] != "running"
    })
    .await;
    assert_eq!(done["statistics"]["failed"], 1, "{done}");
    assert_eq!(done["statistics"]["retries"], 0, "{done}");
    assert_eq!(
        app.graph.rejected().len() + app.graph.sent().len(),
        before + 1
    );
    let recipients = recipients_of(&app, &uid(&created)).await;
    assert_eq!(recipients["data"][0]["attempts"], 1, "{recipients}");
}

#[tokio::test]
async fn a_skipped_recipient_made_no_attempt_and_configuration_and_ids_are_read_as_designed() {
    let app = spawn_app().await;
    app.graph.add_template("waba-1", order_update());
    let live = app.live_channel("100001").await;
    let campaign = campaign(&app, &live, "Orders", per_person()).await;
    let people = people(&app, 1).await;
    app.put_identity(&people[0], json!({"opted_out": true}))
        .await;

    // A malformed id is named by its own field.
    let bad = json!({"channelUid": "not-a-uuid", "campaignUid": campaign, "contactUids": people});
    let error = expect_error(
        app.send_json(Method::POST, "/flows", &bad).await,
        400,
        "validation_failed",
    )
    .await;
    assert_eq!(
        error["details"][0]["path"],
        json!(["channelUid"]),
        "{error}"
    );

    // An unknown configuration field is ignored, as unknown fields are everywhere.
    let created = flow(
        &app,
        json!({"channelUid": live, "campaignUid": campaign, "contactUids": people,
        "configuration": {"pauseBetweenContactsMs": 0, "speed": 3, "timeoutMs": 0}}),
    )
    .await;
    wait_flow(&app, &uid(&created), |f| {
        f["status"] != "queued" && f["status"] != "running"
    })
    .await;
    let recipients = recipients_of(&app, &uid(&created)).await;
    assert_eq!(recipients["data"][0]["status"], "skipped", "{recipients}");
    assert_eq!(recipients["data"][0]["attempts"], 0, "{recipients}");
}

#[tokio::test]
async fn revoked_credentials_end_the_flow_in_error() {
    let app = spawn_app().await;
    app.graph.add_template("waba-1", order_update());
    let live = app.live_channel("100001").await;
    let campaign = campaign(&app, &live, "Orders", per_person()).await;
    let people = people(&app, 3).await;
    app.graph.fail_next_sends([190]);
    let created = flow(
        &app,
        json!({"channelUid": live, "campaignUid": campaign, "contactUids": people,
        "configuration": {"pauseBetweenContactsMs": 0}}),
    )
    .await;
    let done = wait_flow(&app, &uid(&created), |f| f["status"] == "error").await;
    assert!(
        done["metadata"]["reason"]
            .as_str()
            .expect("present")
            .contains("190"),
        "{done}"
    );
    assert_eq!(app.graph.sent().len(), 0);
}

#[tokio::test]
async fn only_approved_templates_make_campaigns_and_a_template_paused_since_ends_the_flow() {
    let app = spawn_app().await;
    let live = app.live_channel("100001").await;
    for (name, status) in [("under_review", "PENDING"), ("refused", "REJECTED")] {
        let mut template = order_update();
        template["name"] = json!(name);
        template["status"] = json!(status);
        app.graph.add_template("waba-1", template);
        let body = json!({"channelUid": live, "name": name, "status": "ACTIVE",
                          "templateName": name, "templateParamsStrategy": "USE_DEFAULT"});
        let refused = expect_error(
            app.send_json(Method::POST, "/campaigns", &body).await,
            400,
            "validation_failed",
        )
        .await;
        assert_eq!(
            refused["details"][0]["path"],
            json!(["templateName"]),
            "{refused}"
        );
        assert!(refused.to_string().contains(status), "{refused}");
    }

    // Approved when the campaign was made, paused by Meta before the flow starts.
    app.graph.add_template("waba-1", order_update());
    let campaign = campaign(&app, &live, "Orders", per_person()).await;
    app.graph
        .set_template_status("waba-1", "order_update", "PAUSED");
    let people = people(&app, 2).await;
    let created = flow(
        &app,
        json!({"channelUid": live, "campaignUid": campaign, "contactUids": people,
        "configuration": {"pauseBetweenContactsMs": 0}}),
    )
    .await;
    let done = wait_flow(&app, &uid(&created), |f| f["status"] == "error").await;
    let reason = done["metadata"]["reason"].as_str().unwrap_or_default();
    assert!(reason.contains("PAUSED"), "{done}");
    assert_eq!(app.graph.sent().len(), 0);
}

#[tokio::test]
async fn a_stop_word_opts_the_person_out_with_a_confirmation_instead_of_the_assistant() {
    let app = spawn_app().await;
    let live = app.live_channel("100001").await;
    let payload = text_message("100001", "351912345699", "Bea", "wamid.stop-1", "Stop");
    assert_eq!(app.webhook(Some(&live), &payload).await, 200);
    let sent = app.wait_for_sends(1).await;
    assert!(
        sent[0]
            .text()
            .expect("present")
            .contains("not receive campaign messages"),
        "{:?}",
        sent[0].body
    );
    // A re-delivery answers nothing more.
    assert_eq!(app.webhook(Some(&live), &payload).await, 200);
    let person = app.put_identity("+351912345699", json!({})).await;
    assert_eq!(person["opted_out"], true, "{person}");
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(app.graph.sent().len(), 1);
    assert!(
        app.model.requests().is_empty(),
        "the assistant was not asked"
    );
    // They may be opted in again.
    let back = app
        .put_identity("+351912345699", json!({"opted_out": false}))
        .await;
    assert_eq!(back["opted_out"], false);
}

#[tokio::test]
async fn a_sandbox_channel_keeps_templates_of_its_own() {
    let app = spawn_app().await;
    let channel = sandbox_with_template(&app, "Sandbox").await;
    let listed = expect_status(
        app.get(&format!("/channels/{channel}/waba/templates"))
            .await,
        200,
    )
    .await;
    assert_eq!(listed["data"][0]["name"], "order_update");
    assert_eq!(listed["data"][0]["status"], "APPROVED");
    let again = json!({"name": "order_update", "type": "UTILITY", "language": "en_US",
                       "components": [{"type": "BODY", "text": "Hi"}]});
    let refused = expect_status(
        app.send_json(
            Method::POST,
            &format!("/channels/{channel}/waba/templates"),
            &again,
        )
        .await,
        502,
    )
    .await;
    assert_eq!(refused["details"][0]["code"], 2_388_024, "{refused}");
    // The send endpoint renders it like Meta's.
    let sent = expect_status(
        app.send_template(
            &channel,
            &json!({"identity": {"name": "Bea", "phone": "+351912345688"}, "templateId": "order_update",
                    "templateType": "text", "templateLanguage": "en_US",
                    "templateComponents": {"body": [{"type": "text", "text": "Bea"}, {"type": "text", "text": "#9"}]}}),
        )
        .await,
        200,
    )
    .await;
    assert_eq!(
        sent["data"]["content"],
        "Hi Bea, your order #9 has shipped."
    );
    // Another channel does not have it.
    let other = app.sandbox_channel("Bare").await;
    let bare = expect_status(
        app.get(&format!("/channels/{other}/waba/templates")).await,
        200,
    )
    .await;
    assert_eq!(bare["data"], json!([]));
}

#[tokio::test]
async fn a_flow_within_metas_limits_is_paced_by_the_channel_and_completes_on_reports() {
    let app = crate::helpers::spawn_app_with(|settings| settings.whatsapp.rate_per_sec = 20).await;
    app.graph.add_template("waba-1", order_update());
    // Meta's count per second, with room for jitter; a burst at the start of a second would
    // still go over it.
    app.graph.limit_per_second(25);
    app.graph.report_statuses(
        &format!("{}/webhooks/waba", app.address),
        crate::helpers::APP_SECRET,
        Duration::from_millis(20),
        &["delivered", "read"],
    );
    let live = app.live_channel("100001").await;
    let campaign = campaign(&app, &live, "Orders", per_person()).await;
    let people = people(&app, 30).await;
    let created = flow(
        &app,
        json!({"channelUid": live, "campaignUid": campaign, "contactUids": people,
               "configuration": {"pauseBetweenContactsMs": 0, "maxConcurrentMessages": 10}}),
    )
    .await;
    let done = wait_flow(&app, &uid(&created), |f| {
        f["status"] != "queued" && f["status"] != "running"
    })
    .await;
    assert_eq!(done["status"], "completed", "{done}");
    // A flow completes once every template is confirmed delivered; the last "read", posted
    // right after its "delivered", may be applied just after that.
    let read = wait_flow(&app, &uid(&created), |f| f["statistics"]["read"] == 30).await;
    assert_eq!(read["status"], "completed", "{read}");
    assert_eq!(app.graph.sent().len(), 30);
    assert!(
        app.graph.rejected().is_empty(),
        "the channel kept under Meta's rate: {:?}",
        app.graph
            .rejected()
            .iter()
            .map(|(_, code)| code)
            .collect::<Vec<_>>()
    );
}

/// An unpaced flow fills every free slot of `maxConcurrentMessages` at once (its claims go
/// together) and never has more sends than that at Meta.
#[tokio::test]
async fn an_unpaced_flow_keeps_its_sends_in_flight_at_its_concurrency_and_never_over() {
    let app =
        crate::helpers::spawn_app_with(|settings| settings.whatsapp.rate_per_sec = 1_000).await;
    app.graph.add_template("waba-1", order_update());
    // Each answer takes long enough that sends overlap whenever the runner lets them.
    app.graph.set_latency(Duration::from_millis(40));
    app.graph.report_statuses(
        &format!("{}/webhooks/waba", app.address),
        crate::helpers::APP_SECRET,
        Duration::from_millis(5),
        &["delivered"],
    );
    let live = app.live_channel("100001").await;
    let campaign = campaign(&app, &live, "Orders", per_person()).await;
    let people = people(&app, 24).await;
    let created = flow(
        &app,
        json!({"channelUid": live, "campaignUid": campaign, "contactUids": people,
               "configuration": {"pauseBetweenContactsMs": 0, "maxConcurrentMessages": 4}}),
    )
    .await;
    let done = wait_flow(&app, &uid(&created), |f| {
        f["status"] != "queued" && f["status"] != "running"
    })
    .await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(done["statistics"]["delivered"], 24, "{done}");
    assert_eq!(app.graph.sent().len(), 24);
    assert_eq!(app.graph.most_sends_in_flight(), 4);
}

/// Meta's delivery reports can overtake its answer to the send: they name a message whose id
/// Parley has not recorded yet. They are applied once it is, and the flow still completes.
#[tokio::test]
async fn delivery_reports_that_overtake_the_sends_answer_are_applied() {
    let app = spawn_app().await;
    app.graph.add_template("waba-1", order_update());
    app.graph.answer_sends_after(Duration::from_millis(300));
    app.graph.report_statuses(
        &format!("{}/webhooks/waba", app.address),
        crate::helpers::APP_SECRET,
        Duration::from_millis(10),
        &["delivered", "read"],
    );
    let live = app.live_channel("100001").await;
    let campaign = campaign(&app, &live, "Orders", per_person()).await;
    let people = people(&app, 3).await;
    let created = flow(
        &app,
        json!({"channelUid": live, "campaignUid": campaign, "contactUids": people,
               "configuration": {"pauseBetweenContactsMs": 0, "maxConcurrentMessages": 3}}),
    )
    .await;
    let done = wait_flow(&app, &uid(&created), |f| {
        f["status"] != "queued" && f["status"] != "running"
    })
    .await;
    assert_eq!(done["status"], "completed", "{done}");
    // A flow completes once every recipient is delivered; each `read` behind its `delivered`
    // may still be on its way through the inbound pipeline then.
    wait_flow(&app, &uid(&created), |f| f["statistics"]["read"] == 3).await;
}

#[tokio::test]
async fn creating_a_flow_twice_with_one_idempotency_key_creates_it_once() {
    let app = spawn_app().await;
    let channel = sandbox_with_template(&app, "Sandbox").await;
    let campaign = campaign(&app, &channel, "Welcome", json!({})).await;
    let people = people(&app, 2).await;
    let body = json!({"channelUid": channel, "campaignUid": campaign, "contactUids": people,
                      "configuration": {"pauseBetweenContactsMs": 0}});
    let post = || {
        app.request(Method::POST, "/flows", Some(&app.owner.api_key))
            .header("Idempotency-Key", "monday-orders")
            .json(&body)
            .send()
    };
    let first = expect_status(post().await.expect("send"), 201).await;
    let again = expect_status(post().await.expect("send"), 201).await;
    assert_eq!(first["data"]["uid"], again["data"]["uid"]);
    let listed = expect_status(app.get("/flows").await, 200).await;
    assert_eq!(listed["total"], 1, "{listed}");
    let other = app
        .request(Method::POST, "/flows", Some(&app.owner.api_key))
        .header("Idempotency-Key", "monday-orders")
        .json(&json!({"channelUid": channel, "campaignUid": campaign, "contactUids": [people[0]]}))
        .send()
        .await
        .expect("send");
    expect_error(other, 409, "idempotency_key_reused").await;
}

#[tokio::test]
async fn a_failed_delivery_report_fails_its_recipient_with_metas_code() {
    let app = spawn_app().await;
    app.graph.add_template("waba-1", order_update());
    let live = app.live_channel("100001").await;
    let campaign = campaign(&app, &live, "Orders", per_person()).await;
    let people = people(&app, 2).await;
    let created = flow(
        &app,
        json!({"channelUid": live, "campaignUid": campaign, "contactUids": people,
               "configuration": {"pauseBetweenContactsMs": 0}}),
    )
    .await;
    let sent = app.wait_for_sends(2).await;
    let failed = status_payload("100001", &sent[0].wamid, "failed", Some(131_026));
    assert_eq!(app.webhook(Some(&live), &failed).await, 200);
    let delivered = status_payload("100001", &sent[1].wamid, "delivered", None);
    assert_eq!(app.webhook(Some(&live), &delivered).await, 200);
    // A late "delivered" for the failed one does not bring it back.
    let late = status_payload("100001", &sent[0].wamid, "delivered", None);
    assert_eq!(app.webhook(Some(&live), &late).await, 200);
    let done = wait_flow(&app, &uid(&created), |f| {
        f["status"] != "queued" && f["status"] != "running"
    })
    .await;
    assert_eq!(done["status"], "partial_completed", "{done}");
    assert_eq!(done["statistics"]["failed"], 1, "{done}");
    assert_eq!(done["statistics"]["delivered"], 1, "{done}");
    // Meta accepted both; one was reported failed after.
    assert_eq!(done["statistics"]["sent"], 2, "{done}");
    assert_eq!(done["statistics"]["deliveryRate"], 0.5, "{done}");
    assert_eq!(done["metadata"]["errorCounts"]["131026"], 1, "{done}");
    assert_eq!(done["metadata"]["failures"][0]["code"], 131_026, "{done}");
}
