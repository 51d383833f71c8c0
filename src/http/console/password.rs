//! Operators' passwords: argon2id (RustCrypto's `argon2`, its default parameters: 19 MiB,
//! two passes, one lane) in PHC form, checked off the async threads; and what a password
//! must have.

use argon2::Argon2;
use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};

use crate::http::error::ApiError;

/// The fewest characters a password may have.
pub(super) const SHORTEST: usize = 12;

/// The longest password taken (argon2 takes any length; a megabyte of password is not one).
pub(super) const LONGEST: usize = 256;

/// What `password` lacks to be taken, as phrases (empty: it is strong enough). `email` is the
/// account's: a password that is the address, or holds its name, is refused.
pub(super) fn missing(password: &str, email: &str) -> Vec<&'static str> {
    let mut missing = Vec::new();
    let count = password.chars().count();
    if count < SHORTEST {
        missing.push("at least 12 characters");
    }
    if count > LONGEST {
        missing.push("at most 256 characters");
    }
    if !password.chars().any(char::is_alphabetic) {
        missing.push("a letter");
    }
    if !password.chars().any(|c| !c.is_alphabetic()) {
        missing.push("a digit, a space or a symbol");
    }
    let local = email.split('@').next().unwrap_or_default().to_lowercase();
    if local.chars().count() >= 3 && password.to_lowercase().contains(&local) {
        missing.push("nothing of your e-mail address");
    }
    if password
        .chars()
        .collect::<std::collections::HashSet<_>>()
        .len()
        < 5
    {
        missing.push("at least 5 different characters");
    }
    missing
}

/// The argon2id hash of `password` with a fresh salt, in PHC form.
///
/// # Errors
/// 500 when hashing fails (it does not with these parameters).
pub(super) async fn hash(password: String) -> Result<String, ApiError> {
    let mut salt = [0u8; 16];
    getrandom::fill(&mut salt)
        .map_err(|error| ApiError::Internal(anyhow::anyhow!("no salt: {error}")))?;
    tokio::task::spawn_blocking(move || {
        let salt = SaltString::encode_b64(&salt)
            .map_err(|error| ApiError::Internal(anyhow::anyhow!("salt: {error}")))?;
        Argon2::default()
            .hash_password(password.as_bytes(), &salt)
            .map(|hash| hash.to_string())
            .map_err(|error| ApiError::Internal(anyhow::anyhow!("hashing: {error}")))
    })
    .await
    .map_err(|error| ApiError::Internal(anyhow::anyhow!("hashing: {error}")))?
}

/// Whether `password` is the one `stored` was made from; with no `stored` (no such account)
/// a hash is still checked, so that an unknown address takes as long as a wrong password.
pub(super) async fn verify(stored: Option<String>, password: String) -> bool {
    let known = stored.is_some();
    let stored = stored.unwrap_or_else(|| DECOY.to_owned());
    let matched = tokio::task::spawn_blocking(move || {
        PasswordHash::new(&stored).is_ok_and(|parsed| {
            Argon2::default()
                .verify_password(password.as_bytes(), &parsed)
                .is_ok()
        })
    })
    .await
    .unwrap_or(false);
    known && matched
}

/// A hash no password is known for, of the same parameters, checked for unknown accounts.
const DECOY: &str = "$argon2id$v=19$m=19456,t=2,p=1$c29tZXNhbHRzb21lc2FsdA$\
                     mLq2ZCbQmPO5b+Y5aL8ZcLAG0kSzzBk9RoF3j6ktR2Y";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_weak_password_is_told_what_it_lacks() {
        assert_eq!(
            missing("short", "ana@acme.test"),
            vec!["at least 12 characters", "a digit, a space or a symbol"]
        );
        assert_eq!(
            missing("aaaaaaaaaaaa1", "ana@acme.test"),
            vec!["at least 5 different characters"]
        );
        assert!(
            missing("ana-is-here-2026", "ana@acme.test")
                .contains(&"nothing of your e-mail address")
        );
        assert!(missing("correct horse battery", "ana@acme.test").is_empty());
    }

    #[tokio::test]
    async fn a_hash_takes_its_password_and_no_other() {
        let stored = hash("correct horse battery".to_owned())
            .await
            .expect("hashed");
        assert!(stored.starts_with("$argon2id$"));
        assert!(verify(Some(stored.clone()), "correct horse battery".to_owned()).await);
        assert!(!verify(Some(stored), "correct horse batterY".to_owned()).await);
        assert!(!verify(None, "correct horse battery".to_owned()).await);
    }
}
