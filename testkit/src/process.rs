//! `parley serve` as a process of its own, for the tests and benches that kill, freeze or
//! cluster real servers: started with JSON logs on a free loopback port, answered once it
//! listens.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::Value;

/// Starts `binary serve --bind 127.0.0.1:0` with `envs` and answers the process and its base
/// URL once it logs that it listens. With `echo`, every log line is printed to stderr behind
/// that prefix (to read what a node did when a test fails).
///
/// # Panics
/// When the process cannot start or does not listen within a minute.
#[allow(clippy::expect_used)]
pub fn serve(binary: &Path, envs: &[(&str, &str)], echo: Option<&'static str>) -> (Child, String) {
    let mut child = Command::new(binary)
        .args(["--log-format", "json", "serve", "--bind", "127.0.0.1:0"])
        .envs(envs.iter().copied())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn parley serve");
    let stderr = child.stderr.take().expect("stderr");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if let Some(prefix) = echo {
                eprintln!("{prefix}{line}");
            }
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

/// A `parley serve` process with a data directory of its own, killed and waited for when
/// dropped: one node of a cluster test or bench.
pub struct Served {
    /// The process, for signals.
    pub child: Child,
    /// Its base URL.
    pub url: String,
    _dir: tempfile::TempDir,
}

impl Served {
    /// Starts `binary` as [`serve`] does, with `envs` and `PARLEY_DATA_DIR` a new temporary
    /// directory that lives as long as the process.
    ///
    /// # Panics
    /// When the directory cannot be made, or as [`serve`].
    #[allow(clippy::expect_used)]
    pub fn start(binary: &Path, envs: &[(&str, &str)], echo: Option<&'static str>) -> Self {
        let dir = tempfile::tempdir().expect("data directory");
        let data_dir = dir.path().display().to_string();
        let mut all = vec![("PARLEY_DATA_DIR", data_dir.as_str())];
        all.extend_from_slice(envs);
        let (child, url) = serve(binary, &all, echo);
        Self {
            child,
            url,
            _dir: dir,
        }
    }

    /// Sends the process `signal` (`-STOP`, `-CONT`, `-TERM`, …) with `kill`.
    ///
    /// # Panics
    /// When `kill` cannot run or fails.
    #[allow(clippy::expect_used)]
    pub fn signal(&self, signal: &str) {
        let sent = Command::new("kill")
            .args([signal, &self.child.id().to_string()])
            .status()
            .expect("kill");
        assert!(sent.success(), "kill {signal}");
    }

    /// The cluster's nodes as this server's `GET /admin/actors` answers them.
    ///
    /// # Errors
    /// When the server cannot be reached or does not answer JSON.
    pub async fn cluster_nodes(
        &self,
        http: &reqwest::Client,
        operator_token: &str,
    ) -> Result<Vec<Value>, reqwest::Error> {
        let body: Value = http
            .get(format!("{}/admin/actors", self.url))
            .bearer_auth(operator_token)
            .send()
            .await?
            .json()
            .await?;
        Ok(body["data"]["nodes"]
            .as_array()
            .cloned()
            .unwrap_or_default())
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
