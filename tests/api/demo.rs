//! The README's first command: `parley serve --demo`, offline, answering the sandbox, calling
//! its MCP tool and sending its campaign template by a flow.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// What the demo's banner says.
struct Banner {
    base: String,
    key: String,
    docs: String,
    console: String,
    channel: String,
    assistant: String,
    operator_token: String,
}

/// Starts `parley serve --demo` on `dir` and reads its banner.
fn start_demo(dir: &std::path::Path) -> (std::process::Child, Banner) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_parley"))
        .args(["serve", "--demo", "--bind", "127.0.0.1:0", "--data-dir"])
        .arg(dir)
        .env("PARLEY_LOG", "warn")
        .env_remove("PARLEY_DATABASE_URL")
        .env_remove("PARLEY_OPERATOR_TOKEN")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn the demo");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let mut banner = Banner {
        base: String::new(),
        key: String::new(),
        docs: String::new(),
        console: String::new(),
        channel: String::new(),
        assistant: String::new(),
        operator_token: String::new(),
    };
    while banner.operator_token.is_empty() {
        let line = lines
            .next()
            .expect("the demo prints its walkthrough")
            .expect("line");
        let after = |prefix: &str| line.strip_prefix(prefix).map(|rest| rest.trim().to_owned());
        if let Some(base) = after("Parley demo is running offline at ") {
            banner.base = base;
        } else if let Some(docs) = after("API docs (try every endpoint; Authorize with the key): ")
        {
            banner.docs = docs;
        } else if let Some(console) = after("Operator console (sign in with the key): ") {
            banner.console = console;
        } else if let Some(key) = after("API key (all permissions, kept across restarts): ") {
            banner.key = key;
        } else if let Some(channel) = after("Sandbox channel: ") {
            banner.channel = channel;
        } else if let Some(assistant) = after("Demo assistant: ") {
            banner.assistant = assistant;
        } else if let Some(token) = after("Operator token: ") {
            banner.operator_token = token;
        }
    }
    // The rest of the walkthrough is read (and dropped) so that the demo never blocks on it.
    std::thread::spawn(move || lines.for_each(drop));
    (child, banner)
}

/// The JSON answer to a GET of `url` with `key`.
async fn read(http: &reqwest::Client, url: String, key: &str) -> Value {
    http.get(&url)
        .bearer_auth(key)
        .send()
        .await
        .expect("a GET")
        .json()
        .await
        .expect("json")
}

#[tokio::test]
async fn the_offline_demo_answers_remembers_calls_its_mcp_tool_and_sends_a_flow() {
    parley_actors::llm::install_crypto_provider();
    let dir = tempfile::tempdir().expect("dir");
    let (mut child, banner) = start_demo(dir.path());
    let Banner {
        base,
        key,
        docs,
        console,
        channel,
        ..
    } = banner;
    let http = reqwest::Client::new();

    // The printout links the docs page, and the page is there.
    assert_eq!(docs, format!("{base}/docs"));
    let page = http.get(&docs).send().await.expect("docs");
    assert_eq!(page.status().as_u16(), 200);
    assert!(page.text().await.expect("html").contains("swagger-ui"));
    // And the console, which sends to its sign-in page.
    assert_eq!(console, format!("{base}/console"));
    let page = http.get(&console).send().await.expect("console");
    assert_eq!(page.status().as_u16(), 200);
    assert!(page.text().await.expect("html").contains("API key"));

    let injected = http
        .post(format!("{base}/channels/{channel}/sandbox/inbound"))
        .bearer_auth(&key)
        .json(&json!({"from": "+351912345678", "name": "Maria", "text": "Hi! My name is Maria"}))
        .send()
        .await
        .expect("inject");
    assert_eq!(injected.status().as_u16(), 201);

    let deadline = Instant::now() + Duration::from_secs(20);
    let outbox = loop {
        let outbox: Value = read(
            &http,
            format!("{base}/channels/{channel}/sandbox/outbox"),
            &key,
        )
        .await;
        if outbox["pagination"]["total"] == 1 {
            break outbox;
        }
        assert!(
            Instant::now() < deadline,
            "no reply in the outbox: {outbox}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(outbox["data"][0]["status"], "delivered");
    assert!(
        outbox["data"][0]["content"]
            .as_str()
            .unwrap_or_default()
            .contains("Nice to meet you")
    );

    let answer: Value = http
        .post(format!("{base}/conversation/+351912345678/chat/{channel}"))
        .bearer_auth(&key)
        .json(&json!({"message": "What is my name?"}))
        .send()
        .await
        .expect("chat")
        .json()
        .await
        .expect("json");
    assert_eq!(answer["message"], "Your name is Maria.");

    // The built-in MCP clock, registered and attached like any server.
    let servers: Value = read(&http, format!("{base}/workspace/mcps"), &key).await;
    assert_eq!(servers["data"][0]["name"], "demo_clock", "{servers}");
    let chat = |message: &'static str| {
        http.post(format!("{base}/conversation/+351912345678/chat/{channel}"))
            .bearer_auth(&key)
            .json(&json!({ "message": message }))
            .send()
    };
    let noted: Value = chat("My timezone is Asia/Tokyo")
        .await
        .expect("chat")
        .json()
        .await
        .expect("json");
    assert_eq!(
        noted["message"], "Noted: your timezone is Asia/Tokyo.",
        "{noted}"
    );
    let told: Value = chat("What time is it?")
        .await
        .expect("chat")
        .json()
        .await
        .expect("json");
    assert_eq!(
        told["data"]["tool_calls"][0]["name"], "demo_clock__current_time",
        "{told}"
    );
    assert_eq!(
        told["data"]["tool_calls"][0]["arguments"],
        json!({"timezone": "Asia/Tokyo"})
    );
    assert!(
        told["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("It is ") && m.ends_with(" in Asia/Tokyo.")),
        "{told}"
    );

    // Step 5: the demo channel's own template, sent to Maria by a campaign flow.
    let campaign: Value = http
        .post(format!("{base}/campaigns"))
        .bearer_auth(&key)
        .json(&json!({"channelUid": channel, "name": "Orders", "status": "ACTIVE",
                      "templateName": "order_update", "templateParamsStrategy": "USE_CONTACT_ASSOCIATION",
                      "templateParameters": {"1": "name", "2": "default"}}))
        .send()
        .await
        .expect("campaign")
        .json()
        .await
        .expect("json");
    let flow: Value = http
        .post(format!("{base}/flows"))
        .bearer_auth(&key)
        .json(
            &json!({"channelUid": channel, "campaignUid": campaign["data"]["uid"],
                      "contactUids": ["+351912345678"]}),
        )
        .send()
        .await
        .expect("flow")
        .json()
        .await
        .expect("json");
    let uid = flow["data"]["uid"].as_str().expect("a flow uid").to_owned();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let flow: Value = read(&http, format!("{base}/flows/{uid}"), &key).await;
        if flow["data"]["status"] == "completed" {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the demo flow never completed: {flow}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let outbox: Value = read(
        &http,
        format!("{base}/channels/{channel}/sandbox/outbox"),
        &key,
    )
    .await;
    let texts: Vec<&str> = outbox["data"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|m| m["content"].as_str())
        .collect();
    assert!(
        texts.contains(&"Hi Maria, your order A-17 has shipped."),
        "{texts:?}"
    );

    child.kill().expect("stop the demo");
    child.wait().expect("reaped");
}

#[tokio::test]
async fn a_restarted_demo_keeps_its_key_its_clocks_address_and_prints_its_operator_token() {
    parley_actors::llm::install_crypto_provider();
    let dir = tempfile::tempdir().expect("dir");
    let http = reqwest::Client::new();
    let clock_url = |base: String, key: String| {
        let http = http.clone();
        async move {
            let servers: Value = read(&http, format!("{base}/workspace/mcps"), &key).await;
            servers["data"][0]["url"]
                .as_str()
                .expect("a url")
                .to_owned()
        }
    };

    let (mut first, before) = start_demo(dir.path());
    let clock_before = clock_url(before.base.clone(), before.key.clone()).await;
    // The assistant the banner names is the demo's, and the operator token reads the metrics.
    let assistant = http
        .get(format!("{}/assistant/{}", before.base, before.assistant))
        .bearer_auth(&before.key)
        .send()
        .await
        .expect("assistant");
    assert_eq!(assistant.status().as_u16(), 200);
    let metrics = http
        .get(format!("{}/metrics", before.base))
        .bearer_auth(&before.operator_token)
        .send()
        .await
        .expect("metrics");
    assert_eq!(metrics.status().as_u16(), 200);
    let actors = Command::new(env!("CARGO_BIN_EXE_parley"))
        .args(["admin", "actors", "--url", &before.base])
        .env("PARLEY_OPERATOR_TOKEN", &before.operator_token)
        .output()
        .expect("parley admin actors");
    assert!(actors.status.success(), "{actors:?}");
    assert!(String::from_utf8_lossy(&actors.stdout).starts_with("root"));
    first.kill().expect("stop the demo");
    first.wait().expect("reaped");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let kept = std::fs::metadata(dir.path().join("demo.json")).expect("the demo keeps a file");
        assert_eq!(kept.permissions().mode() & 0o777, 0o600);
    }

    let (mut second, after) = start_demo(dir.path());
    assert_eq!(after.key, before.key, "the same key is printed again");
    assert_eq!(after.operator_token, before.operator_token);
    assert_eq!(after.assistant, before.assistant);
    assert_eq!(
        clock_url(after.base.clone(), after.key.clone()).await,
        clock_before
    );
    let keys: Value = read(
        &http,
        format!("{}/workspace/api-keys", after.base),
        &after.key,
    )
    .await;
    assert_eq!(keys["pagination"]["total"], 1, "no key piles up: {keys}");
    second.kill().expect("stop the demo");
    second.wait().expect("reaped");
}

/// The sandbox outbox's contents once it holds `count` messages.
async fn outbox_of(
    http: &reqwest::Client,
    base: &str,
    channel: &str,
    key: &str,
    count: usize,
) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let outbox = read(
            http,
            format!("{base}/channels/{channel}/sandbox/outbox"),
            key,
        )
        .await;
        let contents: Vec<String> = outbox["data"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|m| m["content"].as_str().map(str::to_owned))
            .collect();
        if contents.len() >= count {
            return contents;
        }
        assert!(
            Instant::now() < deadline,
            "the demo never answered: {outbox}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn the_offline_demo_sees_a_picture_and_hears_a_voice_note() {
    use reqwest::multipart::{Form, Part};
    parley_actors::llm::install_crypto_provider();
    let dir = tempfile::tempdir().expect("dir");
    let (
        mut child,
        Banner {
            base, key, channel, ..
        },
    ) = start_demo(dir.path());
    let http = reqwest::Client::new();
    let mut png = b"\x89PNG\r\n\x1a\n".to_vec();
    png.resize(3000, 7);
    let sends = [
        Form::new()
            .text("from", "+351912345678")
            .text("caption", "my receipt")
            .part(
                "file",
                Part::bytes(png)
                    .file_name("receipt.png")
                    .mime_str("image/png")
                    .expect("mime"),
            ),
        Form::new()
            .text("from", "+351912345678")
            .text("voice", "true")
            .part(
                "file",
                Part::bytes(vec![1_u8; 2000])
                    .file_name("note.ogg")
                    .mime_str("audio/ogg")
                    .expect("mime"),
            ),
    ];
    for (sent, form) in sends.into_iter().enumerate() {
        let injected = http
            .post(format!("{base}/channels/{channel}/sandbox/inbound/media"))
            .bearer_auth(&key)
            .multipart(form)
            .send()
            .await
            .expect("inject");
        assert_eq!(injected.status().as_u16(), 201);
        // One at a time: each answer is to its own file.
        outbox_of(&http, &base, &channel, &key, sent + 1).await;
    }
    let outbox = outbox_of(&http, &base, &channel, &key, 2).await;
    assert!(
        outbox.iter().any(|m| m.contains("[image] my receipt") && m.contains("(a picture: image/png, 3 KB)")),
        "{outbox:?}"
    );
    assert!(
        outbox
            .iter()
            .any(|m| m.contains("(a recording: audio/ogg, 2 KB)")),
        "{outbox:?}"
    );
    child.kill().expect("kill");
    child.wait().expect("wait");
}
