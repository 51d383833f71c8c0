//! Standard Webhooks 1.0 signatures: a secret is `whsec_` and the base64 of 32 random bytes;
//! the signature of a delivery is `v1,` and the base64 of HMAC-SHA256 over
//! `"{webhook-id}.{webhook-timestamp}.{body}"` keyed with the secret's decoded bytes, one per
//! secret, space-separated while a rotated-out secret still signs.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

/// What every secret starts with.
pub const SECRET_PREFIX: &str = "whsec_";

/// A new secret: `whsec_` and the base64 of 32 random bytes.
///
/// # Panics
/// When the operating system has no randomness to give (nothing would be safe then).
pub fn new_secret() -> String {
    let mut key = [0_u8; 32];
    getrandom::fill(&mut key).unwrap_or_else(|error| panic!("no randomness: {error}"));
    format!("{SECRET_PREFIX}{}", STANDARD.encode(key))
}

/// The `webhook-signature` header for `body` of event `id` at `timestamp` (Unix seconds),
/// signed with each of `secrets`.
pub fn signature(secrets: &[&str], id: &str, timestamp: i64, body: &str) -> String {
    Signer::new(secrets).sign(id, timestamp, body)
}

/// Signs with secrets keyed once: what a delivery lane keeps while its endpoint's secrets stay
/// the same, so that a signature costs one pass of HMAC over the signed text and nothing else.
#[derive(Clone)]
pub struct Signer {
    /// One keyed HMAC per secret, cloned for each signature.
    keys: Vec<Hmac<Sha256>>,
}

impl Signer {
    /// A signer for `secrets` (each `whsec_` and base64, or raw bytes; see [`key_of`]).
    pub fn new(secrets: &[&str]) -> Self {
        let keys = secrets
            .iter()
            .map(|secret| {
                // HMAC takes keys of any length, so this cannot fail.
                Hmac::<Sha256>::new_from_slice(&key_of(secret)).unwrap_or_else(|_| unreachable!())
            })
            .collect();
        Self { keys }
    }

    /// The `webhook-signature` header for `body` of event `id` at `timestamp` (Unix seconds):
    /// HMAC-SHA256 over `"{id}.{timestamp}.{body}"`, one `v1,` signature per secret.
    pub fn sign(&self, id: &str, timestamp: i64, body: &str) -> String {
        let timestamp = timestamp.to_string();
        let mut header = String::with_capacity(self.keys.len() * 48);
        for key in &self.keys {
            let mut mac = key.clone();
            for part in [id, ".", &timestamp, ".", body] {
                mac.update(part.as_bytes());
            }
            if !header.is_empty() {
                header.push(' ');
            }
            header.push_str("v1,");
            STANDARD.encode_string(mac.finalize().into_bytes(), &mut header);
        }
        header
    }
}

impl std::fmt::Debug for Signer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Keys never reach a log.
        f.debug_struct("Signer")
            .field("secrets", &self.keys.len())
            .finish()
    }
}

/// The key bytes of a secret: the base64 after `whsec_` (a secret that is not base64 signs
/// with its own bytes, as the convention's libraries do).
fn key_of(secret: &str) -> Vec<u8> {
    let encoded = secret.strip_prefix(SECRET_PREFIX).unwrap_or(secret);
    STANDARD
        .decode(encoded)
        .unwrap_or_else(|_| encoded.as_bytes().to_vec())
}

/// A secret as the API shows it after creation: its prefix and last four characters.
pub fn masked(secret: &str) -> String {
    let tail: String = secret
        .chars()
        .rev()
        .take(4)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    format!("{SECRET_PREFIX}…{tail}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_conventions_published_vector_signs_the_same() {
        // The test vector of the Standard Webhooks reference libraries.
        let secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
        let signed = signature(
            &[secret],
            "msg_p5jXN8AQM9LWM0D4loKWxJek",
            1_614_265_330,
            r#"{"test": 2432232314}"#,
        );
        assert_eq!(signed, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=");
    }

    #[test]
    fn two_secrets_sign_side_by_side_and_new_ones_differ() {
        let (a, b) = (new_secret(), new_secret());
        assert_ne!(a, b);
        assert!(a.starts_with("whsec_") && a.len() == 6 + 44);
        let both = signature(&[&a, &b], "id", 1, "{}");
        let parts: Vec<&str> = both.split(' ').collect();
        assert_eq!(parts.len(), 2);
        assert_eq!(parts[0], signature(&[&a], "id", 1, "{}"));
        assert_eq!(parts[1], signature(&[&b], "id", 1, "{}"));
        assert!(masked(&a).ends_with(&a[a.len() - 4..]));
        assert!(!masked(&a).contains(&a[6..20]));
    }
}
