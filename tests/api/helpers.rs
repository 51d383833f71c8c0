//! `spawn_app()` and the `TestApp` every test talks through.

use std::sync::OnceLock;

use parley::config::Settings;
use parley::startup::Application;
use parley::tenancy::{BootstrapRequest, Bootstrapped, bootstrap};
use parley_testkit::{FakeGraph, FakeModel};

/// The app secret the test server verifies webhooks with.
pub const APP_SECRET: &str = "test-app-secret";
/// The access token of live test channels.
pub const TOKEN: &str = "EAAB-test-token";
use reqwest::{Method, RequestBuilder, Response};
use sea_orm::{ConnectionTrait, Database};
use serde_json::Value;
use tokio::sync::oneshot;

/// A running server and what the tests need to talk to it.
pub struct TestApp {
    /// `http://127.0.0.1:<port>`
    pub address: String,
    /// The database URL the server uses, for the CLI tests.
    pub database_url: String,
    /// The bootstrapped business, workspace, owner and all-permission key.
    pub owner: Bootstrapped,
    /// The fake language model the server talks to.
    pub model: FakeModel,
    /// The fake Graph API the server talks to.
    pub graph: FakeGraph,
    client: reqwest::Client,
    shutdown: Option<oneshot::Sender<()>>,
    _data_dir: tempfile::TempDir,
    _database: TestDatabase,
}

/// Spawns the server on a fresh database with one bootstrapped workspace.
pub async fn spawn_app() -> TestApp {
    spawn_app_with(|_| {}).await
}

/// Spawns the server after `configure` adjusts its settings.
pub async fn spawn_app_with(configure: impl FnOnce(&mut Settings)) -> TestApp {
    init_test_log();
    parley_actors::llm::install_crypto_provider();
    let data_dir = tempfile::tempdir().expect("temporary data directory");
    let database = TestDatabase::create(data_dir.path()).await;
    let model = FakeModel::start().await;
    let graph = FakeGraph::start().await;
    let mut settings = Settings {
        data_dir: data_dir.path().to_path_buf(),
        ..Settings::default()
    };
    settings.server.bind = "127.0.0.1:0".parse().expect("address");
    settings.database.url = Some(database.url.clone());
    settings.whatsapp.graph_url = graph.base_url();
    settings.whatsapp.app_secret = Some(APP_SECRET.into());
    // The fakes listen on loopback, where tenant URLs may not lead otherwise.
    settings.egress.allow = "127.0.0.0/8".to_owned();
    // Tests run every-second recurrences; production asks for a minute between runs.
    settings.actors.scheduler_min_interval_secs = 1;
    settings.whatsapp.retry_backoff_ms = 10;
    settings.whatsapp.pair_burst = 1000;
    settings.llm.base_url = Some(model.base_url());
    settings.llm.model = Some("fake-model".to_owned());
    settings.llm.timeout_secs = 10;
    settings.llm.max_retries = 1;
    settings.llm.retry_backoff_ms = 10;
    configure(&mut settings);
    let app = Application::build(settings)
        .await
        .expect("application builds");
    let address = format!("http://{}", app.local_addr().expect("bound"));

    let db = parley_persistence::connect(&database.url)
        .await
        .expect("connect");
    let owner = bootstrap(
        &db,
        &BootstrapRequest {
            workspace: "Acme".to_owned(),
            business: "Acme Inc".to_owned(),
            email: Some("owner@acme.test".to_owned()),
        },
    )
    .await
    .expect("bootstrap");
    db.close().await.expect("close");

    let (tx, rx) = oneshot::channel::<()>();
    tokio::spawn(app.run_until(async move {
        let _ = rx.await;
    }));
    TestApp {
        address,
        database_url: database.url.clone(),
        owner,
        model,
        graph,
        client: reqwest::Client::new(),
        shutdown: Some(tx),
        _data_dir: data_dir,
        _database: database,
    }
}

/// The text of the metrics exposition `scrape` (a GET of `/metrics`) answers.
pub async fn exposition(scrape: RequestBuilder) -> String {
    scrape
        .send()
        .await
        .expect("metrics")
        .text()
        .await
        .expect("exposition")
}

/// The sum of the samples of `family` in `exposition` whose labels include every one of
/// `labels` (`name="value"`).
pub fn samples_sum(exposition: &str, family: &str, labels: &[&str]) -> u64 {
    exposition
        .lines()
        .filter(|l| l.starts_with(family) && labels.iter().all(|label| l.contains(label)))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .map(|count| count as u64)
        .sum()
}

impl TestApp {
    /// A request with `key` as bearer token (no header when `None`).
    pub fn request(&self, method: Method, path: &str, key: Option<&str>) -> RequestBuilder {
        let builder = self
            .client
            .request(method, format!("{}{path}", self.address));
        match key {
            Some(key) => builder.bearer_auth(key),
            None => builder,
        }
    }

    /// The metrics exposition, read with `key` (an operator's token).
    pub async fn metrics(&self, key: &str) -> String {
        exposition(self.request(Method::GET, "/metrics", Some(key))).await
    }

    /// GET with the owner's key.
    pub async fn get(&self, path: &str) -> Response {
        self.get_with(path, &self.owner.api_key).await
    }

    /// GET with `key`.
    pub async fn get_with(&self, path: &str, key: &str) -> Response {
        self.request(Method::GET, path, Some(key))
            .send()
            .await
            .expect("request")
    }

    /// A JSON request with the owner's key.
    pub async fn send_json(&self, method: Method, path: &str, body: &Value) -> Response {
        self.send_json_with(method, path, &self.owner.api_key, body)
            .await
    }

    /// A JSON request with `key`.
    pub async fn send_json_with(
        &self,
        method: Method,
        path: &str,
        key: &str,
        body: &Value,
    ) -> Response {
        self.request(method, path, Some(key))
            .json(body)
            .send()
            .await
            .expect("request")
    }

    /// DELETE with the owner's key.
    pub async fn delete(&self, path: &str) -> Response {
        self.request(Method::DELETE, path, Some(&self.owner.api_key))
            .send()
            .await
            .expect("request")
    }

    /// Creates a key in the owner's workspace with `permissions` and returns its secret.
    pub async fn key_with(&self, permissions: &[&str]) -> String {
        let response = self
            .send_json(
                Method::POST,
                "/workspace/api-keys",
                &serde_json::json!({
                    "name": format!("{} key", permissions.join("+")),
                    "permissions": permissions,
                    "workspace_id": self.owner.workspace_id,
                }),
            )
            .await;
        let body = expect_status(response, 201).await;
        body["data"]["key"]
            .as_str()
            .expect("key in answer")
            .to_owned()
    }

    /// Bootstraps another workspace straight in the database, as an operator would with the
    /// CLI: `business` names its business (the same name reuses the business).
    pub async fn bootstrap_another(
        &self,
        business: &str,
        workspace: &str,
        email: &str,
    ) -> Bootstrapped {
        let db = parley_persistence::connect(&self.database_url)
            .await
            .expect("connect");
        let done = bootstrap(
            &db,
            &BootstrapRequest {
                workspace: workspace.to_owned(),
                business: business.to_owned(),
                email: Some(email.to_owned()),
            },
        )
        .await
        .expect("bootstrap");
        db.close().await.expect("close");
        done
    }
}

/// Fixtures: resources created through the API, answering their ids.
impl TestApp {
    /// The server's data directory (its secret key lives there).
    pub fn data_dir(&self) -> &std::path::Path {
        self._data_dir.path()
    }

    /// A connection to the server's database, for fixtures the API cannot make yet and for
    /// asserting what is stored.
    pub async fn db(&self) -> sea_orm::DatabaseConnection {
        parley_persistence::connect(&self.database_url)
            .await
            .expect("connect")
    }

    /// POST with the owner's key, expecting `201`, answering `data`.
    pub async fn created(&self, path: &str, body: Value) -> Value {
        let response = self.send_json(Method::POST, path, &body).await;
        expect_status(response, 201).await["data"].clone()
    }

    /// A worker named `name`.
    pub async fn worker(&self, name: &str) -> String {
        let data = self
            .created("/workers", serde_json::json!({"name": name}))
            .await;
        data["worker_id"].as_str().expect("worker_id").to_owned()
    }

    /// An assistant of `worker_id`.
    pub async fn assistant(&self, worker_id: &str, name: &str) -> String {
        let data = self
            .created(
                &format!("/workers/{worker_id}/assistants"),
                serde_json::json!({"name": name, "instructions": "Be helpful."}),
            )
            .await;
        data["assistant_id"]
            .as_str()
            .expect("assistant_id")
            .to_owned()
    }

    /// A sandbox channel.
    pub async fn sandbox_channel(&self, name: &str) -> String {
        let data = self
            .created(
                "/channels/waba",
                serde_json::json!({"name": name, "integration": "sandbox"}),
            )
            .await;
        data["id"].as_str().expect("id").to_owned()
    }

    /// A stage.
    pub async fn stage(&self, name: &str) -> String {
        let data = self
            .created("/stages", serde_json::json!({"name": name}))
            .await;
        data["id"].as_str().expect("id").to_owned()
    }

    /// Creates or updates the identity at `path_id`, answering the record.
    pub async fn put_identity(&self, path_id: &str, body: Value) -> Value {
        let response = self
            .send_json(Method::PUT, &format!("/identity/{path_id}"), &body)
            .await;
        let status = response.status().as_u16();
        let body = expect_status(response, status).await;
        assert!(
            status == 200 || status == 201,
            "PUT /identity answered {status}: {body}"
        );
        body["data"].clone()
    }

    /// Moves the identity at `path_id` to `stage` (a name or an id); must succeed.
    pub async fn set_stage(&self, path_id: &str, stage: &str) {
        let moved = self
            .send_json(
                Method::POST,
                &format!("/identity/{path_id}/stage"),
                &serde_json::json!({"stage_id": stage}),
            )
            .await;
        expect_status(moved, 200).await;
    }
}

/// Fixtures of conversations.
impl TestApp {
    /// A worker with one assistant of `instructions` (and `extra` fields) synced to a new
    /// sandbox channel; answers `(assistant_id, channel_id)`.
    pub async fn chat_channel(&self, instructions: &str, extra: Value) -> (String, String) {
        let worker = self.worker("Support").await;
        let mut body = serde_json::json!({"name": "Ana", "instructions": instructions});
        if let (Some(body), Some(extra)) = (body.as_object_mut(), extra.as_object()) {
            body.extend(extra.clone());
        }
        let assistant = self
            .created(&format!("/workers/{worker}/assistants"), body)
            .await;
        let channel = self.sandbox_channel("Main line").await;
        let synced = self
            .send_json(
                Method::POST,
                &format!("/channels/{channel}/worker/{worker}"),
                &serde_json::json!({}),
            )
            .await;
        expect_status(synced, 200).await;
        (assistant["id"].as_str().expect("id").to_owned(), channel)
    }

    /// Sends `message` as `identity` on `channel` through the chat endpoint.
    pub async fn chat(&self, identity: &str, channel: &str, message: &str) -> Response {
        self.send_json(
            Method::POST,
            &format!("/conversation/{identity}/chat/{channel}"),
            &serde_json::json!({"message": message}),
        )
        .await
    }

    /// The system message of the model's most recent request.
    pub fn last_system_prompt(&self) -> String {
        let request = self.model.last_request().expect("the model was called");
        request["messages"][0]["content"]
            .as_str()
            .expect("system message")
            .to_owned()
    }

    /// Messages of the identity's conversations, oldest first, as `(role, content)`.
    pub async fn stored_messages(&self, identity: &str) -> Vec<(String, String)> {
        self.stored_message_rows(identity)
            .await
            .iter()
            .map(|m| {
                (
                    m["role"].as_str().expect("role").to_owned(),
                    m["content"].as_str().expect("content").to_owned(),
                )
            })
            .collect()
    }

    /// Messages of the identity's conversations, oldest first, as the API answers them.
    pub async fn stored_message_rows(&self, identity: &str) -> Vec<Value> {
        let listed = expect_status(
            self.get(&format!("/conversations?identity_id={identity}"))
                .await,
            200,
        )
        .await;
        let mut all = Vec::new();
        let mut conversations: Vec<Value> = listed["data"].as_array().expect("array").clone();
        conversations.reverse();
        for conversation in conversations {
            let id = conversation["id"].as_str().expect("id");
            let messages = expect_status(
                self.get(&format!("/conversations/{id}/messages?limit=100"))
                    .await,
                200,
            )
            .await;
            all.extend(messages["data"].as_array().expect("array").iter().cloned());
        }
        all
    }
}

/// The operator's view of the actor tree.
impl TestApp {
    /// How many actors the supervisor at `path` (`root/channels`, …) runs now.
    pub async fn live_actors(&self, path: &str) -> u64 {
        self.supervisor_count(path, "live").await
    }

    /// How many identities rest, their cache kept without an actor.
    pub async fn resting_identities(&self) -> u64 {
        self.supervisor_count("root/conversations", "resting").await
    }

    /// Waits until the supervisor at `path` runs `count` actors.
    pub async fn wait_for_live_actors(&self, path: &str, count: u64) {
        self.wait_for_count(path, "live", count).await;
    }

    /// Waits until `count` identities rest.
    pub async fn wait_for_resting_identities(&self, count: u64) {
        self.wait_for_count("root/conversations", "resting", count)
            .await;
    }

    async fn supervisor_count(&self, path: &str, field: &str) -> u64 {
        let tree = expect_status(self.get("/admin/actors").await, 200).await;
        tree["data"]["supervisors"]
            .as_array()
            .expect("supervisors")
            .iter()
            .find(|s| s["path"] == path)
            .and_then(|s| s[field].as_u64())
            .unwrap_or_else(|| panic!("no {field} count of {path}: {tree}"))
    }

    async fn wait_for_count(&self, path: &str, field: &str, count: u64) {
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            let now = self.supervisor_count(path, field).await;
            if now == count {
                return;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "{path} counts {now} {field}, not {count}"
            );
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    }
}

/// An approved template of business account `waba-1` with two body parameters.
pub fn order_update() -> Value {
    serde_json::json!({"name": "order_update", "language": "en_US", "status": "APPROVED", "category": "UTILITY", "id": "7001",
           "components": [{"type": "BODY", "text": "Hi {{1}}, your order {{2}} has shipped."}]})
}

/// The body of a template send of `order_update` to `phone`.
pub fn order_update_send(phone: &str) -> Value {
    serde_json::json!({"identity": {"name": "Ana", "phone": phone}, "templateId": "order_update", "templateType": "text",
           "templateLanguage": "en_US", "templateComponents": {"body": [{"type": "text", "text": "Ana"}, {"type": "text", "text": "#42"}]}})
}

/// Fixtures of WhatsApp channels.
impl TestApp {
    /// Sends `body` to `POST /channels/{channel}/waba/send` with the owner's key.
    pub async fn send_template(&self, channel: &str, body: &Value) -> Response {
        self.send_json(
            Method::POST,
            &format!("/channels/{channel}/waba/send"),
            body,
        )
        .await
    }

    /// Polls until `check` holds for the messages of `identity` (as the API lists them).
    pub async fn wait_for_messages(
        &self,
        identity: &str,
        check: impl Fn(&[Value]) -> bool,
    ) -> Vec<Value> {
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(15);
        loop {
            let mut all = Vec::new();
            let listed = self
                .get(&format!("/conversations?identity_id={identity}"))
                .await;
            if listed.status() == 200 {
                let listed: Value = listed.json().await.expect("json");
                for conversation in listed["data"].as_array().into_iter().flatten() {
                    let id = conversation["id"].as_str().expect("id");
                    let messages: Value = self
                        .get(&format!("/conversations/{id}/messages?limit=100"))
                        .await
                        .json()
                        .await
                        .expect("json");
                    all.extend(messages["data"].as_array().cloned().unwrap_or_default());
                }
            }
            if check(&all) {
                return all;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "messages never matched: {all:#?}"
            );
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    }

    /// A live `cloud_api` channel of `phone_number_id` whose worker's assistant echoes;
    /// answers its id.
    pub async fn live_channel(&self, phone_number_id: &str) -> String {
        let channel = self
            .created(
                "/channels/waba",
                serde_json::json!({"name": "Main line", "accessToken": TOKEN, "phoneNumberId": phone_number_id,
                                   "businessId": "waba-1"}),
            )
            .await["id"]
            .as_str()
            .expect("id")
            .to_owned();
        let worker = self.worker("Support").await;
        self.assistant(&worker, "Ana").await;
        let synced = self
            .send_json(
                Method::POST,
                &format!("/channels/{channel}/worker/{worker}"),
                &serde_json::json!({}),
            )
            .await;
        expect_status(synced, 200).await;
        channel
    }

    /// Posts a signed webhook to `/webhooks/waba/{channel}` (or `/webhooks/waba` for `None`).
    pub async fn webhook(&self, channel: Option<&str>, payload: &Value) -> u16 {
        let url = match channel {
            Some(id) => format!("{}/webhooks/waba/{id}", self.address),
            None => format!("{}/webhooks/waba", self.address),
        };
        self.graph.post_webhook(&url, APP_SECRET, payload).await
    }

    /// Posts a signed webhook as [`TestApp::webhook`] does; answers its status and what it
    /// reported (`stored`, `duplicates`, `statuses`, `ignored`).
    pub async fn webhook_summary(&self, channel: Option<&str>, payload: &Value) -> (u16, Value) {
        let url = match channel {
            Some(id) => format!("{}/webhooks/waba/{id}", self.address),
            None => format!("{}/webhooks/waba", self.address),
        };
        let body = payload.to_string();
        let response = self
            .client
            .post(url)
            .header("content-type", "application/json")
            .header(
                "x-hub-signature-256",
                parley_testkit::graph::sign(APP_SECRET.as_bytes(), body.as_bytes()),
            )
            .body(body)
            .send()
            .await
            .expect("webhook delivery");
        let status = response.status().as_u16();
        let answer: Value = response.json().await.expect("a JSON answer");
        (status, answer["data"].clone())
    }

    /// Waits until the fake Graph API has accepted `count` messages; answers them.
    pub async fn wait_for_sends(&self, count: usize) -> Vec<parley_testkit::SentMessage> {
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(15);
        loop {
            let sent = self.graph.sent();
            if sent.len() >= count {
                return sent;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "only {} of {count} messages sent",
                sent.len()
            );
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    }
}

impl Drop for TestApp {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
    }
}

/// Asserts the status and returns the JSON body.
pub async fn expect_status(response: Response, status: u16) -> Value {
    let actual = response.status().as_u16();
    let text = response.text().await.expect("body");
    assert_eq!(actual, status, "unexpected status; body: {text}");
    serde_json::from_str(&text).unwrap_or_else(|_| panic!("body is not JSON: {text}"))
}

/// Asserts an error answer: status, machine code and the `{"message","error","details"}` shape.
pub async fn expect_error(response: Response, status: u16, code: &str) -> Value {
    let body = expect_status(response, status).await;
    assert_eq!(body["error"], code, "error code; body: {body}");
    assert!(
        body["message"].as_str().is_some_and(|m| !m.is_empty()),
        "message; body: {body}"
    );
    assert!(body["details"].is_array(), "details; body: {body}");
    body
}

/// A database that lives as long as the test: a SQLite file in the test's directory, or a
/// PostgreSQL database created for the test and dropped after it.
struct TestDatabase {
    url: String,
    postgres: Option<(String, String)>,
}

impl TestDatabase {
    async fn create(dir: &std::path::Path) -> Self {
        let Ok(admin_url) = std::env::var("PARLEY_TEST_DATABASE_URL") else {
            return Self {
                url: parley_persistence::sqlite_url_in(dir),
                postgres: None,
            };
        };
        let name = format!("parley_test_{}", uuid::Uuid::now_v7().simple());
        let admin = Database::connect(&admin_url)
            .await
            .expect("connect to PostgreSQL");
        admin
            .execute_unprepared(&format!("CREATE DATABASE \"{name}\""))
            .await
            .expect("create test database");
        admin.close().await.expect("close");
        Self {
            url: with_database(&admin_url, &name),
            postgres: Some((admin_url, name)),
        }
    }
}

impl Drop for TestDatabase {
    fn drop(&mut self) {
        let Some((admin_url, name)) = self.postgres.take() else {
            return;
        };
        // Drop cannot await; a short-lived runtime on its own thread does the clean-up.
        let _ = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            runtime.block_on(async {
                if let Ok(admin) = Database::connect(&admin_url).await {
                    let _ = admin
                        .execute_unprepared(&format!(
                            "DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)"
                        ))
                        .await;
                    let _ = admin.close().await;
                }
            });
        })
        .join();
    }
}

/// `postgres://u@h:5432/test?x=y` with its database replaced by `name`.
fn with_database(url: &str, name: &str) -> String {
    let (base, query) = match url.split_once('?') {
        Some((base, query)) => (base, Some(query)),
        None => (url, None),
    };
    let scheme_end = base.find("://").map_or(0, |i| i + 3);
    let host_part = match base[scheme_end..].find('/') {
        Some(slash) => &base[..scheme_end + slash],
        None => base,
    };
    match query {
        Some(query) => format!("{host_part}/{name}?{query}"),
        None => format!("{host_part}/{name}"),
    }
}

fn init_test_log() {
    static ONCE: OnceLock<()> = OnceLock::new();
    ONCE.get_or_init(|| {
        if std::env::var_os("TEST_LOG").is_some() {
            let _ = parley::telemetry::init("info", parley::config::LogFormat::Pretty);
        }
    });
}
