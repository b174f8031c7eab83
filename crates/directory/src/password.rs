//! Password hashes: argon2id in PHC string form (`$argon2id$v=19$m=19456,t=2,p=1$salt$hash`).
//!
//! Hashing is CPU- and memory-heavy by design, so callers run it on tokio's blocking pool
//! behind a semaphore (see `Directory::run_hasher`); it only happens when an administrator
//! sets a password. Verification, which any client can cause, runs on the bounded pool of
//! `hasher.rs` and reads the parameters from the stored string, so hashes made with older
//! parameters keep working after `Options::argon2_params` changes.

use argon2::password_hash::PasswordHasher;
use argon2::{Algorithm, Argon2, Params, Version};

use crate::error::DirectoryError;

/// Checks a new password against the rules and the configured length limits: at least
/// `length_min` characters (Unicode scalar values), at most `bytes_max` bytes.
pub(crate) fn check_new(
    password: &str,
    length_min: usize,
    bytes_max: usize,
) -> Result<(), DirectoryError> {
    if password.is_empty() {
        return Err(DirectoryError::InvalidPassword("password is empty".into()));
    }
    if password.chars().count() < length_min {
        return Err(DirectoryError::InvalidPassword(format!(
            "password is shorter than password_length_min ({length_min} characters)"
        )));
    }
    if password.len() > bytes_max {
        return Err(DirectoryError::InvalidPassword(
            "password is longer than password_bytes_max".into(),
        ));
    }
    // SASL PLAIN separates its fields with NUL (RFC 4616), so such a password could never
    // be used to log in.
    if password.contains('\0') {
        return Err(DirectoryError::InvalidPassword(
            "password contains a NUL byte".into(),
        ));
    }
    Ok(())
}

/// A new argon2id PHC string for `password`, with a random 16-byte salt.
pub(crate) fn hash(params: &Params, password: &str) -> Result<String, DirectoryError> {
    let argon2 = Argon2::new(Algorithm::Argon2id, Version::V0x13, params.clone());
    let phc = argon2
        .hash_password(password.as_bytes())
        .map_err(|e| DirectoryError::Hash(e.to_string()))?;
    Ok(phc.to_string())
}
