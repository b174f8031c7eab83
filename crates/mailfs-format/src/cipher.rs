//! How a payload is protected ([`Sealing`]) and the primitives both envelope layouts (whole
//! and segmented) seal with: AES-256-GCM with per-message keys, and the keyed BLAKE3 MAC.

use crate::error::FormatError;
use crate::header::{NONCE_BYTES, TAG_BYTES};

/// How payloads are protected.
#[derive(Clone)]
pub enum Sealing {
    /// XChaCha20-Poly1305 with this 256-bit data key (the default).
    Aead([u8; 32]),
    /// AES-256-GCM with per-message keys derived from this data key (see `aes_for`):
    /// faster where the CPU has AES instructions.
    AesGcm([u8; 32]),
    /// Clear payload with a keyed BLAKE3 MAC: tamper-evident, not confidential.
    MacOnly([u8; 32]),
}

impl std::fmt::Debug for Sealing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print a key.
        match self {
            Sealing::Aead(_) => f.write_str("Aead(<key>)"),
            Sealing::AesGcm(_) => f.write_str("AesGcm(<key>)"),
            Sealing::MacOnly(_) => f.write_str("MacOnly(<key>)"),
        }
    }
}

/// AES-256-GCM under a key derived per message from the data key and the first half of the
/// 192-bit nonce (the second half is GCM's 96-bit nonce), so random nonces stay safe for
/// any number of messages, as with XChaCha20.
pub(crate) fn aes_for(
    key: &[u8; 32],
    nonce: &[u8; NONCE_BYTES],
) -> Result<(AesGcm, [u8; 12]), FormatError> {
    let mut n = [0u8; 12];
    n.copy_from_slice(&nonce[12..]);
    Ok((AesGcm::new(&aes_message_key(key, nonce))?, n))
}

/// The per-message AES key: keyed BLAKE3 of the data key over the nonce's first half.
pub(crate) fn aes_message_key(key: &[u8; 32], nonce: &[u8; NONCE_BYTES]) -> [u8; 32] {
    let mut h = blake3::Hasher::new_keyed(key);
    h.update(b"mailfs 1 aes-256-gcm message key");
    h.update(&nonce[..12]);
    *h.finalize().as_bytes()
}

/// AES-256-GCM (NIST SP 800-38D) with detached tags, in place.
pub(crate) struct AesGcm(aws_lc_rs::aead::LessSafeKey);

impl AesGcm {
    pub(crate) fn new(key: &[u8; 32]) -> Result<AesGcm, FormatError> {
        use aws_lc_rs::aead::{AES_256_GCM, LessSafeKey, UnboundKey};
        let key = UnboundKey::new(&AES_256_GCM, key).map_err(|_| FormatError::Key)?;
        Ok(AesGcm(LessSafeKey::new(key)))
    }

    pub(crate) fn seal(
        &self,
        nonce: [u8; 12],
        ad: &[u8],
        buf: &mut [u8],
    ) -> Result<[u8; TAG_BYTES], ()> {
        use aws_lc_rs::aead::{Aad, Nonce};
        let tag = self
            .0
            .seal_in_place_separate_tag(Nonce::assume_unique_for_key(nonce), Aad::from(ad), buf)
            .map_err(|_| ())?;
        tag.as_ref().try_into().map_err(|_| ())
    }

    pub(crate) fn open(
        &self,
        nonce: [u8; 12],
        ad: &[u8],
        buf: &mut [u8],
        tag: &[u8],
    ) -> Result<(), ()> {
        use aws_lc_rs::aead::{Aad, Nonce};
        self.0
            .open_in_place_separate_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(ad),
                tag,
                buf,
            )
            .map(|_| ())
            .map_err(|_| ())
    }
}

/// The keyed BLAKE3 MAC of [`Sealing::MacOnly`], over the header and the payload.
pub(crate) fn mac(key: &[u8; 32], aad: &[u8], payload: &[u8]) -> [u8; TAG_BYTES] {
    let mut h = blake3::Hasher::new_keyed(key);
    h.update(aad);
    h.update(payload);
    let mut tag = [0u8; TAG_BYTES];
    tag.copy_from_slice(&h.finalize().as_bytes()[..TAG_BYTES]);
    tag
}
