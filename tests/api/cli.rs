//! The operator's commands, run as the real binary against the test's database.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::helpers::{expect_status, spawn_app};

fn parley(database_url: &str) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_parley"));
    command
        .arg("--database-url")
        .arg(database_url)
        .env("PARLEY_LOG", "warn")
        .env_remove("PARLEY_DATABASE_URL");
    command
}

#[tokio::test]
async fn bootstrap_json_prints_exactly_one_object_whose_key_works() {
    let app = spawn_app().await;

    let output = parley(&app.database_url)
        .args([
            "admin",
            "bootstrap",
            "--workspace",
            "Initech",
            "--business",
            "Initech",
            "--email",
            "Peter@Initech.test",
            "--json",
        ])
        .output()
        .expect("run parley");

    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let stdout = String::from_utf8(output.stdout).expect("utf-8");
    assert_eq!(stdout.trim().lines().count(), 1, "one line: {stdout}");
    let printed: Value = serde_json::from_str(stdout.trim()).expect("one JSON object");
    let mut keys: Vec<_> = printed
        .as_object()
        .expect("object")
        .keys()
        .cloned()
        .collect();
    keys.sort();
    assert_eq!(keys, ["api_key", "business_id", "user_id", "workspace_id"]);

    let key = printed["api_key"].as_str().expect("key");
    let listed = expect_status(app.get_with("/workspace", key).await, 200).await;
    assert_eq!(listed["data"][0]["name"], "Initech");
    assert_eq!(listed["data"][0]["id"], printed["workspace_id"]);
    let keys = expect_status(app.get_with("/workspace/api-keys", key).await, 200).await;
    assert_eq!(
        keys["data"][0]["permissions"],
        serde_json::json!(["read", "write", "admin"])
    );
}

#[tokio::test]
async fn bootstrapping_an_existing_workspace_name_again_fails_with_a_hint() {
    let app = spawn_app().await;

    let output = parley(&app.database_url)
        .args([
            "admin",
            "bootstrap",
            "--workspace",
            "Acme",
            "--business",
            "Acme Inc",
        ])
        .output()
        .expect("run parley");

    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("create-key"), "{stderr}");
}

#[tokio::test]
async fn create_key_issues_a_key_with_the_given_permissions() {
    let app = spawn_app().await;

    let output = parley(&app.database_url)
        .args([
            "admin",
            "create-key",
            "--workspace",
            &app.owner.workspace_id.to_string(),
            "--name",
            "ops",
            "--permissions",
            "read",
            "--json",
        ])
        .output()
        .expect("run parley");

    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let printed: Value = serde_json::from_slice(&output.stdout).expect("JSON");
    let key = printed["api_key"].as_str().expect("key");
    expect_status(app.get_with("/workspace", key).await, 200).await;
    let response = app
        .send_json_with(
            reqwest::Method::POST,
            "/workspace",
            key,
            &serde_json::json!({"name": "x"}),
        )
        .await;
    assert_eq!(response.status().as_u16(), 403);
}

#[tokio::test]
async fn create_key_for_an_unknown_workspace_fails() {
    let app = spawn_app().await;

    let output = parley(&app.database_url)
        .args([
            "admin",
            "create-key",
            "--workspace",
            "424242",
            "--name",
            "ops",
        ])
        .output()
        .expect("run parley");

    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("424242"));
}

#[tokio::test]
async fn migrate_applies_the_schema_to_a_fresh_database() {
    let dir = tempfile::tempdir().expect("dir");

    let output = Command::new(env!("CARGO_BIN_EXE_parley"))
        .arg("--data-dir")
        .arg(dir.path())
        .arg("migrate")
        .env_remove("PARLEY_DATABASE_URL")
        .output()
        .expect("run parley");

    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(dir.path().join("parley.db").exists());
}

/// Serve on an empty database: the log tells how to bootstrap, and SIGTERM stops the server and
/// its actors cleanly with exit status 0.
#[test]
fn serve_on_an_empty_database_explains_bootstrap_and_stops_cleanly_on_sigterm() {
    let dir = tempfile::tempdir().expect("dir");
    let mut child = Command::new(env!("CARGO_BIN_EXE_parley"))
        .arg("--data-dir")
        .arg(dir.path())
        .args(["--log-format", "json", "serve", "--bind", "127.0.0.1:0"])
        .env("PARLEY_LOG", "info")
        .env_remove("PARLEY_DATABASE_URL")
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn parley serve");
    let mut lines = BufReader::new(child.stderr.take().expect("stderr")).lines();

    let mut seen = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while !seen.iter().any(|l: &Value| l["message"] == "listening") {
        assert!(Instant::now() < deadline, "never listened: {seen:?}");
        let line = lines.next().expect("a log line").expect("readable");
        seen.push(serde_json::from_str(&line).unwrap_or(Value::String(line)));
    }
    assert!(
        seen.iter().any(|l| l["message"]
            .as_str()
            .is_some_and(|m| m.contains("parley admin bootstrap"))),
        "no bootstrap hint in {seen:?}"
    );
    for supervisor in [
        "root/channels",
        "root/conversations",
        "root/flows",
        "root/scheduler",
    ] {
        assert!(
            seen.iter()
                .any(|l| l["message"] == "actor spawned" && l["actor"] == supervisor),
            "{supervisor} not spawned: {seen:?}"
        );
    }

    let killed = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("kill");
    assert!(killed.success());
    let rest: Vec<Value> = lines
        .map_while(Result::ok)
        .map(|l| serde_json::from_str(&l).unwrap_or(Value::String(l)))
        .collect();
    let status = child.wait().expect("exit");
    assert!(status.success(), "exit {status:?}; log {rest:?}");
    assert!(
        rest.iter().any(|l| l["message"] == "actor runtime stopped"),
        "{rest:?}"
    );
    assert!(rest.iter().any(|l| l["message"] == "stopped"), "{rest:?}");
}

#[cfg(unix)]
#[test]
fn the_embedded_database_and_its_directory_are_readable_by_the_owner_only() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().expect("dir");
    let data = dir.path().join("fresh");

    let output = Command::new(env!("CARGO_BIN_EXE_parley"))
        .arg("--data-dir")
        .arg(&data)
        .arg("migrate")
        .env_remove("PARLEY_DATABASE_URL")
        .output()
        .expect("run parley");

    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let mode =
        |p: &std::path::Path| std::fs::metadata(p).expect("metadata").permissions().mode() & 0o777;
    assert_eq!(mode(&data), 0o700);
    assert_eq!(mode(&data.join("parley.db")), 0o600);
}

#[test]
fn a_database_url_on_the_command_line_is_warned_about() {
    let dir = tempfile::tempdir().expect("dir");
    let url = parley_persistence::sqlite_url_in(dir.path());

    let output = parley(&url).arg("migrate").output().expect("run parley");

    assert!(output.status.success());
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("process list"),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}
