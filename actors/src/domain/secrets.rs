//! Encryption of secrets at rest (channel access tokens, later MCP header values) with
//! XChaCha20-Poly1305. The key comes from configuration (`PARLEY_SECRET_KEY`, 32 bytes in
//! base64) or, by default, from `secret.key` in the data directory, generated on first use.
//!
//! Several instances sharing one PostgreSQL database must share the key: set it explicitly.

use std::path::Path;

use anyhow::Context;
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use chacha20poly1305::aead::{Aead, AeadCore, KeyInit, OsRng};
use chacha20poly1305::{XChaCha20Poly1305, XNonce};

/// Marks the format of stored ciphertext, so that the scheme can change later.
const VERSION: &str = "v1:";
const NONCE_LEN: usize = 24;

/// Encrypts and decrypts secrets with the installation's key.
#[derive(Clone)]
pub struct SecretBox {
    cipher: XChaCha20Poly1305,
}

impl std::fmt::Debug for SecretBox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SecretBox(<key>)")
    }
}

impl SecretBox {
    /// The box for `configured` (base64 of 32 bytes) or else the key file in `data_dir`,
    /// created with owner-only permissions when missing.
    ///
    /// # Errors
    /// Fails when the configured key is not 32 bytes of base64 or the key file cannot be read
    /// or written.
    pub fn load(configured: Option<&str>, data_dir: &Path) -> anyhow::Result<Self> {
        let encoded = match configured {
            Some(key) => key.trim().to_owned(),
            None => read_or_create_key_file(&data_dir.join("secret.key"))?,
        };
        let bytes = STANDARD
            .decode(encoded.as_bytes())
            .context("the secret key is not base64")?;
        anyhow::ensure!(bytes.len() == 32, "the secret key must be 32 bytes");
        let cipher = XChaCha20Poly1305::new_from_slice(&bytes)
            .map_err(|_| anyhow::anyhow!("the secret key must be 32 bytes"))?;
        Ok(Self { cipher })
    }

    /// Encrypts `plaintext` with a fresh random nonce.
    ///
    /// # Panics
    /// Never in practice: encryption fails only for inputs beyond 256 GiB.
    pub fn seal(&self, plaintext: &str) -> String {
        let nonce = XChaCha20Poly1305::generate_nonce(&mut OsRng);
        #[allow(clippy::expect_used)]
        let sealed = self
            .cipher
            .encrypt(&nonce, plaintext.as_bytes())
            .expect("encryption of a short secret cannot fail");
        let mut bytes = nonce.to_vec();
        bytes.extend_from_slice(&sealed);
        format!("{VERSION}{}", STANDARD.encode(bytes))
    }

    /// Decrypts what [`SecretBox::seal`] produced.
    ///
    /// # Errors
    /// Fails when the text was sealed with another key or has been altered.
    pub fn open(&self, sealed: &str) -> anyhow::Result<String> {
        let encoded = sealed
            .strip_prefix(VERSION)
            .context("unknown secret format")?;
        let bytes = STANDARD.decode(encoded).context("secret is not base64")?;
        anyhow::ensure!(bytes.len() > NONCE_LEN, "secret is truncated");
        let (nonce, ciphertext) = bytes.split_at(NONCE_LEN);
        let nonce: [u8; NONCE_LEN] = nonce.try_into().context("secret is truncated")?;
        let plain = self
            .cipher
            .decrypt(&XNonce::from(nonce), ciphertext)
            .map_err(|_| anyhow::anyhow!("secret does not decrypt with this installation's key"))?;
        String::from_utf8(plain).context("secret is not UTF-8")
    }
}

fn read_or_create_key_file(path: &Path) -> anyhow::Result<String> {
    match std::fs::read_to_string(path) {
        // A key written by hand often ends with a newline.
        Ok(key) => return Ok(key.trim().to_owned()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
    }
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("creating {}", parent.display()))?;
    }
    let key = STANDARD.encode(XChaCha20Poly1305::generate_key(&mut OsRng));
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    match options.open(path) {
        Ok(mut file) => {
            std::io::Write::write_all(&mut file, key.as_bytes())
                .with_context(|| format!("writing {}", path.display()))?;
            tracing::info!(path = %path.display(), "generated a new secret key for secrets at rest");
            Ok(key)
        }
        // Another process created it first: use theirs.
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))
        }
        Err(e) => Err(e).with_context(|| format!("creating {}", path.display())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sealed_secret_opens_with_the_same_key_only() {
        let dir = tempfile::tempdir().expect("dir");
        let mine = SecretBox::load(None, dir.path()).expect("key file");
        let sealed = mine.seal("EAAB-token");
        assert!(!sealed.contains("EAAB-token"));
        assert_eq!(mine.open(&sealed).expect("opens"), "EAAB-token");

        let again = SecretBox::load(None, dir.path()).expect("same key file");
        assert_eq!(again.open(&sealed).expect("opens"), "EAAB-token");

        let other = SecretBox::load(Some(&STANDARD.encode([7u8; 32])), dir.path()).expect("key");
        assert!(other.open(&sealed).is_err());
    }

    #[test]
    fn a_hand_written_key_file_with_a_trailing_newline_is_accepted() {
        let dir = tempfile::tempdir().expect("dir");
        let key = STANDARD.encode([3u8; 32]);
        std::fs::write(dir.path().join("secret.key"), format!("{key}\n")).expect("write");
        let from_file = SecretBox::load(None, dir.path()).expect("loads");
        let configured = SecretBox::load(Some(&key), dir.path()).expect("loads");
        assert_eq!(configured.open(&from_file.seal("x")).expect("opens"), "x");
    }

    #[test]
    fn sealing_twice_gives_different_ciphertexts() {
        let dir = tempfile::tempdir().expect("dir");
        let secrets = SecretBox::load(None, dir.path()).expect("key");
        assert_ne!(secrets.seal("x"), secrets.seal("x"));
    }

    #[test]
    fn a_configured_key_of_the_wrong_length_is_refused() {
        let dir = tempfile::tempdir().expect("dir");
        assert!(SecretBox::load(Some(&STANDARD.encode([1u8; 16])), dir.path()).is_err());
    }
}
