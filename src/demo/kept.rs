//! What the demo keeps across restarts in its data directory (`demo.json`, readable by the
//! owner only): its API key, its operator token and its built-in servers' ports. A restart
//! prints the same key, and an MCP server registered at the clock's address keeps working.

use std::path::{Path, PathBuf};

use anyhow::Context;
use serde::{Deserialize, Serialize};

/// The file's name in the data directory.
const FILE: &str = "demo.json";

/// What one run hands to the next.
#[derive(Debug, Default, Deserialize, Serialize)]
pub(super) struct Kept {
    /// The key printed in the banner (every permission).
    pub(super) api_key: Option<String>,
    /// The operator token `parley admin actors` and `/metrics` take, unless one is configured.
    pub(super) operator_token: Option<String>,
    /// The built-in MCP clock's loopback port.
    pub(super) clock_port: Option<u16>,
    /// The built-in model's loopback port.
    pub(super) model_port: Option<u16>,
}

impl Kept {
    fn path(data_dir: &Path) -> PathBuf {
        data_dir.join(FILE)
    }

    /// What the last run kept; nothing when there was none or the file does not read.
    pub(super) fn load(data_dir: &Path) -> Self {
        let path = Self::path(data_dir);
        match std::fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes).unwrap_or_else(|error| {
                tracing::warn!(%error, path = %path.display(), "the demo's kept state does not read; starting afresh");
                Self::default()
            }),
            Err(_) => Self::default(),
        }
    }

    /// Writes the file, readable and writable by the owner only.
    ///
    /// # Errors
    /// Fails when the file cannot be written.
    pub(super) fn save(&self, data_dir: &Path) -> anyhow::Result<()> {
        use std::io::Write as _;
        let path = Self::path(data_dir);
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create(true).truncate(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        let mut file = options
            .open(&path)
            .with_context(|| format!("writing {}", path.display()))?;
        file.write_all(&serde_json::to_vec_pretty(self)?)?;
        Ok(())
    }
}

/// A loopback listener on `port` when it is free, else on any free port.
///
/// # Errors
/// Fails when no loopback port can be bound.
pub(super) async fn loopback(port: Option<u16>) -> std::io::Result<tokio::net::TcpListener> {
    if let Some(port) = port
        && let Ok(listener) = tokio::net::TcpListener::bind(("127.0.0.1", port)).await
    {
        return Ok(listener);
    }
    tokio::net::TcpListener::bind("127.0.0.1:0").await
}

/// A fresh operator token: 32 random bytes, URL-safe base64.
///
/// # Errors
/// Fails when the system has no randomness to give.
pub(super) fn new_token() -> anyhow::Result<String> {
    use base64::Engine as _;
    let mut bytes = [0_u8; 32];
    getrandom::fill(&mut bytes).map_err(|e| anyhow::anyhow!("no randomness: {e}"))?;
    Ok(format!(
        "opt_{}",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_is_kept_reads_back_and_only_the_owner_can_read_it() {
        let dir = tempfile::tempdir().expect("a directory");
        let kept = Kept {
            api_key: Some("prl_x".to_owned()),
            operator_token: Some("opt_y".to_owned()),
            clock_port: Some(40_123),
            model_port: None,
        };
        kept.save(dir.path()).expect("saved");
        let read = Kept::load(dir.path());
        assert_eq!(read.api_key.as_deref(), Some("prl_x"));
        assert_eq!(read.clock_port, Some(40_123));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let mode = std::fs::metadata(dir.path().join(FILE))
                .expect("a file")
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        std::fs::write(dir.path().join(FILE), b"not json").expect("written");
        assert!(Kept::load(dir.path()).api_key.is_none());
    }

    #[test]
    fn tokens_are_long_and_different() {
        let (a, b) = (new_token().expect("a token"), new_token().expect("a token"));
        assert_ne!(a, b);
        assert!(a.len() > 40);
    }
}
