//! MCP servers: their records (headers sealed and masked), attaching them to assistants, and
//! conversations calling their tools over both transports, including tools that fail, hang or
//! answer too much.

use parley_testkit::{FakeMcp, FakeToolCall, McpFlavour, Reply, ToolBehaviour};
use reqwest::Method;
use serde_json::{Value, json};

use crate::helpers::{TestApp, expect_error, expect_status, spawn_app, spawn_app_with};

/// A header value no answer may ever show.
const SECRET: &str = "mcp-key-7f3a9c21";

/// Registers `fake` as `name` with an `Authorization` header carrying [`SECRET`].
async fn register(app: &TestApp, fake: &FakeMcp, name: &str) -> String {
    let data = app
        .created(
            "/workspace/mcps",
            json!({
                "name": name,
                "transport": fake.transport(),
                "url": fake.url(),
                "headers": [{"key": "Authorization", "value": format!("Bearer {SECRET}")}],
            }),
        )
        .await;
    data["mcp_id"].as_str().expect("mcp_id").to_owned()
}

async fn attach(app: &TestApp, assistant: &str, mcp: &str) -> reqwest::Response {
    app.send_json(
        Method::PUT,
        &format!("/assistant/{assistant}/mcp/{mcp}"),
        &json!({}),
    )
    .await
}

/// An assistant on a sandbox channel with `fake` (one tool, `lookup`) attached as `orders`;
/// answers `(assistant, channel, mcp_id)`.
async fn assistant_with_tools(app: &TestApp, fake: &FakeMcp) -> (String, String, String) {
    fake.tool("lookup", "Looks an order up");
    let (assistant, channel) = app.chat_channel("You help with orders.", json!({})).await;
    let mcp = register(app, fake, "orders").await;
    expect_status(attach(app, &assistant, &mcp).await, 200).await;
    app.put_identity("crm-1", json!({"phone": "+351912345678"}))
        .await;
    (assistant, channel, mcp)
}

/// Names of the tools offered in the model's request `index`.
fn offered_tools(app: &TestApp, index: usize) -> Vec<String> {
    app.model.requests()[index]["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .filter_map(|t| t["function"]["name"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test]
async fn a_registered_server_never_shows_its_header_values() {
    let app = spawn_app().await;
    let fake = FakeMcp::start(McpFlavour::Http).await;
    fake.tool("lookup", "Looks an order up");
    let mut answers = Vec::new();

    let created = app
        .send_json(
            Method::POST,
            "/workspace/mcps",
            &json!({
                "name": "orders",
                "transport": "http",
                "url": fake.url(),
                "headers": [
                    {"key": "Authorization", "value": format!("Bearer {SECRET}")},
                    {"key": "X-Tenant", "value": SECRET},
                ],
            }),
        )
        .await;
    let created = expect_status(created, 201).await;
    answers.push(created.to_string());
    let data = &created["data"];
    let id = data["mcp_id"].as_str().expect("mcp_id").to_owned();
    assert_eq!(data["id"], data["mcp_id"]);
    assert_eq!(data["name"], "orders");
    assert_eq!(data["transport"], "http");
    assert_eq!(data["url"], fake.url());
    assert_eq!(
        data["headers"],
        json!([{"key": "Authorization", "value": "****"}, {"key": "X-Tenant", "value": "****"}])
    );
    assert!(data["created_at"].is_string() && data["updated_at"].is_string());

    let listed = expect_status(app.get("/workspace/mcps").await, 200).await;
    assert_eq!(listed["pagination"]["total"], 1);
    assert_eq!(listed["data"][0]["id"], id.as_str());
    answers.push(listed.to_string());
    let one = expect_status(app.get(&format!("/workspace/mcps/{id}")).await, 200).await;
    assert_eq!(one["data"]["headers"][1]["value"], "****");
    answers.push(one.to_string());
    let renamed = app
        .send_json(
            Method::PATCH,
            &format!("/workspace/mcps/{id}"),
            &json!({"name": "order-desk"}),
        )
        .await;
    let renamed = expect_status(renamed, 200).await;
    assert_eq!(renamed["data"]["name"], "order-desk");
    assert_eq!(renamed["data"]["headers"].as_array().map(Vec::len), Some(2));
    answers.push(renamed.to_string());
    let tools = expect_status(app.get(&format!("/workspace/mcps/{id}/tools")).await, 200).await;
    assert_eq!(tools["data"][0]["name"], "lookup");
    assert_eq!(tools["data"][0]["description"], "Looks an order up");
    assert_eq!(tools["data"][0]["input_schema"]["type"], "object");
    answers.push(tools.to_string());
    // The server got the real value.
    let received = fake.requests();
    assert_eq!(
        received[0].header("authorization"),
        Some(format!("Bearer {SECRET}").as_str())
    );
    assert_eq!(received[0].header("x-tenant"), Some(SECRET));

    let replaced = app
        .send_json(
            Method::PATCH,
            &format!("/workspace/mcps/{id}"),
            &json!({"headers": [{"key": "X-Other", "value": SECRET}]}),
        )
        .await;
    let replaced = expect_status(replaced, 200).await;
    assert_eq!(
        replaced["data"]["headers"],
        json!([{"key": "X-Other", "value": "****"}])
    );
    answers.push(replaced.to_string());

    for answer in &answers {
        assert!(!answer.contains(SECRET), "the secret leaked: {answer}");
    }
    // Sealed at rest too.
    let stored = raw_headers(&app, &id).await;
    assert!(!stored.contains(SECRET), "stored in clear: {stored}");

    expect_status(app.delete(&format!("/workspace/mcps/{id}")).await, 200).await;
    expect_error(
        app.get(&format!("/workspace/mcps/{id}")).await,
        404,
        "not_found",
    )
    .await;
}

async fn raw_headers(app: &TestApp, id: &str) -> String {
    use sea_orm::EntityTrait;
    let db = app.db().await;
    let row = parley_persistence::entities::mcp_server::Entity::find_by_id(
        id.parse::<uuid::Uuid>().expect("uuid"),
    )
    .one(&db)
    .await
    .expect("query")
    .expect("row");
    row.headers.to_string()
}

#[tokio::test]
async fn a_tenant_cannot_set_headers_parley_or_the_client_sets() {
    let app = spawn_app().await;
    for (index, name) in [
        "X-Parley-Workspace-Id",
        "x-parley-identity-id",
        "Content-Length",
        "Host",
        "Transfer-Encoding",
        "Connection",
        "Mcp-Session-Id",
    ]
    .into_iter()
    .enumerate()
    {
        let headers: Vec<Value> =
            std::iter::repeat_n(json!({"key": "X-Api-Key", "value": "k"}), index)
                .chain([json!({"key": name, "value": "999"})])
                .collect();
        let body = json!({"name": "shared", "transport": "http",
                          "url": "http://127.0.0.1:9/mcp", "headers": headers});
        let response = app.send_json(Method::POST, "/workspace/mcps", &body).await;
        let error = expect_error(response, 400, "validation_failed").await;
        assert_eq!(
            error["details"][0]["path"],
            json!(["headers", index, "key"]),
            "{name}"
        );
    }
    let listed = expect_status(app.get("/workspace/mcps").await, 200).await;
    assert_eq!(listed["pagination"]["total"], 0, "nothing was registered");
}

#[tokio::test]
async fn credentials_in_a_url_are_refused_and_query_values_are_masked() {
    let app = spawn_app().await;
    let with_userinfo = json!({"name": "a", "transport": "http",
                               "url": "http://user:pass@127.0.0.1:9/mcp"});
    let response = app
        .send_json(Method::POST, "/workspace/mcps", &with_userinfo)
        .await;
    let error = expect_error(response, 400, "validation_failed").await;
    assert_eq!(error["details"][0]["path"], json!(["url"]));
    assert!(!error.to_string().contains("pass@"), "{error}");

    let fake = FakeMcp::start(McpFlavour::Http).await;
    let url = format!("{}?api_key={SECRET}&team=7", fake.url());
    let body = json!({"name": "keyed", "transport": "http", "url": url});
    let created = expect_status(
        app.send_json(Method::POST, "/workspace/mcps", &body).await,
        201,
    )
    .await;
    let shown = created["data"]["url"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(!shown.contains(SECRET), "{shown}");
    assert!(shown.ends_with("?api_key=****&team=****"), "{shown}");
    let id = created["data"]["id"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let read = expect_status(app.get(&format!("/workspace/mcps/{id}")).await, 200).await;
    assert!(!read.to_string().contains(SECRET), "{read}");
}

/// What attaching a server at `url` answers when it cannot be reached.
async fn unreachable_message(app: &TestApp, url: &str) -> String {
    let worker = app.worker("Support").await;
    let assistant = app.assistant(&worker, "Ana").await;
    let body = json!({"name": "tools", "transport": "http", "url": url});
    let id = app.created("/workspace/mcps", body).await["id"]
        .as_str()
        .expect("id")
        .to_owned();
    let error = expect_error(attach(app, &assistant, &id).await, 502, "mcp_unreachable").await;
    error["message"].as_str().unwrap_or_default().to_owned()
}

#[tokio::test]
async fn tenant_urls_cannot_reach_inside_the_machine_and_a_refusal_reads_like_a_closed_port() {
    // No exception for loopback here: the policy as a production server runs it.
    let app = spawn_app_with(|s| s.egress.allow = String::new()).await;
    let fake = FakeMcp::start(McpFlavour::Http).await;
    fake.tool("lookup", "Looks an order up");
    let port = fake
        .url()
        .rsplit(':')
        .next()
        .and_then(|rest| rest.split('/').next())
        .unwrap_or_default()
        .to_owned();

    // A literal inside address, in any spelling, is refused at registration.
    for host in [
        "127.0.0.1",
        "127.0.0.2",
        "[::1]",
        "0x7f000002",
        "127.2",
        "[::ffff:127.0.0.1]",
    ] {
        let body = json!({"name": "inside", "transport": "http",
                          "url": format!("http://{host}:{port}/mcp")});
        let response = app.send_json(Method::POST, "/workspace/mcps", &body).await;
        let error = expect_error(response, 400, "validation_failed").await;
        assert_eq!(
            error["details"][0]["path"],
            json!(["url"]),
            "{host}: {error}"
        );
    }

    // A name is checked where it leads, when connecting: refused, an open port of a live server
    // answers exactly as a closed port does on a server that may reach loopback.
    let refused = unreachable_message(&app, &format!("http://localhost:{port}/mcp")).await;
    let allowed = spawn_app().await;
    let closed = unreachable_message(&allowed, "http://127.0.0.1:9/mcp").await;
    assert_eq!(refused, closed);
    assert!(fake.requests().is_empty(), "the fake was reached");
}

#[tokio::test]
async fn invalid_registrations_are_refused_naming_the_field() {
    let app = spawn_app().await;
    let headers: Vec<Value> = (0..21)
        .map(|i| json!({"key": format!("X-H{i}"), "value": "v"}))
        .collect();
    let cases = [
        (
            json!({"name": "a", "transport": "grpc", "url": "http://127.0.0.1:9/mcp"}),
            json!(["transport"]),
        ),
        (
            json!({"name": "a", "url": "http://127.0.0.1:9/mcp"}),
            json!(["transport"]),
        ),
        (
            json!({"name": "a", "transport": "http", "url": "ftp://example.com/mcp"}),
            json!(["url"]),
        ),
        (
            json!({"name": "a", "transport": "http", "url": "not a url"}),
            json!(["url"]),
        ),
        (
            json!({"transport": "http", "url": "http://127.0.0.1:9/mcp"}),
            json!(["name"]),
        ),
        (json!({"name": "a", "transport": "http"}), json!(["url"])),
        (
            json!({"name": "a", "transport": "http", "url": "http://127.0.0.1:9/mcp",
                   "headers": [{"key": "bad header", "value": "v"}]}),
            json!(["headers", 0, "key"]),
        ),
        (
            json!({"name": "a", "transport": "http", "url": "http://127.0.0.1:9/mcp",
                   "headers": [{"key": "X-Ok", "value": "line\nbreak"}]}),
            json!(["headers", 0, "value"]),
        ),
        (
            json!({"name": "a", "transport": "http", "url": "http://127.0.0.1:9/mcp",
                   "headers": headers}),
            json!(["headers"]),
        ),
    ];
    for (body, path) in cases {
        let response = app.send_json(Method::POST, "/workspace/mcps", &body).await;
        let error = expect_error(response, 400, "validation_failed").await;
        assert_eq!(error["details"][0]["path"], path, "{body} -> {error}");
    }
    let listed = expect_status(app.get("/workspace/mcps").await, 200).await;
    assert_eq!(listed["pagination"]["total"], 0, "nothing was registered");

    // A PATCH is checked the same way.
    let fake = FakeMcp::start(McpFlavour::Http).await;
    let id = register(&app, &fake, "orders").await;
    let response = app
        .send_json(
            Method::PATCH,
            &format!("/workspace/mcps/{id}"),
            &json!({"transport": "sse"}),
        )
        .await;
    let error = expect_error(response, 400, "validation_failed").await;
    assert_eq!(error["details"][0]["path"], json!(["transport"]));
}

#[tokio::test]
async fn attaching_lists_the_tools_and_an_unreachable_server_is_a_502() {
    let app = spawn_app().await;
    let fake = FakeMcp::start(McpFlavour::Http).await;
    fake.tool("lookup", "Looks an order up");
    let worker = app.worker("Support").await;
    let assistant = app.assistant(&worker, "Ana").await;
    let mcp = register(&app, &fake, "orders").await;

    let attached = expect_status(attach(&app, &assistant, &mcp).await, 200).await;
    assert_eq!(attached["data"]["tools"][0]["name"], "lookup");
    // Attaching twice is fine.
    expect_status(attach(&app, &assistant, &mcp).await, 200).await;
    let tools = expect_status(
        app.get(&format!("/assistant/{assistant}/mcp/tools")).await,
        200,
    )
    .await;
    assert_eq!(
        tools["data"],
        json!([{
            "mcp_id": mcp,
            "server": "orders",
            "name": "lookup",
            "exposed_name": "orders__lookup",
            "description": "Looks an order up",
            "input_schema": tools["data"][0]["input_schema"].clone(),
        }])
    );

    // A failing server: listing names it, attaching another is refused.
    fake.fail_listing(true);
    let error = expect_error(
        app.get(&format!("/assistant/{assistant}/mcp/tools")).await,
        502,
        "mcp_unreachable",
    )
    .await;
    assert!(
        error["details"][0]["message"]
            .as_str()
            .is_some_and(|m| m.contains("orders")),
        "{error}"
    );
    expect_error(
        app.get(&format!("/workspace/mcps/{mcp}/tools")).await,
        502,
        "mcp_unreachable",
    )
    .await;
    let dead = app
        .created(
            "/workspace/mcps",
            json!({"name": "gone", "transport": "streamable-http", "url": "http://127.0.0.1:9/mcp"}),
        )
        .await;
    let dead = dead["mcp_id"].as_str().expect("mcp_id");
    let error = expect_error(attach(&app, &assistant, dead).await, 502, "mcp_unreachable").await;
    assert!(
        error["message"]
            .as_str()
            .is_some_and(|m| m.contains("gone")),
        "{error}"
    );

    // Detaching is idempotent and empties the list.
    fake.fail_listing(false);
    for _ in 0..2 {
        let detached = app
            .delete(&format!("/assistant/{assistant}/mcp/{mcp}"))
            .await;
        expect_status(detached, 200).await;
    }
    let tools = expect_status(
        app.get(&format!("/assistant/{assistant}/mcp/tools")).await,
        200,
    )
    .await;
    assert_eq!(tools["data"], json!([]));

    // Unknown ids are 404, malformed ones 400.
    let unknown = "0194a000-0000-7000-8000-000000000000";
    expect_error(attach(&app, &assistant, unknown).await, 404, "not_found").await;
    expect_error(attach(&app, unknown, &mcp).await, 404, "not_found").await;
    expect_error(
        attach(&app, &assistant, "nope").await,
        400,
        "validation_failed",
    )
    .await;
}

#[tokio::test]
async fn another_workspace_cannot_see_use_or_attach_a_server() {
    let app = spawn_app().await;
    let fake = FakeMcp::start(McpFlavour::Http).await;
    fake.tool("lookup", "Looks an order up");
    let worker = app.worker("Support").await;
    let assistant = app.assistant(&worker, "Ana").await;
    let mcp = register(&app, &fake, "orders").await;
    let other = app
        .bootstrap_another("Other Inc", "Other", "owner@other.test")
        .await;
    let key = other.api_key.as_str();

    for (method, path) in [
        (Method::GET, format!("/workspace/mcps/{mcp}")),
        (Method::GET, format!("/workspace/mcps/{mcp}/tools")),
        (Method::PATCH, format!("/workspace/mcps/{mcp}")),
        (Method::DELETE, format!("/workspace/mcps/{mcp}")),
        (Method::PUT, format!("/assistant/{assistant}/mcp/{mcp}")),
        (Method::DELETE, format!("/assistant/{assistant}/mcp/{mcp}")),
        (Method::GET, format!("/assistant/{assistant}/mcp/tools")),
    ] {
        let response = app
            .request(method.clone(), &path, Some(key))
            .json(&json!({"name": "stolen"}))
            .send()
            .await
            .expect("request");
        expect_error(response, 404, "not_found").await;
    }
    // Their own assistant cannot take our server either.
    let their_worker = app
        .request(Method::POST, "/workers", Some(key))
        .json(&json!({"name": "Theirs"}))
        .send()
        .await
        .expect("request");
    let their_worker = expect_status(their_worker, 201).await["data"]["worker_id"]
        .as_str()
        .expect("worker_id")
        .to_owned();
    let their_assistant = app
        .request(
            Method::POST,
            &format!("/workers/{their_worker}/assistants"),
            Some(key),
        )
        .json(&json!({"name": "Bo", "instructions": "Be brief."}))
        .send()
        .await
        .expect("request");
    let their_assistant = expect_status(their_assistant, 201).await["data"]["assistant_id"]
        .as_str()
        .expect("assistant_id")
        .to_owned();
    let response = app
        .request(
            Method::PUT,
            &format!("/assistant/{their_assistant}/mcp/{mcp}"),
            Some(key),
        )
        .send()
        .await
        .expect("request");
    expect_error(response, 404, "not_found").await;
    let listed = app
        .request(Method::GET, "/workspace/mcps", Some(key))
        .send()
        .await
        .expect("request");
    assert_eq!(expect_status(listed, 200).await["pagination"]["total"], 0);
    // Ours is untouched.
    let ours = expect_status(app.get(&format!("/workspace/mcps/{mcp}")).await, 200).await;
    assert_eq!(ours["data"]["name"], "orders");
}

#[tokio::test]
async fn a_read_only_key_cannot_register_or_attach() {
    let app = spawn_app().await;
    let fake = FakeMcp::start(McpFlavour::Http).await;
    fake.tool("lookup", "Looks an order up");
    let worker = app.worker("Support").await;
    let assistant = app.assistant(&worker, "Ana").await;
    let mcp = register(&app, &fake, "orders").await;
    let reader = app.key_with(&["read"]).await;

    let response = app
        .send_json_with(
            Method::POST,
            "/workspace/mcps",
            &reader,
            &json!({"name": "x", "transport": "http", "url": fake.url()}),
        )
        .await;
    expect_error(response, 403, "forbidden").await;
    let response = app
        .send_json_with(
            Method::PUT,
            &format!("/assistant/{assistant}/mcp/{mcp}"),
            &reader,
            &json!({}),
        )
        .await;
    expect_error(response, 403, "forbidden").await;
    expect_status(app.get_with("/workspace/mcps", &reader).await, 200).await;
}

/// A chat turn in which the model calls the server's tool, on one transport.
async fn a_turn_calls_the_tool_over(flavour: McpFlavour) {
    let app = spawn_app().await;
    let fake = FakeMcp::start(flavour).await;
    let (assistant, channel, mcp) = assistant_with_tools(&app, &fake).await;
    app.model.push([
        Reply::ToolCalls(vec![FakeToolCall::new(
            "orders__lookup",
            json!({"input": "A-1042"}),
        )]),
        Reply::Text("Your order A-1042 is on its way.".to_owned()),
    ]);

    let reply = expect_status(app.chat("crm-1", &channel, "Where is A-1042?").await, 200).await;

    assert_eq!(reply["data"]["reply"], "Your order A-1042 is on its way.");
    let expected = r#"lookup: {"input":"A-1042"}"#;
    assert_eq!(
        reply["data"]["tool_calls"],
        json!([{
            "name": "orders__lookup",
            "arguments": {"input": "A-1042"},
            "result": expected,
        }])
    );
    assert_eq!(
        fake.calls(),
        [("lookup".to_owned(), json!({"input": "A-1042"}))]
    );
    // The model was offered the tool next to the built-in ones, and read its result.
    let offered = offered_tools(&app, 0);
    for name in ["remember", "forget", "set_stage", "orders__lookup"] {
        assert!(offered.iter().any(|o| o == name), "{name} in {offered:?}");
    }
    let second = &app.model.requests()[1]["messages"];
    let tool_message = second
        .as_array()
        .expect("messages")
        .iter()
        .find(|m| m["role"] == "tool")
        .expect("a tool message")
        .clone();
    assert!(
        tool_message["content"]
            .as_str()
            .is_some_and(|c| c.contains("A-1042")),
        "{tool_message}"
    );
    // Every request to the server carried the configured and the context headers.
    let identity = expect_status(app.get("/identity/crm-1").await, 200).await["data"]["id"]
        .as_str()
        .expect("id")
        .to_owned();
    let conversation = reply["data"]["conversation_id"]
        .as_str()
        .expect("conversation_id")
        .to_owned();
    let requests = fake.requests();
    assert!(!requests.is_empty());
    for request in &requests {
        assert_eq!(
            request.header("authorization"),
            Some(format!("Bearer {SECRET}").as_str()),
            "{request:?}"
        );
        assert_eq!(
            request.header("x-parley-workspace-id"),
            Some(app.owner.workspace_id.to_string().as_str())
        );
        assert_eq!(
            request.header("x-parley-assistant-id"),
            Some(assistant.as_str())
        );
    }
    let call = requests
        .iter()
        .rfind(|r| r.line == "POST /mcp/call" || r.rpc_method.as_deref() == Some("tools/call"))
        .expect("the call");
    assert_eq!(call.header("x-parley-identity-id"), Some(identity.as_str()));
    assert_eq!(
        call.header("x-parley-conversation-id"),
        Some(conversation.as_str())
    );
    // Stored as a tool message of the conversation.
    let stored = app.stored_messages(&identity).await;
    assert!(
        stored
            .iter()
            .any(|(role, content)| role == "tool" && content.contains("A-1042")),
        "{stored:?}"
    );
    // What went to the person has a direction and a status; the tool request and its result
    // never left Parley, and say so.
    for row in app.stored_message_rows(&identity).await {
        let internal = row["role"] == "tool" || !row["tool_calls"].is_null();
        if internal {
            assert!(
                row["direction"].is_null() && row["status"].is_null(),
                "{row}"
            );
        } else {
            assert!(
                row["direction"].is_string() && row["status"].is_string(),
                "{row}"
            );
        }
    }
    // The server's answer is one MCP call in the workspace's usage; a built-in tool is none.
    let usage = expect_status(app.get("/usage").await, 200).await;
    assert_eq!(usage["data"]["totals"]["mcp_calls"], 1, "{usage}");
    let _ = mcp;
}

#[tokio::test]
async fn a_turn_calls_a_tool_of_the_specification_contract() {
    a_turn_calls_the_tool_over(McpFlavour::Http).await;
}

#[tokio::test]
async fn a_turn_calls_a_tool_of_a_stateless_mcp_server() {
    a_turn_calls_the_tool_over(McpFlavour::Stateless).await;
}

#[tokio::test]
async fn a_turn_calls_a_tool_of_a_session_mcp_server() {
    a_turn_calls_the_tool_over(McpFlavour::Session).await;
}

#[tokio::test]
async fn a_turn_calls_a_tool_of_a_server_that_predates_discovery() {
    a_turn_calls_the_tool_over(McpFlavour::Legacy).await;
}

#[tokio::test]
async fn sessions_are_reused_and_started_again_when_the_server_forgets_them() {
    let app = spawn_app().await;
    let fake = FakeMcp::start(McpFlavour::Session).await;
    let (_, channel, _) = assistant_with_tools(&app, &fake).await;
    let lookup = || {
        Reply::ToolCalls(vec![FakeToolCall::new(
            "orders__lookup",
            json!({"input": "A-1"}),
        )])
    };
    app.model.push([
        lookup(),
        Reply::Text("one".to_owned()),
        lookup(),
        Reply::Text("two".to_owned()),
    ]);
    expect_status(app.chat("crm-1", &channel, "first").await, 200).await;
    expect_status(app.chat("crm-1", &channel, "second").await, 200).await;
    let handshakes = |fake: &FakeMcp| {
        fake.requests()
            .iter()
            .filter(|r| r.rpc_method.as_deref() == Some("initialize"))
            .count()
    };
    let before = handshakes(&fake);
    assert_eq!(fake.calls().len(), 2);
    assert!(
        fake.requests()
            .iter()
            .filter(|r| r.rpc_method.as_deref() == Some("tools/call"))
            .all(|r| r.header("mcp-session-id").is_some()),
        "calls ride a session"
    );

    fake.forget_sessions().await;
    app.model.push([lookup(), Reply::Text("three".to_owned())]);
    let reply = expect_status(app.chat("crm-1", &channel, "third").await, 200).await;

    assert_eq!(
        reply["data"]["tool_calls"][0]["result"],
        r#"lookup: {"input":"A-1"}"#
    );
    assert_eq!(fake.calls().len(), 3);
    assert!(handshakes(&fake) > before, "a new session was started");
}

#[tokio::test]
async fn detaching_removes_the_tool_from_the_next_turn() {
    let app = spawn_app().await;
    let fake = FakeMcp::start(McpFlavour::Stateless).await;
    let (assistant, channel, mcp) = assistant_with_tools(&app, &fake).await;
    expect_status(app.chat("crm-1", &channel, "hello").await, 200).await;
    assert!(offered_tools(&app, 0).contains(&"orders__lookup".to_owned()));

    expect_status(
        app.delete(&format!("/assistant/{assistant}/mcp/{mcp}"))
            .await,
        200,
    )
    .await;
    expect_status(app.chat("crm-1", &channel, "again").await, 200).await;

    let offered = offered_tools(&app, 1);
    assert!(!offered.iter().any(|o| o.contains("lookup")), "{offered:?}");
    assert!(offered.contains(&"remember".to_owned()));

    // Attached again, then the server deleted: gone from turns too.
    expect_status(attach(&app, &assistant, &mcp).await, 200).await;
    expect_status(app.chat("crm-1", &channel, "third").await, 200).await;
    assert!(offered_tools(&app, 2).contains(&"orders__lookup".to_owned()));
    expect_status(app.delete(&format!("/workspace/mcps/{mcp}")).await, 200).await;
    expect_status(app.chat("crm-1", &channel, "fourth").await, 200).await;
    assert!(!offered_tools(&app, 3).iter().any(|o| o.contains("lookup")));
}

#[tokio::test]
async fn a_patched_server_offers_its_new_tools_at_once() {
    let app = spawn_app().await;
    let fake = FakeMcp::start(McpFlavour::Http).await;
    let (_, channel, mcp) = assistant_with_tools(&app, &fake).await;
    fake.tool("refund", "Refunds an order");
    // Within the cache's life the old list is used...
    expect_status(app.chat("crm-1", &channel, "hello").await, 200).await;
    assert!(!offered_tools(&app, 0).contains(&"orders__refund".to_owned()));

    // ...and a PATCH refreshes it.
    let patched = app
        .send_json(
            Method::PATCH,
            &format!("/workspace/mcps/{mcp}"),
            &json!({"name": "shop"}),
        )
        .await;
    expect_status(patched, 200).await;
    expect_status(app.chat("crm-1", &channel, "again").await, 200).await;
    let offered = offered_tools(&app, 1);
    assert!(offered.contains(&"shop__refund".to_owned()), "{offered:?}");
    assert!(offered.contains(&"shop__lookup".to_owned()), "{offered:?}");
}

/// A turn whose tool misbehaves: the model gets `{"error": …}` and the turn answers.
async fn a_misbehaving_tool_becomes_an_error_result(
    flavour: McpFlavour,
    behaviour: ToolBehaviour,
    expected: &str,
) {
    let app = spawn_app_with(|settings| settings.mcp.timeout_secs = 1).await;
    let fake = FakeMcp::start(flavour).await;
    let (_, channel, _) = assistant_with_tools(&app, &fake).await;
    fake.behave("lookup", behaviour);
    app.model.push([
        Reply::ToolCalls(vec![FakeToolCall::new("orders__lookup", json!({}))]),
        Reply::Text("Sorry, I cannot look that up now.".to_owned()),
    ]);

    let reply = expect_status(app.chat("crm-1", &channel, "Where is it?").await, 200).await;

    assert_eq!(reply["data"]["reply"], "Sorry, I cannot look that up now.");
    let error = reply["data"]["tool_calls"][0]["result"]["error"]
        .as_str()
        .unwrap_or_else(|| panic!("an error result: {reply}"))
        .to_owned();
    assert!(
        error.contains(expected),
        "{error:?} should mention {expected:?}"
    );
    let tool_message = app.model.requests()[1]["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .find(|m| m["role"] == "tool")
        .expect("tool message")["content"]
        .clone();
    assert!(
        tool_message.as_str().is_some_and(|c| c.contains("error")),
        "{tool_message}"
    );
}

#[tokio::test]
async fn failing_tools_become_error_results() {
    for flavour in [McpFlavour::Http, McpFlavour::Stateless] {
        a_misbehaving_tool_becomes_an_error_result(
            flavour,
            ToolBehaviour::Fail("the order system is down".to_owned()),
            "the order system is down",
        )
        .await;
    }
}

#[tokio::test]
async fn hanging_tools_time_out_into_error_results() {
    for flavour in [McpFlavour::Http, McpFlavour::Session] {
        a_misbehaving_tool_becomes_an_error_result(flavour, ToolBehaviour::Hang, "within 1000 ms")
            .await;
    }
}

#[tokio::test]
async fn oversized_tool_answers_are_refused_into_error_results() {
    for flavour in [McpFlavour::Http, McpFlavour::Stateless] {
        a_misbehaving_tool_becomes_an_error_result(
            flavour,
            ToolBehaviour::Oversized(2 * 1024 * 1024),
            "limit",
        )
        .await;
    }
}

#[tokio::test]
async fn a_server_gone_after_listing_gives_the_model_an_error_result() {
    let app = spawn_app().await;
    let fake = FakeMcp::start(McpFlavour::Http).await;
    let (_, channel, _) = assistant_with_tools(&app, &fake).await;
    // The cache holds the list; the server then goes away and the model calls its tool.
    app.model.push([
        Reply::ToolCalls(vec![FakeToolCall::new("orders__lookup", json!({}))]),
        Reply::Text("Still here.".to_owned()),
    ]);
    drop(fake);

    let reply = expect_status(app.chat("crm-1", &channel, "hi").await, 200).await;

    assert_eq!(reply["data"]["reply"], "Still here.");
    let error = &reply["data"]["tool_calls"][0]["result"]["error"];
    assert!(
        error
            .as_str()
            .is_some_and(|e| e.contains("could not be reached")),
        "{reply}"
    );
}

#[tokio::test]
async fn a_server_that_cannot_list_its_tools_is_left_out_of_the_turn() {
    let app = spawn_app_with(|settings| settings.mcp.tool_cache_secs = 0).await;
    let fake = FakeMcp::start(McpFlavour::Stateless).await;
    let (_, channel, _) = assistant_with_tools(&app, &fake).await;
    fake.fail_listing(true);

    let reply = expect_status(app.chat("crm-1", &channel, "hi").await, 200).await;

    assert_eq!(reply["data"]["reply"], "You said: hi");
    let offered = offered_tools(&app, 0);
    assert!(offered.contains(&"remember".to_owned()), "{offered:?}");
    assert!(!offered.iter().any(|o| o.contains("lookup")), "{offered:?}");
}

#[tokio::test]
async fn the_stream_carries_mcp_tool_calls_too() {
    let app = spawn_app().await;
    let fake = FakeMcp::start(McpFlavour::Stateless).await;
    let (_, channel, _) = assistant_with_tools(&app, &fake).await;
    app.model.push([
        Reply::ToolCalls(vec![FakeToolCall::new(
            "orders__lookup",
            json!({"input": "A-7"}),
        )]),
        Reply::Text("A-7 ships today.".to_owned()),
    ]);

    let response = app
        .get(&format!(
            "/conversation/crm-1/streaming?channel_id={channel}&message=where%20is%20A-7"
        ))
        .await;
    assert_eq!(response.status(), 200);
    let text = response.text().await.expect("stream");

    assert!(text.contains("A-7 ships today."), "{text}");
    assert_eq!(
        fake.calls(),
        [("lookup".to_owned(), json!({"input": "A-7"}))]
    );
    assert_eq!(app.model.requests().len(), 2);
}
