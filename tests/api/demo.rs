//! The README's first command: `parley serve --demo`, offline, answering the sandbox, calling
//! its MCP tool and sending its campaign template by a flow.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

#[tokio::test]
async fn the_offline_demo_answers_remembers_calls_its_mcp_tool_and_sends_a_flow() {
    parley_actors::llm::install_crypto_provider();
    let dir = tempfile::tempdir().expect("dir");
    let mut child = Command::new(env!("CARGO_BIN_EXE_parley"))
        .args(["serve", "--demo", "--bind", "127.0.0.1:0", "--data-dir"])
        .arg(dir.path())
        .env("PARLEY_LOG", "warn")
        .env_remove("PARLEY_DATABASE_URL")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn the demo");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let (mut base, mut key, mut channel) = (String::new(), String::new(), String::new());
    let mut docs = String::new();
    while channel.is_empty() {
        let line = lines
            .next()
            .expect("the demo prints its walkthrough")
            .expect("line");
        if let Some(rest) = line.strip_prefix("Parley demo is running offline at ") {
            base = rest.trim().to_owned();
        } else if let Some(rest) =
            line.strip_prefix("API docs (try every endpoint; Authorize with the key): ")
        {
            docs = rest.trim().to_owned();
        } else if let Some(rest) = line.strip_prefix("API key (all permissions): ") {
            key = rest.trim().to_owned();
        } else if let Some(at) = line.find("/channels/") {
            channel = line[at + 10..]
                .split('/')
                .next()
                .unwrap_or_default()
                .to_owned();
        }
    }
    let http = reqwest::Client::new();

    // The printout links the docs page, and the page is there.
    assert_eq!(docs, format!("{base}/docs"));
    let page = http.get(&docs).send().await.expect("docs");
    assert_eq!(page.status().as_u16(), 200);
    assert!(page.text().await.expect("html").contains("swagger-ui"));

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
        let outbox: Value = http
            .get(format!("{base}/channels/{channel}/sandbox/outbox"))
            .bearer_auth(&key)
            .send()
            .await
            .expect("outbox")
            .json()
            .await
            .expect("json");
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
    let servers: Value = http
        .get(format!("{base}/workspace/mcps"))
        .bearer_auth(&key)
        .send()
        .await
        .expect("mcps")
        .json()
        .await
        .expect("json");
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
        let read: Value = http
            .get(format!("{base}/flows/{uid}"))
            .bearer_auth(&key)
            .send()
            .await
            .expect("flow")
            .json()
            .await
            .expect("json");
        if read["data"]["status"] == "completed" {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the demo flow never completed: {read}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let outbox: Value = http
        .get(format!("{base}/channels/{channel}/sandbox/outbox"))
        .bearer_auth(&key)
        .send()
        .await
        .expect("outbox")
        .json()
        .await
        .expect("json");
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
