//! One-time secret tokens (console sessions, operators' invitations): 32 random bytes shown
//! once, and kept only as their SHA-256.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use sha2::{Digest, Sha256};

/// The stored form of a secret token: SHA-256, hex.
pub(crate) fn digest(token: &str) -> String {
    hex::encode(Sha256::digest(token.as_bytes()))
}

/// 32 random bytes, URL-safe: a session's or an invitation's token.
pub(crate) fn random_token() -> String {
    let mut bytes = [0u8; 32];
    // The operating system's generator failing is not something a console can go on without.
    #[allow(clippy::expect_used)]
    getrandom::fill(&mut bytes).expect("the operating system's random generator");
    URL_SAFE_NO_PAD.encode(bytes)
}
