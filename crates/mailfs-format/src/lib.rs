//! The envelope every mail file system message carries (docs/mailfs.md 3).
//!
//! A message body is a clear 49-byte header (magic, format version, kind, flags, file system
//! id, object id, index, version, RAID index), a nonce, and the payload sealed with
//! XChaCha20-Poly1305. The header is the AEAD's associated data, so a message only opens
//! when every one of those fields is what the reader expected (invariant M1): a message from
//! another file system, of another file or block, an older version replayed in place of a
//! newer one, or a copy sitting in the wrong account is rejected, not read.
//!
//! With [`Sealing::MacOnly`] (tests, benchmarks) the payload stays in clear but is covered by
//! a keyed BLAKE3 MAC over header and payload, so tampering is still detected.
//!
//! Pure functions, no I/O: the caller supplies keys and nonces.

mod cipher;
mod error;
mod header;
mod segments;

use chacha20poly1305::aead::{AeadInOut, KeyInit};
use chacha20poly1305::{XChaCha20Poly1305, XNonce};

pub use cipher::Sealing;
pub use error::FormatError;
pub use header::{
    FLAG_SEGMENTED, FORMAT_VERSION, HEADER_BYTES, Header, Kind, MAGIC, NONCE_BYTES,
    PAYLOAD_BYTES_MAX, TAG_BYTES,
};
pub use segments::{
    PREFIX_BYTES, SEGMENT_BYTES, open_segments, segment_count, segment_span, segments_for,
};

use cipher::{aes_for, mac};
use header::check_expected;

/// Seals `payload` under `header`. `nonce` must never repeat under one key: the caller
/// draws it at random (192 bits make collisions negligible).
pub fn seal(
    sealing: &Sealing,
    header: &Header,
    nonce: [u8; NONCE_BYTES],
    payload: &[u8],
) -> Result<Vec<u8>, FormatError> {
    if payload.len() > PAYLOAD_BYTES_MAX {
        return Err(FormatError::TooLarge(payload.len()));
    }
    if header.flags & FLAG_SEGMENTED != 0 {
        return segments::seal_segmented(sealing, header, nonce, payload);
    }
    let aad = header.encode();
    // The payload is copied once into the output and encrypted there: the ciphers' in-out
    // mode copies in to out first anyway, and a zeroed output would cost a pass more.
    let mut out = Vec::with_capacity(HEADER_BYTES + NONCE_BYTES + payload.len() + TAG_BYTES);
    out.extend_from_slice(&aad);
    let start = HEADER_BYTES + NONCE_BYTES;
    let too_large = |_| FormatError::TooLarge(payload.len());
    match sealing {
        Sealing::Aead(key) => {
            out.extend_from_slice(&nonce);
            out.extend_from_slice(payload);
            let cipher = XChaCha20Poly1305::new(&(*key).into());
            let tag = cipher
                .encrypt_inout_detached(&XNonce::from(nonce), &aad, (&mut out[start..]).into())
                .map_err(too_large)?;
            out.extend_from_slice(tag.as_slice());
        }
        Sealing::AesGcm(key) => {
            out.extend_from_slice(&nonce);
            out.extend_from_slice(payload);
            let (cipher, n) = aes_for(key, &nonce)?;
            let tag = cipher
                .seal(n, &aad, &mut out[start..])
                .map_err(|()| FormatError::TooLarge(payload.len()))?;
            out.extend_from_slice(&tag);
        }
        Sealing::MacOnly(key) => {
            // The nonce field is zero: nothing is encrypted.
            out.extend_from_slice(&[0u8; NONCE_BYTES]);
            out.extend_from_slice(payload);
            out.extend_from_slice(&mac(key, &aad, payload));
        }
    }
    Ok(out)
}

/// [`open`] for an envelope the caller has no further use for: a segmented one is opened
/// where it lies, its plain bytes moved together over the header and tags, so they take
/// the envelope's memory instead of a new allocation (and its page faults) and a copy.
pub fn open_owned(
    sealing: &Sealing,
    expected: &Header,
    bytes: Vec<u8>,
) -> Result<Vec<u8>, FormatError> {
    let found = check_expected(expected, &bytes)?;
    if found.flags & FLAG_SEGMENTED == 0 {
        return open(sealing, expected, &bytes);
    }
    segments::open_all_in_place(sealing, bytes)
}

/// Reads a header without trusting it (to find out what a stray message claims to be, for
/// fsck); nothing in it is authenticated until [`open`] succeeds.
pub fn peek(bytes: &[u8]) -> Result<Header, FormatError> {
    Header::decode(bytes)
}

/// Opens a message that must be exactly `expected`; returns the payload.
pub fn open(sealing: &Sealing, expected: &Header, bytes: &[u8]) -> Result<Vec<u8>, FormatError> {
    let found = check_expected(expected, bytes)?;
    if found.flags & FLAG_SEGMENTED != 0 {
        return segments::open_all(sealing, expected, bytes);
    }
    let rest = &bytes[HEADER_BYTES..];
    if rest.len() < NONCE_BYTES + TAG_BYTES {
        return Err(FormatError::Truncated);
    }
    if rest.len() - NONCE_BYTES - TAG_BYTES > PAYLOAD_BYTES_MAX {
        return Err(FormatError::TooLarge(rest.len()));
    }
    // Authenticate against the header as found, which equals the expected one except for
    // the flags; those are bound too, so flipping one is a forgery.
    let aad = &bytes[..HEADER_BYTES];
    let (nonce, sealed) = rest.split_at(NONCE_BYTES);
    match sealing {
        Sealing::Aead(key) => {
            let mut n = [0u8; NONCE_BYTES];
            n.copy_from_slice(nonce);
            let (ciphertext, tag) = sealed.split_at(sealed.len() - TAG_BYTES);
            let mut plain = ciphertext.to_vec();
            let cipher = XChaCha20Poly1305::new(&(*key).into());
            cipher
                .decrypt_inout_detached(
                    &XNonce::from(n),
                    aad,
                    plain.as_mut_slice().into(),
                    tag.try_into().map_err(|_| FormatError::Forged)?,
                )
                .map_err(|_| FormatError::Forged)?;
            Ok(plain)
        }
        Sealing::AesGcm(key) => {
            let mut n = [0u8; NONCE_BYTES];
            n.copy_from_slice(nonce);
            let (ciphertext, tag) = sealed.split_at(sealed.len() - TAG_BYTES);
            let mut plain = ciphertext.to_vec();
            let (cipher, gcm_nonce) = aes_for(key, &n)?;
            cipher
                .open(gcm_nonce, aad, &mut plain, tag)
                .map_err(|()| FormatError::Forged)?;
            Ok(plain)
        }
        Sealing::MacOnly(key) => {
            let (payload, tag) = sealed.split_at(sealed.len() - TAG_BYTES);
            // Constant-time comparison is not needed for a stored MAC, but costs nothing.
            let want = mac(key, aad, payload);
            let equal = want.iter().zip(tag).fold(0u8, |acc, (a, b)| acc | (a ^ b)) == 0;
            if equal {
                Ok(payload.to_vec())
            } else {
                Err(FormatError::Forged)
            }
        }
    }
}

/// The `X-Mailfs` header value (and Subject) that finds a message with one IMAP SEARCH
/// (docs/mailfs.md 2). The version is last so a prefix search finds every version.
pub fn search_key(header: &Header) -> String {
    let fsid: String = header.fsid.iter().map(|b| format!("{b:02x}")).collect();
    match header.kind {
        Kind::Superblock => format!("{fsid} sb {} v{}", header.index, header.version),
        Kind::Directory => format!(
            "{fsid} dir {:012x}.{} v{}",
            header.object, header.index, header.version
        ),
        Kind::Block => format!(
            "{fsid} blk {:012x}.{} v{}",
            header.object, header.index, header.version
        ),
        Kind::Chunk => format!("{fsid} chk {:016x}{:016x}", header.object, header.index),
        Kind::JournalPage => format!("{fsid} jnl {:04x} v{}", header.index, header.version),
        Kind::LogPage => format!("{fsid} log {} v{}", header.index, header.version),
    }
}

#[cfg(test)]
mod tests;
