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

use chacha20poly1305::aead::{AeadInOut, KeyInit};
use chacha20poly1305::{XChaCha20Poly1305, XNonce};

mod segments;
pub use segments::{
    FLAG_SEGMENTED, PREFIX_BYTES, SEGMENT_BYTES, open_segments, segment_count, segment_span,
    segments_for,
};

/// AES-256-GCM under a key derived per message from the data key and the first half of the
/// 192-bit nonce (the second half is GCM's 96-bit nonce), so random nonces stay safe for
/// any number of messages, as with XChaCha20.
fn aes_for(key: &[u8; 32], nonce: &[u8; NONCE_BYTES]) -> Result<(AesGcm, [u8; 12]), FormatError> {
    let mut n = [0u8; 12];
    n.copy_from_slice(&nonce[12..]);
    Ok((AesGcm::new(&aes_message_key(key, nonce))?, n))
}

/// The per-message AES key: keyed BLAKE3 of the data key over the nonce's first half.
fn aes_message_key(key: &[u8; 32], nonce: &[u8; NONCE_BYTES]) -> [u8; 32] {
    let mut h = blake3::Hasher::new_keyed(key);
    h.update(b"mailfs 1 aes-256-gcm message key");
    h.update(&nonce[..12]);
    *h.finalize().as_bytes()
}

/// AES-256-GCM (NIST SP 800-38D) with detached tags, in place.
struct AesGcm(aws_lc_rs::aead::LessSafeKey);

impl AesGcm {
    fn new(key: &[u8; 32]) -> Result<AesGcm, FormatError> {
        use aws_lc_rs::aead::{AES_256_GCM, LessSafeKey, UnboundKey};
        let key = UnboundKey::new(&AES_256_GCM, key).map_err(|_| FormatError::Key)?;
        Ok(AesGcm(LessSafeKey::new(key)))
    }

    fn seal(&self, nonce: [u8; 12], ad: &[u8], buf: &mut [u8]) -> Result<[u8; TAG_BYTES], ()> {
        use aws_lc_rs::aead::{Aad, Nonce};
        let tag = self
            .0
            .seal_in_place_separate_tag(Nonce::assume_unique_for_key(nonce), Aad::from(ad), buf)
            .map_err(|_| ())?;
        tag.as_ref().try_into().map_err(|_| ())
    }

    fn open(&self, nonce: [u8; 12], ad: &[u8], buf: &mut [u8], tag: &[u8]) -> Result<(), ()> {
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

/// `MFS1`.
pub const MAGIC: [u8; 4] = *b"MFS1";
pub const FORMAT_VERSION: u8 = 1;
/// Clear header bytes, all of them bound as associated data.
pub const HEADER_BYTES: usize = 49;
pub const NONCE_BYTES: usize = 24;
/// AEAD tag, or MAC, after the payload.
pub const TAG_BYTES: usize = 16;
/// Largest payload an envelope may carry (a 16 MiB block plus room for metadata pages).
pub const PAYLOAD_BYTES_MAX: usize = (16 << 20) + (1 << 20);

/// What a message is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    Superblock = 1,
    Directory = 2,
    Block = 3,
    Chunk = 4,
    JournalPage = 5,
    /// A page of the metadata log: one batch of directory changes (docs/mailfs.md 12a).
    LogPage = 6,
}

impl Kind {
    fn from_byte(b: u8) -> Option<Kind> {
        Some(match b {
            1 => Kind::Superblock,
            2 => Kind::Directory,
            3 => Kind::Block,
            4 => Kind::Chunk,
            5 => Kind::JournalPage,
            6 => Kind::LogPage,
            _ => return None,
        })
    }
}

/// The clear header: everything a reader must expect before it trusts the payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Header {
    pub kind: Kind,
    /// Bit 0: the payload was zstd-compressed before sealing (reserved, never set).
    /// Bit 1 ([`FLAG_SEGMENTED`]): the payload is sealed in segments.
    pub flags: u16,
    pub fsid: [u8; 16],
    /// Directory id or file id (0 for the superblock).
    pub object: u64,
    /// Block number, page number, or 0.
    pub index: u64,
    pub version: u64,
    /// The RAID index of the account the message was written to.
    pub raid_index: u8,
}

impl Header {
    pub fn encode(&self) -> [u8; HEADER_BYTES] {
        let mut h = [0u8; HEADER_BYTES];
        h[0..4].copy_from_slice(&MAGIC);
        h[4] = FORMAT_VERSION;
        h[5] = self.kind as u8;
        h[6..8].copy_from_slice(&self.flags.to_le_bytes());
        h[8..24].copy_from_slice(&self.fsid);
        h[24..32].copy_from_slice(&self.object.to_le_bytes());
        h[32..40].copy_from_slice(&self.index.to_le_bytes());
        h[40..48].copy_from_slice(&self.version.to_le_bytes());
        h[48] = self.raid_index;
        h
    }

    pub fn decode(bytes: &[u8]) -> Result<Header, FormatError> {
        let h = bytes.get(..HEADER_BYTES).ok_or(FormatError::Truncated)?;
        if h[0..4] != MAGIC {
            return Err(FormatError::NotMailfs);
        }
        if h[4] != FORMAT_VERSION {
            return Err(FormatError::Version(h[4]));
        }
        let u64_at = |i: usize| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&h[i..i + 8]);
            u64::from_le_bytes(b)
        };
        let mut fsid = [0u8; 16];
        fsid.copy_from_slice(&h[8..24]);
        Ok(Header {
            kind: Kind::from_byte(h[5]).ok_or(FormatError::Kind(h[5]))?,
            flags: u16::from_le_bytes([h[6], h[7]]),
            fsid,
            object: u64_at(24),
            index: u64_at(32),
            version: u64_at(40),
            raid_index: h[48],
        })
    }
}

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

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FormatError {
    #[error("message is too short to be a mailfs envelope")]
    Truncated,
    #[error("not a mailfs message")]
    NotMailfs,
    #[error("unknown envelope format version {0}")]
    Version(u8),
    #[error("unknown message kind {0}")]
    Kind(u8),
    #[error("payload of {0} bytes is over the limit")]
    TooLarge(usize),
    /// The header is not the one the reader expected (another file system, file, block,
    /// version or account): a swapped, replayed or misplaced message.
    #[error("message is not the expected one: {0}")]
    Unexpected(&'static str),
    /// The cipher library refused the key.
    #[error("the cipher refused its key")]
    Key,
    /// The tag or MAC does not verify: the message was altered, or the key is wrong.
    #[error("message failed authentication")]
    Forged,
}

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

fn mac(key: &[u8; 32], aad: &[u8], payload: &[u8]) -> [u8; TAG_BYTES] {
    let mut h = blake3::Hasher::new_keyed(key);
    h.update(aad);
    h.update(payload);
    let mut tag = [0u8; TAG_BYTES];
    tag.copy_from_slice(&h.finalize().as_bytes()[..TAG_BYTES]);
    tag
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

/// The header of `bytes` if it is `expected` in everything but the flags (which the tag or
/// MAC binds: flipping one is a forgery).
fn check_expected(expected: &Header, bytes: &[u8]) -> Result<Header, FormatError> {
    let found = Header::decode(bytes)?;
    let why = if found.fsid != expected.fsid {
        Some("another file system")
    } else if found.kind != expected.kind {
        Some("another kind of message")
    } else if found.object != expected.object {
        Some("another object")
    } else if found.index != expected.index {
        Some("another block or page")
    } else if found.version != expected.version {
        Some("another version")
    } else if found.raid_index != expected.raid_index {
        Some("another account")
    } else {
        None
    };
    match why {
        Some(why) => Err(FormatError::Unexpected(why)),
        None => Ok(found),
    }
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
