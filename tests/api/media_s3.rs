//! The media store on an S3-compatible server: `parley serve` with `media.store = s3` against a
//! real one (moto's server, from PyPI), its credentials from the environment as in production.
//!
//! Without `moto_server` the test says so and passes, unless `PARLEY_S3_TESTS=required` (CI
//! sets it, and installs the server), where a missing server fails it.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use parley_testkit::graph::messages_payload;
use serde_json::{Value, json};

use crate::helpers::{APP_SECRET, TestApp, spawn_app_with};

const NUMBER: &str = "106540352242922";
const SHEENA: &str = "16505551234";
const BUCKET: &str = "parley-media";

/// moto's S3 server on a free loopback port, stopped when dropped.
struct Moto {
    child: Child,
    url: String,
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts moto's server with an empty bucket, or `None` (said on stderr) when the machine has
/// none and the tests do not require one.
async fn moto() -> Option<Moto> {
    parley_actors::llm::install_crypto_provider();
    let required = std::env::var("PARLEY_S3_TESTS").is_ok_and(|v| v == "required");
    let found = Command::new("moto_server")
        .arg("--help")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !found {
        assert!(
            !required,
            "PARLEY_S3_TESTS=required and no moto_server: pip install 'moto[server]'"
        );
        eprintln!("S3 media test skipped: no moto_server (pip install 'moto[server]')");
        return None;
    }
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let child = Command::new("moto_server")
        .args(["-H", "127.0.0.1", "-p", &port.to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start moto_server");
    let moto = Moto {
        child,
        url: format!("http://127.0.0.1:{port}"),
    };
    let http = reqwest::Client::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let made = http.put(format!("{}/{BUCKET}", moto.url)).send().await;
        if made.is_ok_and(|r| r.status().is_success()) {
            return Some(moto);
        }
        assert!(Instant::now() < deadline, "moto_server never answered");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The bucket's objects: `(key, size)`.
async fn objects(moto: &Moto) -> Vec<(String, u64)> {
    let listing = reqwest::get(format!("{}/{BUCKET}?list-type=2", moto.url))
        .await
        .expect("list")
        .text()
        .await
        .expect("listing");
    listing
        .split("<Contents>")
        .skip(1)
        .filter_map(|entry| {
            let field = |name: &str| {
                let open = format!("<{name}>");
                let start = entry.find(&open)? + open.len();
                let end = entry[start..].find('<')? + start;
                Some(entry[start..end].to_owned())
            };
            Some((field("Key")?, field("Size")?.parse().ok()?))
        })
        .collect()
}

#[tokio::test]
async fn a_picture_is_kept_in_an_s3_bucket_under_its_content_address_and_read_back() {
    let Some(moto) = moto().await else {
        return;
    };
    // The in-process server sets up the channel; the binary alone fetches media.
    let app: TestApp = spawn_app_with(|s| {
        s.actors.inbound_sweep_ms = 3_600_000;
        s.media.sweep_ms = 3_600_000;
    })
    .await;
    let channel = app.live_channel(NUMBER).await;
    let bytes: Vec<u8> = (0..700_000).map(|i| (i * 7 % 253) as u8).collect();
    let sha256 = app
        .graph
        .add_media("media-s3-1", bytes.clone(), "image/png");

    let data_dir = tempfile::tempdir().expect("data directory");
    let secret_key = std::fs::read_to_string(app.data_dir().join("secret.key")).expect("key");
    let (dir, graph, model) = (
        data_dir.path().display().to_string(),
        app.graph.base_url(),
        app.model.base_url(),
    );
    let envs = [
        ("PARLEY_DATABASE_URL", app.database_url.as_str()),
        ("PARLEY_DATA_DIR", dir.as_str()),
        ("PARLEY_SECRET_KEY", secret_key.trim()),
        ("PARLEY_LLM_BASE_URL", model.as_str()),
        ("PARLEY_WHATSAPP_GRAPH_URL", graph.as_str()),
        ("PARLEY_WHATSAPP_APP_SECRET", APP_SECRET),
        ("PARLEY_MEDIA_STORE", "s3"),
        ("PARLEY_MEDIA_BUCKET", BUCKET),
        ("PARLEY_MEDIA_ENDPOINT", moto.url.as_str()),
        ("PARLEY_MEDIA_REGION", "us-east-1"),
        ("AWS_ACCESS_KEY_ID", "testing"),
        ("AWS_SECRET_ACCESS_KEY", "testing"),
        ("PARLEY_LOG", "info"),
    ];
    let (child, base) =
        parley_testkit::process::serve(Path::new(env!("CARGO_BIN_EXE_parley")), &envs, None);
    let _served = Killed(child);

    let image = json!({"from": SHEENA, "id": "wamid.S3", "type": "image",
                       "image": {"id": "media-s3-1", "mime_type": "image/png", "sha256": sha256}});
    let status = app
        .graph
        .post_webhook(
            &format!("{base}/webhooks/waba/{channel}"),
            APP_SECRET,
            &messages_payload(NUMBER, SHEENA, "Sheena", image),
        )
        .await;
    assert_eq!(status, 200);

    let http = reqwest::Client::new();
    let key = &app.owner.api_key;
    let deadline = Instant::now() + Duration::from_secs(30);
    let file = loop {
        let listed: Value = http
            .get(format!("{base}/conversations?identity_id=%2B{SHEENA}"))
            .bearer_auth(key)
            .send()
            .await
            .expect("conversations")
            .json()
            .await
            .expect("json");
        let mut found = None;
        if let Some(id) = listed["data"][0]["id"].as_str() {
            let messages: Value = http
                .get(format!("{base}/conversations/{id}/messages"))
                .bearer_auth(key)
                .send()
                .await
                .expect("messages")
                .json()
                .await
                .expect("json");
            found = messages["data"]
                .as_array()
                .into_iter()
                .flatten()
                .flat_map(|m| m["attachments"].as_array().cloned().unwrap_or_default())
                .find(|f| f["status"] != "pending");
        }
        if let Some(file) = found {
            break file;
        }
        assert!(Instant::now() < deadline, "the picture was never settled");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(file["status"], "stored", "{file}");

    let address = format!("{}/{sha256}", app.owner.workspace_id);
    assert_eq!(objects(&moto).await, vec![(address, 700_000)]);
    let id = file["id"].as_str().expect("id");
    let read = http
        .get(format!("{base}/media/{id}"))
        .bearer_auth(key)
        .send()
        .await
        .expect("read");
    assert_eq!(read.status(), 200);
    assert_eq!(read.headers()["content-type"], "image/png");
    assert_eq!(read.bytes().await.expect("body").as_ref(), bytes.as_slice());
    let part = http
        .get(format!("{base}/media/{id}"))
        .bearer_auth(key)
        .header("range", "bytes=-100")
        .send()
        .await
        .expect("range");
    assert_eq!(part.status(), 206);
    assert_eq!(
        part.headers()["content-range"],
        "bytes 699900-699999/700000"
    );
    assert_eq!(
        part.bytes().await.expect("body").as_ref(),
        &bytes[699_900..]
    );
    // Nothing of it on the node's disk.
    assert!(!data_dir.path().join("media").exists());
}

/// A process killed and waited for when dropped.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
