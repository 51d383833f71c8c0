//! Nothing lost, nothing answered twice: a server killed between storing a webhook event and
//! replying answers it exactly once after a restart.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use parley_testkit::Reply;
use parley_testkit::graph::text_message;
use serde_json::Value;

use crate::helpers::{APP_SECRET, TestApp, spawn_app};

const NUMBER: &str = "106540352242922";

/// `parley serve` as a separate process on the test's database, fakes and secret key; answers
/// the process and its base URL once it listens.
fn serve(app: &TestApp) -> (Child, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_parley"))
        .args(["--log-format", "json", "serve", "--bind", "127.0.0.1:0"])
        .env("PARLEY_DATABASE_URL", &app.database_url)
        .env("PARLEY_DATA_DIR", app.data_dir())
        .env("PARLEY_LLM_BASE_URL", app.model.base_url())
        .env("PARLEY_LLM_TIMEOUT_SECS", "60")
        .env("PARLEY_WHATSAPP_GRAPH_URL", app.graph.base_url())
        .env("PARLEY_WHATSAPP_APP_SECRET", APP_SECRET)
        .env("PARLEY_WHATSAPP_RETRY_BACKOFF_MS", "10")
        .env("PARLEY_LOG", "info")
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn parley serve");
    let stderr = child.stderr.take().expect("stderr");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if let Ok(entry) = serde_json::from_str::<Value>(&line)
                && entry["message"] == "listening"
            {
                let _ = tx.send(entry["addr"].as_str().unwrap_or_default().to_owned());
            }
        }
    });
    let addr = rx
        .recv_timeout(Duration::from_secs(60))
        .expect("the server listens");
    (child, format!("http://{addr}"))
}

#[tokio::test]
async fn a_server_killed_between_storing_an_event_and_replying_answers_it_once_after_restart() {
    let app = spawn_app().await;
    let channel = app.live_channel(NUMBER).await;
    // The first model call never answers: the process dies while the turn waits for it.
    app.model.push([Reply::Hang]);
    let (mut first, base) = serve(&app);
    let payload = text_message(
        NUMBER,
        "16505551234",
        "Sheena",
        "wamid.CRASH1",
        "Is my order late?",
    );
    let status = app
        .graph
        .post_webhook(
            &format!("{base}/webhooks/waba/{channel}"),
            APP_SECRET,
            &payload,
        )
        .await;
    assert_eq!(status, 200);
    let deadline = Instant::now() + Duration::from_secs(30);
    while app.model.requests().is_empty() {
        assert!(
            Instant::now() < deadline,
            "the turn never reached the model"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    first.kill().expect("kill -9");
    first.wait().expect("reaped");
    assert!(
        app.graph.sent().is_empty(),
        "nothing was sent before the crash"
    );

    let (mut second, base) = serve(&app);
    let sent = app.wait_for_sends(1).await;
    assert_eq!(sent[0].text(), Some("You said: Is my order late?"));
    assert_eq!(sent[0].body["context"]["message_id"], "wamid.CRASH1");

    // Meta re-delivers the same event after the outage: still one reply.
    let again = app
        .graph
        .post_webhook(
            &format!("{base}/webhooks/waba/{channel}"),
            APP_SECRET,
            &payload,
        )
        .await;
    assert_eq!(again, 200);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(app.graph.sent().len(), 1, "exactly one reply");
    let stored = app.stored_messages("+16505551234").await;
    let roles: Vec<&str> = stored.iter().map(|(role, _)| role.as_str()).collect();
    assert_eq!(
        roles,
        ["user", "assistant"],
        "the message was stored once: {stored:?}"
    );

    second.kill().expect("kill");
    second.wait().expect("reaped");
}
