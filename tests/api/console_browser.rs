//! The operator console in a real headless Chromium (Debian's `chromium` and `chromium-driver`,
//! driven over WebDriver): sign in, see a conversation appear live, hand it over, reply (the
//! reply leaves through the channel), resume, look at flows, tasks and channels, sign out; at
//! desktop and at phone width; no request leaves the machine and no script fails. Screenshots
//! of every page go to `<target>/tmp/console-screenshots/` (not committed).
//!
//! Without Chromium the test says so and passes, unless `PARLEY_BROWSER_TESTS=required` (CI
//! sets it, and installs the browser), where a missing browser fails it.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use fantoccini::{Client, ClientBuilder, Locator};
use parley_testkit::graph::text_message;
use serde_json::{Value, json};

use crate::flows::{campaign, people, sandbox_with_template};
use crate::helpers::{TestApp, expect_status, spawn_app};

const CHROMIUM: &str = "/usr/bin/chromium";
const DRIVER: &str = "/usr/bin/chromedriver";
const NUMBER: &str = "106540352242922";
const SHEENA: &str = "16505551234";

/// chromedriver on a free port, stopped when dropped.
struct Driver {
    child: Child,
    url: String,
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// chromedriver, or `None` (said on stderr) when the machine has no browser and the tests do
/// not require one.
async fn driver() -> Option<Driver> {
    let required = std::env::var("PARLEY_BROWSER_TESTS").is_ok_and(|v| v == "required");
    if !Path::new(CHROMIUM).exists() || !Path::new(DRIVER).exists() {
        assert!(
            !required,
            "PARLEY_BROWSER_TESTS=required and no browser: apt-get install -y chromium chromium-driver"
        );
        eprintln!(
            "console browser test skipped: no {CHROMIUM} or {DRIVER} \
             (apt-get install -y chromium chromium-driver)"
        );
        return None;
    }
    parley_actors::llm::install_crypto_provider();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let child = Command::new(DRIVER)
        .arg(format!("--port={port}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("chromedriver starts");
    let url = format!("http://127.0.0.1:{port}");
    let driver = Driver { child, url };
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        if let Ok(answer) = reqwest::get(format!("{}/status", driver.url)).await
            && answer.status().is_success()
        {
            return Some(driver);
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "chromedriver did not come up"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A headless Chromium that reaches nothing but loopback, with its own empty profile.
async fn browser(driver: &Driver, profile: &Path) -> Client {
    let args = [
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-quic",
        "--disable-features=Translate,OptimizationHints,MediaRouter",
        "--window-size=1280,900",
    ];
    let mut args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
    args.push(format!("--user-data-dir={}", profile.display()));
    let capabilities = json!({
        "browserName": "chrome",
        "goog:chromeOptions": {"binary": CHROMIUM, "args": args},
        "goog:loggingPrefs": {"browser": "ALL"},
    });
    let Value::Object(capabilities) = capabilities else {
        unreachable!("an object")
    };
    ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
        .capabilities(capabilities)
        .connect(&driver.url)
        .await
        .expect("a browser session")
}

/// Where the screenshots go.
fn shots() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("console-screenshots");
    std::fs::create_dir_all(&dir).expect("screenshot folder");
    dir
}

/// One visited page's checks: every resource it loaded came from the server, then a
/// screenshot named `name`.
async fn looked_at(page: &Client, app: &TestApp, name: &str) {
    let loaded = page
        .execute(
            "return performance.getEntriesByType('resource').map(e => e.name)\
                    .concat([location.href]);",
            vec![],
        )
        .await
        .expect("resource timings");
    for url in loaded.as_array().expect("a list") {
        let url = url.as_str().expect("a URL");
        assert!(
            url.starts_with(&app.address) || url.starts_with("data:"),
            "{name}: a request left the machine: {url}"
        );
    }
    // Every control has a label a screen reader can say.
    let unlabelled = page
        .execute(
            "return [...document.querySelectorAll('input:not([type=hidden]), select, textarea')]\
               .filter(e => !(e.labels && e.labels.length) && !e.getAttribute('aria-label'))\
               .map(e => e.outerHTML);",
            vec![],
        )
        .await
        .expect("controls");
    assert_eq!(unlabelled, json!([]), "{name}: controls without a label");
    let png = page.screenshot().await.expect("screenshot");
    std::fs::write(shots().join(format!("{name}.png")), png).expect("screenshot written");
}

/// The browser's console so far: fails on any error (a script error, a refused resource, a
/// policy violation) but those `expected` (substrings of their messages).
async fn no_errors(page: &Client, driver: &Driver, expected: &[&str]) {
    let session = page.session_id().await.expect("session").expect("an id");
    let logs: Value = reqwest::Client::new()
        .post(format!("{}/session/{session}/se/log", driver.url))
        .json(&json!({"type": "browser"}))
        .send()
        .await
        .expect("browser log")
        .json()
        .await
        .expect("log entries");
    let severe: Vec<&Value> = logs["value"]
        .as_array()
        .expect("entries")
        .iter()
        .filter(|entry| entry["level"] == "SEVERE")
        .filter(|entry| {
            let message = entry["message"].as_str().unwrap_or_default();
            !expected.iter().any(|e| message.contains(e))
        })
        .collect();
    assert!(severe.is_empty(), "the browser logged errors: {severe:?}");
}

/// Waits until `css` matches an element whose text holds `text`.
async fn wait_for_text(page: &Client, css: &str, text: &str) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    loop {
        if let Ok(found) = page.find(Locator::Css(css)).await
            && found.text().await.is_ok_and(|t| t.contains(text))
        {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{css} never said {text:?}; the page: {}",
            page.source().await.unwrap_or_default()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn click(page: &Client, css: &str) {
    page.find(Locator::Css(css))
        .await
        .unwrap_or_else(|e| panic!("{css}: {e}"))
        .click()
        .await
        .unwrap_or_else(|e| panic!("clicking {css}: {e}"));
}

/// Clicks `css` inside a region htmx may swap at any moment (a live list): found and clicked in
/// one step in the page, so the element cannot go stale between the two.
async fn click_live(page: &Client, css: &str) {
    let clicked = page
        .execute(
            "const e = document.querySelector(arguments[0]); if (e) { e.click(); } return !!e;",
            vec![json!(css)],
        )
        .await
        .unwrap_or_else(|e| panic!("clicking {css}: {e}"));
    assert_eq!(clicked, json!(true), "nothing matches {css}");
}

async fn type_into(page: &Client, css: &str, text: &str) {
    page.find(Locator::Css(css))
        .await
        .unwrap_or_else(|e| panic!("{css}: {e}"))
        .send_keys(text)
        .await
        .unwrap_or_else(|e| panic!("typing into {css}: {e}"));
}

async fn mode_of(app: &TestApp, id: &str) -> Value {
    expect_status(app.get(&format!("/conversations/{id}")).await, 200).await["data"]["mode"].clone()
}

#[tokio::test]
async fn an_operator_steps_into_a_live_conversation_in_chromium() {
    let Some(driver) = driver().await else {
        return;
    };
    let app = spawn_app().await;
    let channel = app.live_channel(NUMBER).await;
    let profile = tempfile::tempdir().expect("profile");
    let page = browser(&driver, profile.path()).await;

    // Sign in: the console sends to its sign-in page first.
    page.goto(&format!("{}/console", app.address))
        .await
        .expect("console");
    wait_for_text(&page, "h1", "Parley console").await;
    looked_at(&page, &app, "01-sign-in").await;
    // An admin's key signs in from the folded form below the operators' one.
    click(&page, "details summary").await;
    type_into(&page, "#key", "prl_not-a-key").await;
    click(&page, "#key-sign-in-button").await;
    wait_for_text(&page, "#problem", "That key was not accepted").await;
    click(&page, "details summary").await;
    type_into(&page, "#key", &app.owner.api_key).await;
    click(&page, "#key-sign-in-button").await;
    wait_for_text(&page, "h1", "Conversations").await;
    wait_for_text(&page, "#conversation-rows", "No conversations match.").await;

    // A person writes: the conversation appears without a reload.
    let payload = text_message(
        NUMBER,
        SHEENA,
        "Sheena Nelson",
        "wamid.B1",
        "Where is my order?",
    );
    assert_eq!(app.webhook(Some(&channel), &payload).await, 200);
    app.wait_for_sends(1).await;
    wait_for_text(&page, "#conversation-rows", "Sheena Nelson").await;
    looked_at(&page, &app, "02-conversations").await;

    // Open it, hand it over.
    click_live(&page, "li.conversation a").await;
    wait_for_text(&page, "#person", "Sheena Nelson").await;
    wait_for_text(&page, "#messages", "Where is my order?").await;
    let id = page
        .current_url()
        .await
        .expect("url")
        .path()
        .rsplit('/')
        .next()
        .expect("id")
        .to_owned();
    type_into(&page, "#reason", "Asked for a person").await;
    click(&page, "#handoff").await;
    wait_for_text(&page, "#notice", "The conversation is yours").await;
    wait_for_text(&page, "#mode", "A person answers").await;
    assert_eq!(mode_of(&app, &id).await, "human");

    // What the person writes now shows up live and is not answered by the assistant.
    let payload = text_message(
        NUMBER,
        SHEENA,
        "Sheena Nelson",
        "wamid.B2",
        "Hello? Anyone?",
    );
    assert_eq!(app.webhook(Some(&channel), &payload).await, 200);
    wait_for_text(&page, "#messages", "Hello? Anyone?").await;
    assert_eq!(app.graph.sent_count(), 1, "the assistant stayed quiet");

    // Reply: it leaves through the channel.
    type_into(&page, "#reply-text", "Hi Sheena, Rui here. Let me check.").await;
    click(&page, "#reply").await;
    wait_for_text(&page, "#notice", "Your message went out").await;
    let sent = app.wait_for_sends(2).await;
    assert_eq!(
        sent[1].body["text"]["body"],
        "Hi Sheena, Rui here. Let me check."
    );
    wait_for_text(&page, "#messages", "Rui here").await;
    looked_at(&page, &app, "03-conversation-human").await;

    // Give it back.
    click(&page, "#resume").await;
    wait_for_text(
        &page,
        "#notice",
        "The assistant answers this conversation again",
    )
    .await;
    assert_eq!(mode_of(&app, &id).await, "assistant");

    // At phone width every page fits the screen (tables scroll inside their box).
    page.set_window_size(390, 844).await.expect("phone width");
    let conversation_url = page.current_url().await.expect("url").to_string();
    for (path, shot) in [
        (conversation_url.as_str(), "04-conversation-phone"),
        (
            &format!("{}/console/conversations", app.address),
            "04-conversations-phone",
        ),
        (&format!("{}/console/flows", app.address), "04-flows-phone"),
    ] {
        page.goto(path).await.expect("page");
        wait_for_text(&page, "h1", "").await;
        let fits = page
            .execute(
                "return document.documentElement.scrollWidth <= window.innerWidth;",
                vec![],
            )
            .await
            .expect("widths");
        assert_eq!(
            fits,
            json!(true),
            "{shot}: no sideways scrolling at phone width"
        );
        looked_at(&page, &app, shot).await;
    }
    page.set_window_size(1280, 900)
        .await
        .expect("desktop width");

    // A flow waiting as a draft is cancelled from its page.
    let sandbox = sandbox_with_template(&app, "Sandbox").await;
    let campaign = campaign(&app, &sandbox, "Welcome", json!({})).await;
    let people = people(&app, 3).await;
    let flow = app
        .created(
            "/flows",
            json!({"channelUid": sandbox, "campaignUid": campaign, "contactUids": people,
                   "status": "draft", "description": "Winter promo"}),
        )
        .await;
    let flow = flow["uid"].as_str().expect("uid").to_owned();

    // The other pages.
    for (link, heading, shot) in [
        ("Flows", "Flows", "05-flows"),
        ("Tasks", "Scheduled tasks", "06-tasks"),
        ("Channels", "Channels", "07-channels"),
    ] {
        page.find(Locator::LinkText(link))
            .await
            .expect("nav link")
            .click()
            .await
            .expect("follow");
        wait_for_text(&page, "h1", heading).await;
        looked_at(&page, &app, shot).await;
    }
    wait_for_text(&page, "table.channels", "Main line").await;
    page.find(Locator::LinkText("Flows"))
        .await
        .expect("nav link")
        .click()
        .await
        .expect("follow");
    wait_for_text(&page, "#flow-rows", "Winter promo").await;
    click(
        &page,
        &format!("form[action='/console/flows/{flow}/cancel'] button"),
    )
    .await;
    wait_for_text(&page, "#notice", "The flow is cancelled").await;
    wait_for_text(&page, "#flow-rows", "cancelled").await;
    let record = expect_status(app.get(&format!("/flows/{flow}")).await, 200).await;
    assert_eq!(record["data"]["status"], "cancelled");

    // Sign out.
    click(&page, "#sign-out").await;
    wait_for_text(&page, "#notice", "You signed out.").await;
    page.goto(&format!("{}/console/conversations", app.address))
        .await
        .expect("after sign-out");
    wait_for_text(&page, "h1", "Parley console").await;

    // The one error on the way is the wrong key's answer, on purpose.
    let refused_key = "/console/sign-in - Failed to load resource: the server responded with a \
                       status of 401";
    no_errors(&page, &driver, &[refused_key]).await;
    page.close().await.expect("browser closed");
}

/// Invites `name` at `email` as `role` through the API; answers the link's path.
async fn invited(app: &TestApp, email: &str, name: &str, role: &str) -> String {
    let created = expect_status(
        app.send_json(
            reqwest::Method::POST,
            "/workspace/operators",
            &json!({"email": email, "name": name, "role": role}),
        )
        .await,
        201,
    )
    .await;
    let url = created["data"]["invitation"]["url"].as_str().expect("link");
    url[url.find("/console/").expect("path")..].to_owned()
}

/// In `page`, answers the invitation at `link` with `password`, then signs in as `email`.
async fn joins(page: &Client, base: &str, link: &str, email: &str, password: &str) {
    page.goto(&format!("{base}{link}"))
        .await
        .expect("invitation");
    wait_for_text(page, "#invited-email", email).await;
    type_into(page, "#password", password).await;
    type_into(page, "#confirm", password).await;
    click(page, "#set-password").await;
    wait_for_text(page, "#notice", "Your password is set").await;
    type_into(page, "#email", email).await;
    type_into(page, "#password", password).await;
    click(page, "#sign-in").await;
    wait_for_text(page, "h1", "Conversations").await;
}

#[tokio::test]
async fn two_operators_share_a_conversation_live_and_a_session_outlives_its_server_in_chromium() {
    let Some(driver) = driver().await else {
        return;
    };
    let app = spawn_app().await;
    let channel = app.live_channel(NUMBER).await;
    let (ana_profile, bo_profile) = (
        tempfile::tempdir().expect("profile"),
        tempfile::tempdir().expect("profile"),
    );
    let ana = browser(&driver, ana_profile.path()).await;
    let bo = browser(&driver, bo_profile.path()).await;

    // Two people, each invited, each with their own password and session.
    let ana_link = invited(&app, "ana@acme.test", "Ana Supervisora", "supervisor").await;
    let bo_link = invited(&app, "bo@acme.test", "Boris Agente", "agent").await;
    joins(
        &ana,
        &app.address,
        &ana_link,
        "ana@acme.test",
        "sunlit harbour 2031",
    )
    .await;
    joins(
        &bo,
        &app.address,
        &bo_link,
        "bo@acme.test",
        "quiet meadow 7788",
    )
    .await;
    wait_for_text(&ana, "#operator-name", "Ana Supervisora").await;
    wait_for_text(&bo, "#operator-name", "Boris Agente").await;

    // A person writes: both inboxes show it without a reload, in the queue.
    let payload = text_message(
        NUMBER,
        SHEENA,
        "Sheena Nelson",
        "wamid.C1",
        "My parcel is late",
    );
    assert_eq!(app.webhook(Some(&channel), &payload).await, 200);
    app.wait_for_sends(1).await;
    wait_for_text(&ana, "#conversation-rows", "Sheena Nelson").await;
    wait_for_text(&bo, "#conversation-rows", "unassigned").await;

    // The supervisor assigns it to the agent; the agent's inbox says so live.
    click_live(&ana, "li.conversation a").await;
    wait_for_text(&ana, "#person", "Sheena Nelson").await;
    let conversation_url = ana.current_url().await.expect("url").to_string();
    ana.find(Locator::Css("#assign-to"))
        .await
        .expect("assignee list")
        .select_by_label("Boris Agente")
        .await
        .expect("chosen");
    click(&ana, "#assign").await;
    wait_for_text(&ana, "#assignment", "Assigned to Boris Agente").await;
    wait_for_text(&bo, "#conversation-rows", "Boris Agente").await;
    looked_at(&ana, &app, "08-assigned").await;

    // The agent writes a private note; the supervisor's page shows it live; it never leaves.
    bo.goto(&conversation_url).await.expect("conversation");
    wait_for_text(&bo, "#assignment", "Assigned to Boris Agente").await;
    assert!(
        bo.find(Locator::Css("#assign-to")).await.is_err(),
        "an agent is offered no one else to assign"
    );
    type_into(&bo, "#note-text", "Refund approved, tell her kindly").await;
    click(&bo, "#add-note").await;
    wait_for_text(&bo, "#notice", "Your note is kept").await;
    wait_for_text(&ana, "#notes", "Refund approved, tell her kindly").await;
    looked_at(&bo, &app, "09-note").await;
    let payload = text_message(NUMBER, SHEENA, "Sheena Nelson", "wamid.C2", "Any news?");
    assert_eq!(app.webhook(Some(&channel), &payload).await, 200);
    let sent = app.wait_for_sends(2).await;
    for request in app.model.requests() {
        assert!(
            !request.to_string().contains("Refund approved"),
            "the model never reads a note"
        );
    }
    for message in &sent {
        assert!(!message.body.to_string().contains("Refund approved"));
    }

    // The same session on another server of the same database, and over that server's restart.
    let (mut second, second_base) = crate::durability::serve(&app);
    let elsewhere = conversation_url.replace(&app.address, &second_base);
    ana.goto(&elsewhere).await.expect("second server");
    wait_for_text(&ana, "#operator-name", "Ana Supervisora").await;
    wait_for_text(&ana, "#notes", "Refund approved").await;
    // Back on the first server before the second stops, so no live stream is cut mid-way.
    ana.goto(&conversation_url).await.expect("first server");
    wait_for_text(&ana, "#person", "Sheena Nelson").await;
    let _ = second.kill();
    let _ = second.wait();
    let (mut restarted, restarted_base) = crate::durability::serve(&app);
    ana.goto(&conversation_url.replace(&app.address, &restarted_base))
        .await
        .expect("restarted server");
    wait_for_text(&ana, "#operator-name", "Ana Supervisora").await;
    ana.goto(&conversation_url).await.expect("first server");
    wait_for_text(&ana, "#person", "Sheena Nelson").await;
    let _ = restarted.kill();
    let _ = restarted.wait();

    no_errors(&ana, &driver, &[]).await;
    no_errors(&bo, &driver, &[]).await;
    ana.close().await.expect("closed");
    bo.close().await.expect("closed");
}
