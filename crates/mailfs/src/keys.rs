//! Encryption keys (docs/mailfs.md 3): the passphrase gives a key-encryption key with Argon2id (salted
//! with the file system id), which wraps a random data key kept in the superblock, so the
//! passphrase can change without rewriting data.

use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{XChaCha20Poly1305, XNonce};
use mailfs_format::Sealing;

use crate::FsError;

/// Key-encryption key. Without a passphrase (cipher "none" only) it is derived from the
/// file system id alone: tamper-evidence against accidents and other file systems, not
/// against someone who knows the id.
pub fn kek(passphrase: Option<&str>, fsid: &[u8; 16]) -> Result<[u8; 32], FsError> {
    let mut out = [0u8; 32];
    match passphrase {
        Some(p) => {
            let argon = argon2::Argon2::new(
                argon2::Algorithm::Argon2id,
                argon2::Version::V0x13,
                argon2::Params::default(),
            );
            argon
                .hash_password_into(p.as_bytes(), fsid, &mut out)
                .map_err(|e| FsError::Config(format!("key derivation: {e}")))?;
        }
        None => out = blake3::derive_key("mailfs 2026 no-passphrase kek", fsid),
    }
    Ok(out)
}

/// The key that authenticates superblocks: proves the passphrase before anything is read.
pub fn superblock_sealing(kek: &[u8; 32]) -> Sealing {
    Sealing::MacOnly(blake3::derive_key("mailfs 2026 superblock mac", kek))
}

pub fn wrap(kek: &[u8; 32], fsid: &[u8; 16], data_key: &[u8; 32]) -> Vec<u8> {
    let nonce: [u8; 24] = rand::random();
    let cipher = XChaCha20Poly1305::new(&(*kek).into());
    let sealed = cipher
        .encrypt(
            &XNonce::from(nonce),
            Payload {
                msg: data_key,
                aad: fsid,
            },
        )
        .expect("sealing 32 bytes");
    let mut out = nonce.to_vec();
    out.extend_from_slice(&sealed);
    out
}

pub fn unwrap(kek: &[u8; 32], fsid: &[u8; 16], wrapped: &[u8]) -> Result<[u8; 32], FsError> {
    let bad = || FsError::Config("wrong passphrase, or a damaged superblock".into());
    if wrapped.len() != 24 + 32 + 16 {
        return Err(bad());
    }
    let mut nonce = [0u8; 24];
    nonce.copy_from_slice(&wrapped[..24]);
    let cipher = XChaCha20Poly1305::new(&(*kek).into());
    let key = cipher
        .decrypt(
            &XNonce::from(nonce),
            Payload {
                msg: &wrapped[24..],
                aad: fsid,
            },
        )
        .map_err(|_| bad())?;
    key.try_into().map_err(|_| bad())
}

/// The cipher mkfs records for `auto`: AES-256-GCM where the CPU has AES and carry-less
/// multiply instructions (several times faster there), else XChaCha20-Poly1305 (fast in
/// software everywhere).
pub fn resolve_cipher(cipher: &str) -> &str {
    if cipher != "auto" {
        return cipher;
    }
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("aes")
        && std::arch::is_x86_feature_detected!("pclmulqdq")
    {
        return "aes-256-gcm";
    }
    #[cfg(target_arch = "aarch64")]
    if std::arch::is_aarch64_feature_detected!("aes")
        && std::arch::is_aarch64_feature_detected!("pmull")
    {
        return "aes-256-gcm";
    }
    "xchacha20poly1305"
}

pub fn data_sealing(cipher: &str, data_key: [u8; 32]) -> Sealing {
    match cipher {
        "none" => Sealing::MacOnly(data_key),
        "aes-256-gcm" => Sealing::AesGcm(data_key),
        _ => Sealing::Aead(data_key),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrap_round_trip_and_wrong_passphrase() {
        let fsid = [3; 16];
        let k1 = kek(Some("correct horse"), &fsid).unwrap();
        let k2 = kek(Some("wrong"), &fsid).unwrap();
        let data = [7; 32];
        let w = wrap(&k1, &fsid, &data);
        assert_eq!(unwrap(&k1, &fsid, &w).unwrap(), data);
        assert!(unwrap(&k2, &fsid, &w).is_err());
        assert!(unwrap(&k1, &[4; 16], &w).is_err());
        assert_ne!(kek(None, &fsid).unwrap(), k1);
    }
}
