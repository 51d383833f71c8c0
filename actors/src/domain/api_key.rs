//! API key secrets: 32 random bytes shown once, stored only as a SHA-256 hash.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use sha2::{Digest, Sha256};

/// Prefix that makes a Parley key recognisable in a config file or a secret scanner.
const PREFIX: &str = "prl_";

/// A freshly generated key: the secret to show once and the hash to store.
pub struct ApiKeySecret {
    secret: String,
    hash: String,
}

impl ApiKeySecret {
    /// Generates a new key from the operating system's random source.
    ///
    /// # Panics
    /// When the operating system has no random source, which Parley cannot run without.
    pub fn generate() -> Self {
        let mut bytes = [0u8; 32];
        #[allow(clippy::expect_used)]
        getrandom::fill(&mut bytes).expect("the operating system's random source is available");
        let secret = format!("{PREFIX}{}", URL_SAFE_NO_PAD.encode(bytes));
        let hash = hash_api_key(&secret);
        Self { secret, hash }
    }

    /// The secret, to give to the user once.
    pub fn expose(&self) -> &str {
        &self.secret
    }

    /// The hash to store and look keys up by.
    pub fn hash(&self) -> &str {
        &self.hash
    }
}

impl std::fmt::Debug for ApiKeySecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiKeySecret")
            .field("hash", &self.hash)
            .finish_non_exhaustive()
    }
}

/// Lower-case hex SHA-256 of a presented key. A fast hash is right here: the secret has 256 bits
/// of entropy, so there is nothing for a slow hash to protect.
pub fn hash_api_key(secret: &str) -> String {
    let digest = Sha256::digest(secret.as_bytes());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_generated_keys_differ_and_hash_to_what_is_stored() {
        let a = ApiKeySecret::generate();
        let b = ApiKeySecret::generate();
        assert_ne!(a.expose(), b.expose());
        assert!(a.expose().starts_with("prl_"));
        assert_eq!(a.expose().len(), 4 + 43);
        assert_eq!(hash_api_key(a.expose()), a.hash());
    }

    #[test]
    fn the_hash_is_hex_sha256() {
        assert_eq!(
            hash_api_key("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn the_secret_never_shows_in_debug_output() {
        let key = ApiKeySecret::generate();
        assert!(!format!("{key:?}").contains(key.expose()));
    }
}
