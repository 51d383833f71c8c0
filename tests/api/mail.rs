//! Operators' invitations mailed through a real SMTP server: aiosmtpd's (from PyPI), printing
//! every mail it takes. Without it the test says so and passes, unless
//! `PARLEY_SMTP_TESTS=required` (CI sets it, and installs the server), where a missing server
//! fails it.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use parley::config::Secret;
use serde_json::json;

use crate::helpers::{expect_status, spawn_app_with};

/// aiosmtpd on a free port, stopped when dropped; what it printed goes to `printed`.
struct Sink {
    child: Child,
    port: u16,
    printed: PathBuf,
    _dir: tempfile::TempDir,
}

impl Drop for Sink {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Sink {
    /// What it printed of the mails it took, quoted-printable's soft line breaks joined (as a
    /// mail reader shows it).
    fn mails(&self) -> String {
        std::fs::read_to_string(&self.printed)
            .unwrap_or_default()
            .replace("=\r\n", "")
            .replace("=\n", "")
    }
}

fn installed() -> bool {
    Command::new("python3")
        .args(["-m", "aiosmtpd", "--version"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// An SMTP sink, or `None` (said on stderr) when there is none and the tests do not require
/// one.
async fn sink() -> Option<Sink> {
    let required = std::env::var("PARLEY_SMTP_TESTS").is_ok_and(|v| v == "required");
    if !installed() {
        assert!(
            !required,
            "PARLEY_SMTP_TESTS=required and no aiosmtpd: pip install aiosmtpd"
        );
        eprintln!("mail test skipped: no aiosmtpd (pip install aiosmtpd)");
        return None;
    }
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let dir = tempfile::tempdir().expect("a folder");
    let printed = dir.path().join("mails.txt");
    let out = std::fs::File::create(&printed).expect("the sink's output");
    let child = Command::new("python3")
        .args([
            "-m",
            "aiosmtpd",
            "-n",
            "-c",
            "aiosmtpd.handlers.Debugging",
            "-l",
            &format!("127.0.0.1:{port}"),
        ])
        .env("PYTHONUNBUFFERED", "1")
        .stdout(out)
        .stderr(Stdio::null())
        .spawn()
        .expect("start aiosmtpd");
    let sink = Sink {
        child,
        port,
        printed,
        _dir: dir,
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "aiosmtpd never listened");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Some(sink)
}

#[tokio::test]
async fn an_invitation_is_mailed_through_the_relay_with_its_link() {
    let Some(sink) = sink().await else {
        return;
    };
    let relay = format!("smtp://127.0.0.1:{}", sink.port);
    let app = spawn_app_with(|s| {
        s.mail.smtp_url = Some(Secret(relay));
        s.mail.from = Some("Acme desk <desk@acme.test>".to_owned());
    })
    .await;

    let created = expect_status(
        app.send_json(
            reqwest::Method::POST,
            "/workspace/operators",
            &json!({"email": "ana@acme.test", "name": "Ana"}),
        )
        .await,
        201,
    )
    .await;
    assert_eq!(created["data"]["invitation"]["mailed"], true);
    let link = created["data"]["invitation"]["url"]
        .as_str()
        .expect("link")
        .to_owned();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let mails = sink.mails();
        if mails.contains(&link) {
            assert!(mails.contains("ana@acme.test"), "{mails}");
            assert!(mails.contains("desk@acme.test"), "{mails}");
            break;
        }
        assert!(Instant::now() < deadline, "no mail with the link: {mails}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn a_relay_that_cannot_be_reached_still_answers_the_link() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let app = spawn_app_with(|s| {
        s.mail.smtp_url = Some(Secret(format!("smtp://127.0.0.1:{closed}")));
    })
    .await;
    let created = expect_status(
        app.send_json(
            reqwest::Method::POST,
            "/workspace/operators",
            &json!({"email": "bo@acme.test"}),
        )
        .await,
        201,
    )
    .await;
    assert_eq!(created["data"]["invitation"]["mailed"], false);
    assert!(
        created["data"]["invitation"]["url"]
            .as_str()
            .expect("link")
            .contains("/console/invitation/")
    );
}
