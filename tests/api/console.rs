//! The operator console over plain HTTP (the browser tests in `console_browser.rs` drive the
//! same pages in Chromium): signing in and out, sessions that expire or lose their key, CSRF,
//! read-only keys, the inbox's filters and live stream, and every action reaching the system
//! the way its API endpoint does.

use std::time::Duration;

use futures_util::StreamExt;
use parley_testkit::graph::text_message;
use reqwest::header::{COOKIE, LOCATION, SET_COOKIE};
use reqwest::{Method, StatusCode, redirect};
use serde_json::{Value, json};

use crate::flows::{campaign, people, sandbox_with_template};
use crate::helpers::{TestApp, expect_status, spawn_app, spawn_app_with};

pub(crate) const NUMBER: &str = "106540352242922";
const SHEENA: &str = "16505551234";
const SHEENA_ID: &str = "+16505551234";

/// A browser's part, by hand: one session cookie, no redirects followed.
pub struct Tab {
    /// The server it speaks to: the app's, or a cluster node's.
    base: String,
    client: reqwest::Client,
    cookie: Option<String>,
}

/// An answer, read whole.
pub struct Page {
    pub status: StatusCode,
    pub location: Option<String>,
    pub set_cookie: Option<String>,
    pub body: String,
}

impl Page {
    /// The CSRF token of the page's first form.
    pub fn csrf(&self) -> String {
        let (_, rest) = self
            .body
            .split_once(r#"name="csrf" value=""#)
            .expect("a form with a CSRF token");
        rest.split('"').next().expect("token").to_owned()
    }
}

impl Tab {
    pub fn new(app: &TestApp) -> Self {
        Self::at(&app.address)
    }

    /// The same browser at another server (a node of a cluster, or the same database's other
    /// server): its cookie goes along, as a browser's would to the same host.
    pub fn at_other(&self, base: &str) -> Self {
        let mut tab = Self::at(base);
        tab.cookie.clone_from(&self.cookie);
        tab
    }

    /// A tab on the server at `base` (a node of a cluster, say).
    pub fn at(base: &str) -> Self {
        let client = reqwest::Client::builder()
            .redirect(redirect::Policy::none())
            .build()
            .expect("client");
        Self {
            base: base.to_owned(),
            client,
            cookie: None,
        }
    }

    async fn read(&mut self, request: reqwest::RequestBuilder) -> Page {
        let request = match &self.cookie {
            Some(cookie) => request.header(COOKIE, cookie),
            None => request,
        };
        let response = request.send().await.expect("console request");
        let header = |name| {
            response
                .headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        };
        let (location, set_cookie) = (header(LOCATION), header(SET_COOKIE));
        if let Some(set) = &set_cookie {
            let pair = set.split(';').next().expect("pair").to_owned();
            self.cookie = (!pair.ends_with('=')).then_some(pair);
        }
        Page {
            status: response.status(),
            location,
            set_cookie,
            body: response.text().await.expect("body"),
        }
    }

    pub async fn get(&mut self, path: &str) -> Page {
        let request = self.client.get(format!("{}{path}", self.base));
        self.read(request).await
    }

    pub async fn post(&mut self, path: &str, fields: &[(&str, &str)]) -> Page {
        let request = self
            .client
            .post(format!("{}{path}", self.base))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(form_body(fields));
        self.read(request).await
    }

    /// Posts a multipart form (a file input's).
    pub async fn post_multipart(&mut self, path: &str, form: reqwest::multipart::Form) -> Page {
        let request = self
            .client
            .post(format!("{}{path}", self.base))
            .multipart(form);
        self.read(request).await
    }

    /// Signs in with `key`; asserts the session started.
    pub async fn sign_in(&mut self, key: &str) -> Page {
        let page = self.post("/console/sign-in", &[("key", key)]).await;
        assert_eq!(page.status, StatusCode::SEE_OTHER, "{}", page.body);
        assert_eq!(page.location.as_deref(), Some("/console/conversations"));
        page
    }

    /// Opens the live stream at `path` (an `EventSource`'s request); answers it unread.
    pub async fn stream(&self, path: &str) -> reqwest::Response {
        let request = self
            .client
            .get(format!("{}{path}", self.base))
            .header("accept", "text/event-stream");
        let request = match &self.cookie {
            Some(cookie) => request.header(COOKIE, cookie),
            None => request,
        };
        request.send().await.expect("a live stream")
    }

    /// Posts an action's form with the CSRF token of the page at `from`.
    pub async fn act(&mut self, from: &str, action: &str, fields: &[(&str, &str)]) -> Page {
        let csrf = self.get(from).await.csrf();
        let mut all = vec![("csrf", csrf.as_str())];
        all.extend_from_slice(fields);
        self.post(action, &all).await
    }
}

/// `fields` as a form's body.
pub(crate) fn form_body(fields: &[(&str, &str)]) -> String {
    serde_urlencoded::to_string(fields).expect("a form")
}

/// Sheena writes `text` to the live channel; waits for the assistant's answer to be sent.
pub(crate) async fn sheena_writes(app: &TestApp, channel: &str, wamid: &str, text: &str) {
    let sent = app.graph.sent_count();
    let payload = text_message(NUMBER, SHEENA, "Sheena Nelson", wamid, text);
    assert_eq!(app.webhook(Some(channel), &payload).await, 200);
    app.wait_for_sends(sent + 1).await;
}

/// The id of Sheena's conversation, as the API lists it.
async fn conversation_of_sheena(app: &TestApp) -> Value {
    let listed = expect_status(app.get("/conversations").await, 200).await;
    listed["data"][0].clone()
}

#[tokio::test]
async fn a_key_signs_in_once_and_signing_out_ends_the_session() {
    let app = spawn_app().await;
    let mut tab = Tab::new(&app);

    // Without a session every page sends to sign in; htmx and live streams are told their way.
    let page = tab.get("/console/conversations").await;
    assert_eq!(page.status, StatusCode::SEE_OTHER);
    assert_eq!(page.location.as_deref(), Some("/console/sign-in"));
    let fragment = app
        .request(Method::GET, "/console/conversations/rows", None)
        .header("hx-request", "true")
        .send()
        .await
        .expect("fragment");
    assert_eq!(fragment.status(), 204);
    assert_eq!(fragment.headers()["hx-redirect"], "/console/sign-in");
    let stream = app
        .request(Method::GET, "/console/conversations/live", None)
        .header("accept", "text/event-stream")
        .send()
        .await
        .expect("stream");
    assert_eq!(stream.status(), 204, "an EventSource stops retrying");

    // Refusals say why, in a sentence, and start no session.
    let wrong = tab.post("/console/sign-in", &[("key", "prl_wrong")]).await;
    assert_eq!(wrong.status, StatusCode::UNAUTHORIZED);
    assert!(
        wrong.body.contains("That key was not accepted"),
        "{}",
        wrong.body
    );
    assert!(wrong.set_cookie.is_none());
    let empty = tab.post("/console/sign-in", &[("key", "  ")]).await;
    assert_eq!(empty.status, StatusCode::BAD_REQUEST);
    assert!(
        empty
            .body
            .contains("Enter your e-mail address and password")
    );
    let forged = app
        .request(Method::POST, "/console/sign-in", None)
        .header("sec-fetch-site", "cross-site")
        .header("content-type", "application/x-www-form-urlencoded")
        .body(form_body(&[("key", app.owner.api_key.as_str())]))
        .send()
        .await
        .expect("forged");
    assert_eq!(
        forged.status(),
        403,
        "another site cannot sign a browser in"
    );
    // A browser that sends no Sec-Fetch-Site still says where the form was: another site's
    // Origin is refused, the console's own is taken.
    let plain = reqwest::Client::builder()
        .redirect(redirect::Policy::none())
        .build()
        .expect("client");
    let sign_in_from = async |origin: &str| {
        plain
            .post(format!("{}/console/sign-in", app.address))
            .header("origin", origin)
            .header("content-type", "application/x-www-form-urlencoded")
            .body(form_body(&[("key", app.owner.api_key.as_str())]))
            .send()
            .await
            .expect("sign-in")
            .status()
    };
    assert_eq!(sign_in_from("https://evil.example").await, 403);
    assert_eq!(sign_in_from("http://127.0.0.1:1").await, 403);
    assert_eq!(sign_in_from(&app.address).await, 303);
    let no_read = app.key_with(&["write"]).await;
    let blind = tab.post("/console/sign-in", &[("key", &no_read)]).await;
    assert_eq!(blind.status, StatusCode::FORBIDDEN);

    let signed = tab.sign_in(&app.owner.api_key).await;
    let cookie = signed.set_cookie.expect("a session cookie");
    for part in [
        "HttpOnly",
        "SameSite=Strict",
        "Path=/console",
        "Max-Age=43200",
    ] {
        assert!(cookie.contains(part), "{cookie}");
    }
    assert!(!cookie.contains("Secure"), "plain http here: {cookie}");
    assert!(
        !cookie.contains(&app.owner.api_key),
        "the key never goes in a cookie"
    );
    let inbox = tab.get("/console/conversations").await;
    assert_eq!(inbox.status, StatusCode::OK);
    assert!(inbox.body.contains("<h1>Conversations</h1>"));
    assert!(inbox.body.contains("No conversations match."));

    // Sign-out needs the session's token, ends the session and clears the cookie.
    let stale = tab.post("/console/sign-out", &[("csrf", "stale")]).await;
    assert_eq!(stale.status, StatusCode::FORBIDDEN);
    let out = tab
        .act("/console/conversations", "/console/sign-out", &[])
        .await;
    assert_eq!(out.status, StatusCode::SEE_OTHER);
    assert_eq!(out.location.as_deref(), Some("/console/sign-in?why=out"));
    assert!(out.set_cookie.expect("cleared").contains("Max-Age=0"));
    let after = tab.get("/console/sign-in?why=out").await;
    assert!(after.body.contains("You signed out."));
    let closed = tab.get("/console/conversations").await;
    assert_eq!(closed.status, StatusCode::SEE_OTHER);
}

#[tokio::test]
async fn a_session_ends_with_its_key_and_after_its_idle_time() {
    let app = spawn_app_with(|s| s.server.console_session_idle_secs = 1).await;
    let created = expect_status(
        app.send_json(
            Method::POST,
            "/workspace/api-keys",
            &json!({"name": "ops", "permissions": ["read", "write"],
                    "workspace_id": app.owner.workspace_id}),
        )
        .await,
        201,
    )
    .await;
    let (key, key_id) = (
        created["data"]["key"].as_str().expect("key"),
        created["data"]["id"].as_str().expect("id"),
    );

    // The key revoked: its session ends at its next request.
    let mut tab = Tab::new(&app);
    tab.sign_in(key).await;
    assert_eq!(tab.get("/console/flows").await.status, StatusCode::OK);
    expect_status(
        app.delete(&format!("/workspace/api-keys/{key_id}")).await,
        200,
    )
    .await;
    let gone = tab.get("/console/flows").await;
    assert_eq!(gone.status, StatusCode::SEE_OTHER);
    assert_eq!(gone.location.as_deref(), Some("/console/sign-in?why=key"));
    let told = tab.get("/console/sign-in?why=key").await;
    assert!(
        told.body.contains("revoked or has expired"),
        "{}",
        told.body
    );
    assert_eq!(
        tab.post("/console/sign-in", &[("key", key)]).await.status,
        StatusCode::UNAUTHORIZED
    );

    // Idle past its time (one second here): expired.
    let mut tab = Tab::new(&app);
    tab.sign_in(&app.owner.api_key).await;
    tokio::time::sleep(Duration::from_millis(1_200)).await;
    let expired = tab.get("/console/conversations").await;
    assert_eq!(
        expired.location.as_deref(),
        Some("/console/sign-in?why=expired")
    );
    assert!(
        tab.get("/console/sign-in?why=expired")
            .await
            .body
            .contains("Your session expired")
    );
}

#[tokio::test]
async fn an_operator_hands_over_replies_and_gives_back_through_the_console() {
    let app = spawn_app().await;
    let channel = app.live_channel(NUMBER).await;
    sheena_writes(&app, &channel, "wamid.C1", "Where is my order?").await;
    let conversation = conversation_of_sheena(&app).await;
    let id = conversation["id"].as_str().expect("id");
    let page_path = format!("/console/conversations/{id}");
    let mut tab = Tab::new(&app);
    tab.sign_in(&app.owner.api_key).await;

    // The inbox shows the person, their phone, the channel and the last message.
    let inbox = tab.get("/console/conversations").await;
    for shown in [
        "Sheena Nelson",
        SHEENA_ID,
        "Main line",
        &format!("data-conversation=\"{id}\""),
    ] {
        assert!(inbox.body.contains(shown), "{shown} in {}", inbox.body);
    }
    let page = tab.get(&page_path).await;
    assert!(page.body.contains("Where is my order?"));
    assert!(page.body.contains(r#"data-mode="assistant""#));

    // Hand over: the API sees it.
    let handed = tab
        .act(
            &page_path,
            &format!("{page_path}/handoff"),
            &[("reason", "VIP")],
        )
        .await;
    assert_eq!(handed.status, StatusCode::SEE_OTHER, "{}", handed.body);
    assert_eq!(handed.location, Some(format!("{page_path}?done=handed")));
    let now = expect_status(app.get(&format!("/conversations/{id}")).await, 200).await;
    assert_eq!(now["data"]["mode"], "human");
    assert_eq!(now["data"]["handoff_reason"], "VIP");
    let shown = tab.get(&format!("{page_path}?done=handed")).await;
    assert!(
        shown.body.contains("The conversation is yours"),
        "{}",
        shown.body
    );
    assert!(shown.body.contains(r#"data-mode="human""#));

    // A blank reply is refused on the page; a reply leaves through the channel.
    let blank = tab
        .act(
            &page_path,
            &format!("{page_path}/reply"),
            &[("text", "   ")],
        )
        .await;
    assert_eq!(blank.status, StatusCode::BAD_REQUEST);
    assert!(
        blank.body.contains("text must not be empty"),
        "{}",
        blank.body
    );
    let before = app.graph.sent_count();
    let replied = tab
        .act(
            &page_path,
            &format!("{page_path}/reply"),
            &[("text", "I am Rui, I will check.")],
        )
        .await;
    assert_eq!(replied.status, StatusCode::SEE_OTHER, "{}", replied.body);
    let sent = app.wait_for_sends(before + 1).await;
    let last = sent.last().expect("sent");
    assert_eq!(last.body["text"]["body"], "I am Rui, I will check.");
    assert_eq!(last.body["to"], SHEENA);
    let shown = tab.get(&page_path).await;
    assert!(shown.body.contains("message operator"), "{}", shown.body);

    // Give back: the assistant answers again.
    let resumed = tab
        .act(&page_path, &format!("{page_path}/resume"), &[])
        .await;
    assert_eq!(resumed.status, StatusCode::SEE_OTHER);
    let now = expect_status(app.get(&format!("/conversations/{id}")).await, 200).await;
    assert_eq!(now["data"]["mode"], "assistant");
    // The inbox shows the last words between the person and the business, not the note the
    // model was left about the handoff.
    let inbox = tab.get("/console/conversations").await;
    assert!(
        inbox.body.contains("I am Rui, I will check."),
        "{}",
        inbox.body
    );
    assert!(
        !inbox.body.contains("A person from the business"),
        "{}",
        inbox.body
    );

    // Filters: by mode, status and channel; a bad filter is a 400 naming it.
    let human = tab.get("/console/conversations?mode=human").await;
    assert!(human.body.contains("No conversations match."));
    let assistant = tab
        .get(&format!(
            "/console/conversations?mode=assistant&status=open&channel={channel}"
        ))
        .await;
    assert!(assistant.body.contains("Sheena Nelson"));
    let closed = tab.get("/console/conversations?status=closed").await;
    assert!(closed.body.contains("No conversations match."));
    let bad = tab.get("/console/conversations?mode=robot").await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST);
    assert!(
        bad.body.contains("mode must be assistant or human"),
        "{}",
        bad.body
    );
}

#[tokio::test]
async fn forms_need_the_sessions_token_and_a_read_only_key_cannot_act() {
    let app = spawn_app().await;
    let channel = app.live_channel(NUMBER).await;
    sheena_writes(&app, &channel, "wamid.C2", "Hello").await;
    let id = conversation_of_sheena(&app).await["id"]
        .as_str()
        .expect("id")
        .to_owned();
    let page_path = format!("/console/conversations/{id}");

    let mut owner = Tab::new(&app);
    owner.sign_in(&app.owner.api_key).await;
    let forged = owner
        .post(
            &format!("{page_path}/handoff"),
            &[("csrf", "forged"), ("reason", "x")],
        )
        .await;
    assert_eq!(forged.status, StatusCode::FORBIDDEN);
    assert!(forged.body.contains("not from your current session"));
    // The forms take what the API takes: a NUL in a reply or a reason is refused with a
    // sentence, and nothing is stored or sent.
    let sent_before = app.graph.sent_count();
    for (action, field) in [("reply", "text"), ("handoff", "reason")] {
        let refused = owner
            .act(
                &page_path,
                &format!("{page_path}/{action}"),
                &[(field, "hello\u{0}world")],
            )
            .await;
        assert_eq!(refused.status, StatusCode::BAD_REQUEST, "{action}");
        assert!(
            refused.body.contains("must not contain NUL characters"),
            "{action}: {}",
            refused.body
        );
    }
    assert_eq!(app.graph.sent_count(), sent_before);
    let now = expect_status(app.get(&format!("/conversations/{id}")).await, 200).await;
    assert_eq!(now["data"]["mode"], "assistant", "no handoff was made");

    let reader = app.key_with(&["read"]).await;
    let mut tab = Tab::new(&app);
    tab.sign_in(&reader).await;
    let page = tab.get(&page_path).await;
    assert!(page.body.contains("Hello"), "a read-only key sees");
    assert!(page.body.contains("read-only key"));
    assert!(
        !page.body.contains("/handoff\""),
        "and is offered no control"
    );
    assert!(!page.body.contains("/reply\""));
    let refused = tab
        .act(&page_path, &format!("{page_path}/handoff"), &[])
        .await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN);
    let refused = tab
        .act(&page_path, &format!("{page_path}/reply"), &[("text", "hi")])
        .await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN);
    let now = expect_status(app.get(&format!("/conversations/{id}")).await, 200).await;
    assert_eq!(now["data"]["mode"], "assistant", "nothing changed");
    assert_eq!(app.graph.sent_count(), 1, "nothing was sent");

    // Another workspace's key sees none of it.
    let other = app
        .bootstrap_another("Other Inc", "Other", "owner@other.test")
        .await;
    let mut stranger = Tab::new(&app);
    stranger.sign_in(&other.api_key).await;
    assert_eq!(stranger.get(&page_path).await.status, StatusCode::NOT_FOUND);
    let inbox = stranger.get("/console/conversations").await;
    assert!(!inbox.body.contains(&id));
    assert_eq!(
        stranger
            .get("/console/conversations/not-a-uuid")
            .await
            .status,
        StatusCode::BAD_REQUEST
    );
}

#[tokio::test]
async fn the_live_stream_says_changed_when_a_message_arrives() {
    let app = spawn_app().await;
    let channel = app.live_channel(NUMBER).await;
    let mut tab = Tab::new(&app);
    tab.sign_in(&app.owner.api_key).await;
    let cookie = tab.cookie.clone().expect("session");
    let response = app
        .request(Method::GET, "/console/conversations/live", None)
        .header(COOKIE, cookie)
        .header("accept", "text/event-stream")
        .send()
        .await
        .expect("stream");
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    let mut body = response.bytes_stream();

    // The stream takes its first reading, then a message arrives.
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    let payload = text_message(
        NUMBER,
        SHEENA,
        "Sheena Nelson",
        "wamid.L1",
        "Are you there?",
    );
    assert_eq!(app.webhook(Some(&channel), &payload).await, 200);
    let mut seen = String::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    // With data: a browser drops an event that has none.
    while !seen.contains("event: changed\ndata: 1") {
        let chunk = tokio::time::timeout_at(deadline, body.next())
            .await
            .expect("a change within the deadline")
            .expect("the stream stays open")
            .expect("a chunk");
        seen.push_str(&String::from_utf8_lossy(&chunk));
    }
    let rows = tab.get("/console/conversations/rows").await;
    assert!(rows.body.contains("Sheena Nelson"), "{}", rows.body);
    assert!(!rows.body.contains("<html"), "a fragment, not a page");
}

#[tokio::test]
async fn flows_tasks_and_channels_are_shown_and_moved_from_the_console() {
    let app = spawn_app().await;
    let sandbox = sandbox_with_template(&app, "Sandbox").await;
    let campaign = campaign(&app, &sandbox, "Welcome", json!({})).await;
    let people = people(&app, 2).await;
    let draft = app
        .created(
            "/flows",
            json!({"channelUid": sandbox, "campaignUid": campaign, "contactUids": people,
                   "status": "draft", "description": "November promo"}),
        )
        .await;
    let flow = draft["uid"].as_str().expect("uid");
    let task = app
        .created(
            "/scheduled-tasks",
            json!({"name": "Weekly digest", "task_type": "set_stage", "recurrence": "0 9 * * MON",
                   "scheduled_at": (chrono::Utc::now() + chrono::Duration::days(1)).to_rfc3339(),
                   "payload": {"identity_id": "p0", "stage_id": app.stage("Customer").await}}),
        )
        .await;
    let task = task["id"].as_str().expect("id");
    let mut tab = Tab::new(&app);
    tab.sign_in(&app.owner.api_key).await;

    // Flows: the statistics, and only the moves the flow's status allows.
    let flows = tab.get("/console/flows").await;
    assert!(flows.body.contains("November promo"));
    // The campaign it sends, and a link to its recipients, each by the contact written.
    assert!(flows.body.contains("Campaign Welcome"), "{}", flows.body);
    let recipients = tab.get(&format!("/console/flows/{flow}/recipients")).await;
    assert_eq!(recipients.status, StatusCode::OK);
    for contact in &people {
        assert!(
            recipients.body.contains(contact.as_str()),
            "{}",
            recipients.body
        );
    }
    // The header names the workspace; `/console/` is the console too.
    assert!(flows.body.contains("Acme"), "{}", flows.body);
    let slash = tab.get("/console/").await;
    assert_eq!(slash.location.as_deref(), Some("/console/conversations"));
    assert!(
        flows
            .body
            .contains(&format!("/console/flows/{flow}/cancel"))
    );
    assert!(!flows.body.contains(&format!("/console/flows/{flow}/pause")));
    let refused = tab
        .act(
            "/console/flows",
            &format!("/console/flows/{flow}/pause"),
            &[],
        )
        .await;
    assert_eq!(refused.status, StatusCode::CONFLICT);
    assert!(
        refused
            .body
            .contains("A flow cannot move from draft to paused")
    );
    let cancelled = tab
        .act(
            "/console/flows",
            &format!("/console/flows/{flow}/cancel"),
            &[],
        )
        .await;
    assert_eq!(
        cancelled.location.as_deref(),
        Some("/console/flows?done=cancelled")
    );
    let record = expect_status(app.get(&format!("/flows/{flow}")).await, 200).await;
    assert_eq!(record["data"]["status"], "cancelled");

    // Tasks: pause and resume, each told to the scheduler like the API's.
    let tasks = tab.get("/console/tasks").await;
    assert!(tasks.body.contains("Weekly digest"));
    assert!(tasks.body.contains("0 9 * * MON"));
    let task_page = format!("/console/tasks/{task}");
    let paused = tab
        .act(&task_page, &format!("{task_page}/pause"), &[])
        .await;
    assert_eq!(paused.location, Some(format!("{task_page}?done=paused")));
    let record = expect_status(app.get(&format!("/scheduled-tasks/{task}")).await, 200).await;
    assert_eq!(record["data"]["status"], "paused");
    let again = tab
        .act(&task_page, &format!("{task_page}/pause"), &[])
        .await;
    assert_eq!(again.status, StatusCode::CONFLICT);
    assert!(again.body.contains("Only a scheduled task can be paused"));
    tab.act(&task_page, &format!("{task_page}/resume"), &[])
        .await;
    let record = expect_status(app.get(&format!("/scheduled-tasks/{task}")).await, 200).await;
    assert_eq!(record["data"]["status"], "scheduled");
    let shown = tab.get(&task_page).await;
    assert!(shown.body.contains("It has not run yet."));

    // Channels: their state and what is wrong with their credentials.
    let live = app.live_channel(NUMBER).await;
    app.graph.invalidate_token(crate::helpers::TOKEN);
    let payload = text_message(NUMBER, SHEENA, "Sheena", "wamid.T1", "hi");
    assert_eq!(app.webhook(Some(&live), &payload).await, 200);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    let problem = loop {
        let record = expect_status(app.get(&format!("/channels/{live}")).await, 200).await;
        if let Some(problem) = record["data"]["credentialsError"].as_str() {
            break problem.to_owned();
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the channel was never marked"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let channels = tab.get("/console/channels").await;
    assert!(channels.body.contains("Sandbox"));
    let row = channels
        .body
        .split(&format!("data-channel=\"{live}\""))
        .nth(1)
        .expect("the live channel's row");
    let row = row.split("</tr>").next().expect("row");
    assert!(row.contains("Main line"));
    assert!(row.contains(r#"<span class="error">"#), "{row}");
    let first_word = problem.split_whitespace().next().expect("a sentence");
    assert!(row.contains(first_word), "{problem} in {row}");
}

#[tokio::test]
async fn successful_sign_ins_are_throttled_per_address_and_a_key_keeps_its_newest_sessions() {
    let app = spawn_app().await;
    let mut statuses = Vec::new();
    let mut first = None;
    let started = std::time::Instant::now();
    // Thirty a minute, refilled one every two seconds: on a loaded machine the loop may take
    // long enough for a refill or two, so it signs in until refused.
    while statuses.len() < 60 && statuses.last() != Some(&429) {
        let mut tab = Tab::new(&app);
        let page = tab
            .post("/console/sign-in", &[("key", app.owner.api_key.as_str())])
            .await;
        statuses.push(page.status.as_u16());
        if first.is_none() && page.status == StatusCode::SEE_OTHER {
            first = Some(tab);
        }
    }
    let allowed = statuses.iter().take_while(|s| **s == 303).count();
    let refilled = usize::try_from(started.elapsed().as_secs() / 2).unwrap_or(usize::MAX);
    assert!(
        (30..=31 + refilled).contains(&allowed) && statuses.last() == Some(&429),
        "30 sign-ins of a minute, then 429: {statuses:?}"
    );
    // A key holds its 20 newest sessions: the first of these thirty was let go.
    let mut first = first.expect("a session");
    let page = first.get("/console/conversations").await;
    assert_eq!(page.status, StatusCode::SEE_OTHER, "{}", page.body);
}

#[tokio::test]
async fn an_operator_sends_a_picture_with_a_caption_from_the_console() {
    use reqwest::multipart::{Form, Part};
    let app = spawn_app().await;
    let channel = app.live_channel(NUMBER).await;
    sheena_writes(&app, &channel, "wamid.F1", "Can I see it?").await;
    let conversation = conversation_of_sheena(&app).await;
    let page_path = format!(
        "/console/conversations/{}",
        conversation["id"].as_str().expect("id")
    );
    let action = format!("{page_path}/reply/file");
    let mut tab = Tab::new(&app);
    tab.sign_in(&app.owner.api_key).await;
    let page = tab.get(&page_path).await;
    assert!(
        page.body.contains(r#"enctype="multipart/form-data""#),
        "{}",
        page.body
    );
    let form = |csrf: &str, bytes: Vec<u8>, name: &str, mime: &str| {
        Form::new()
            .text("csrf", csrf.to_owned())
            .text("caption", "Here it is")
            .part(
                "file",
                Part::bytes(bytes)
                    .file_name(name.to_owned())
                    .mime_str(mime)
                    .expect("mime"),
            )
    };
    let picture: Vec<u8> = (0..20_000).map(|i| (i % 251) as u8).collect();

    // A form from elsewhere, or a file WhatsApp does not send, reaches nothing.
    let forged = tab
        .post_multipart(
            &action,
            form("forged", picture.clone(), "a.png", "image/png"),
        )
        .await;
    assert_eq!(forged.status, StatusCode::FORBIDDEN, "{}", forged.body);
    let csrf = page.csrf();
    let program = tab
        .post_multipart(
            &action,
            form(&csrf, vec![0; 100], "a.exe", "application/x-msdownload"),
        )
        .await;
    assert_eq!(program.status, StatusCode::BAD_REQUEST, "{}", program.body);
    assert!(app.graph.uploads().is_empty());

    let before = app.graph.sent_count();
    let sent = tab
        .post_multipart(&action, form(&csrf, picture, "photo.png", "image/png"))
        .await;
    assert_eq!(sent.status, StatusCode::SEE_OTHER, "{}", sent.body);
    assert_eq!(sent.location, Some(format!("{page_path}?done=sent")));
    let uploads = app.graph.uploads();
    assert_eq!(uploads.len(), 1);
    assert_eq!(uploads[0].size, 20_000);
    let sent = app.wait_for_sends(before + 1).await;
    let last = sent.last().expect("sent");
    assert_eq!(last.body["type"], "image");
    assert_eq!(
        last.body["image"],
        json!({"id": uploads[0].id, "caption": "Here it is"})
    );
}
