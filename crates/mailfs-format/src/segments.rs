//! Segmented envelopes (docs/mailfs.md 3): the payload sealed in `SEGMENT_BYTES` pieces, each
//! with its own tag, so a reader can fetch a byte range of a block (IMAP partial FETCH) and
//! authenticate it without the rest.
//!
//! Layout after the 49-byte header and the 24-byte nonce: for each segment, its ciphertext
//! (`SEGMENT_BYTES`, the last one shorter, an empty payload one empty segment) and its
//! 16-byte tag. Segment `i` is sealed with the message's nonce with `i` folded into its last
//! four bytes, and with associated data `header || i (u32 LE) || last (1 byte)`: a segment
//! moved to another place, another message, or a message cut after a whole segment does not
//! open (the STREAM construction's guarantees).

use std::ops::Range;

use chacha20poly1305::aead::{AeadInOut, KeyInit};
use chacha20poly1305::{XChaCha20Poly1305, XNonce};

use crate::cipher::{AesGcm, Sealing, aes_for, mac};
use crate::error::FormatError;
use crate::header::{
    FLAG_SEGMENTED, HEADER_BYTES, Header, NONCE_BYTES, PAYLOAD_BYTES_MAX, TAG_BYTES, check_expected,
};

/// Plain bytes per segment.
pub const SEGMENT_BYTES: usize = 64 << 10;
/// Header and nonce: what a reader needs before any segment.
pub const PREFIX_BYTES: usize = HEADER_BYTES + NONCE_BYTES;

/// Segments of a payload of `len` bytes (an empty payload has one, empty).
pub fn segment_count(len: usize) -> usize {
    len.div_ceil(SEGMENT_BYTES).max(1)
}

/// Where segment `i` of a payload of `len` bytes lies in the envelope, tag included.
pub fn segment_span(len: usize, i: usize) -> Range<usize> {
    let start = PREFIX_BYTES + i * (SEGMENT_BYTES + TAG_BYTES);
    let plain = len.saturating_sub(i * SEGMENT_BYTES).min(SEGMENT_BYTES);
    start..start + plain + TAG_BYTES
}

/// The segments holding plain bytes `range` of a payload of `len` bytes.
pub fn segments_for(len: usize, range: Range<usize>) -> Range<usize> {
    let first = range.start / SEGMENT_BYTES;
    let last = range
        .end
        .max(range.start + 1)
        .div_ceil(SEGMENT_BYTES)
        .max(first + 1);
    first..last.min(segment_count(len))
}

/// One message's cipher, keyed once, sealing or opening its segments.
enum Cipher {
    XChaCha(Box<XChaCha20Poly1305>, [u8; NONCE_BYTES]),
    Aes(Box<AesGcm>, [u8; 12]),
    /// The MAC covers the nonce too, so segments of two messages with one header (and
    /// different content) cannot be mixed.
    Mac([u8; 32], [u8; NONCE_BYTES]),
}

impl Cipher {
    fn new(sealing: &Sealing, nonce: &[u8; NONCE_BYTES]) -> Result<Cipher, FormatError> {
        Ok(match sealing {
            Sealing::Aead(key) => {
                Cipher::XChaCha(Box::new(XChaCha20Poly1305::new(&(*key).into())), *nonce)
            }
            Sealing::AesGcm(key) => {
                let (cipher, n) = aes_for(key, nonce)?;
                Cipher::Aes(Box::new(cipher), n)
            }
            Sealing::MacOnly(key) => Cipher::Mac(*key, *nonce),
        })
    }

    fn seal(&self, i: usize, ad: &[u8], buf: &mut [u8]) -> Result<[u8; TAG_BYTES], FormatError> {
        let forged = |_| FormatError::Forged;
        Ok(match self {
            Cipher::XChaCha(c, n) => c
                .encrypt_inout_detached(&XNonce::from(fold(*n, i)), ad, buf.into())
                .map_err(forged)?
                .into(),
            Cipher::Aes(c, n) => c
                .seal(fold(*n, i), ad, buf)
                .map_err(|()| FormatError::Forged)?,
            Cipher::Mac(key, n) => mac(key, &[ad, n].concat(), buf),
        })
    }

    fn open(&self, i: usize, ad: &[u8], buf: &mut [u8], tag: &[u8]) -> Result<(), FormatError> {
        let tag: [u8; TAG_BYTES] = tag.try_into().map_err(|_| FormatError::Truncated)?;
        let forged = |_| FormatError::Forged;
        match self {
            Cipher::XChaCha(c, n) => c
                .decrypt_inout_detached(&XNonce::from(fold(*n, i)), ad, buf.into(), &tag.into())
                .map_err(forged),
            Cipher::Aes(c, n) => c
                .open(fold(*n, i), ad, buf, &tag)
                .map_err(|()| FormatError::Forged),
            Cipher::Mac(key, n) => {
                let want = mac(key, &[ad, n].concat(), buf);
                let equal = want.iter().zip(tag).fold(0u8, |acc, (a, b)| acc | (a ^ b)) == 0;
                if equal {
                    Ok(())
                } else {
                    Err(FormatError::Forged)
                }
            }
        }
    }
}

/// The nonce for segment `i`: its index folded into the last four bytes. The segment count
/// is bounded by `PAYLOAD_BYTES_MAX`, far below 2^32, so no two segments share one.
fn fold<const N: usize>(mut nonce: [u8; N], i: usize) -> [u8; N] {
    let i = (i as u32).to_le_bytes();
    for (n, b) in nonce[N - 4..].iter_mut().zip(i) {
        *n ^= b;
    }
    nonce
}

fn segment_ad(header: &[u8; HEADER_BYTES], i: usize, last: bool) -> [u8; HEADER_BYTES + 5] {
    let mut ad = [0u8; HEADER_BYTES + 5];
    ad[..HEADER_BYTES].copy_from_slice(header);
    ad[HEADER_BYTES..HEADER_BYTES + 4].copy_from_slice(&(i as u32).to_le_bytes());
    ad[HEADER_BYTES + 4] = u8::from(last);
    ad
}

/// Seals `payload` in segments; `header` must carry `FLAG_SEGMENTED`.
pub(crate) fn seal_segmented(
    sealing: &Sealing,
    header: &Header,
    nonce: [u8; NONCE_BYTES],
    payload: &[u8],
) -> Result<Vec<u8>, FormatError> {
    debug_assert!(header.flags & FLAG_SEGMENTED != 0);
    let aad = header.encode();
    let count = segment_count(payload.len());
    let mut out = Vec::with_capacity(PREFIX_BYTES + payload.len() + count * TAG_BYTES);
    out.extend_from_slice(&aad);
    out.extend_from_slice(&nonce);
    let cipher = Cipher::new(sealing, &nonce)?;
    for i in 0..count {
        let plain = &payload
            [(i * SEGMENT_BYTES).min(payload.len())..((i + 1) * SEGMENT_BYTES).min(payload.len())];
        let at = out.len();
        out.extend_from_slice(plain);
        let tag = cipher.seal(i, &segment_ad(&aad, i, i + 1 == count), &mut out[at..])?;
        out.extend_from_slice(&tag);
    }
    Ok(out)
}

/// Opens segments `segments` of a segmented message whose payload is `len` bytes: `prefix`
/// is the message's first `PREFIX_BYTES`, `sealed` the envelope bytes of exactly those
/// segments. Returns their plain bytes.
pub fn open_segments(
    sealing: &Sealing,
    expected: &Header,
    prefix: &[u8],
    len: usize,
    segments: Range<usize>,
    sealed: &[u8],
) -> Result<Vec<u8>, FormatError> {
    let prefix = prefix.get(..PREFIX_BYTES).ok_or(FormatError::Truncated)?;
    let found = check_expected(expected, prefix)?;
    if found.flags & FLAG_SEGMENTED == 0 {
        return Err(FormatError::Unexpected("not segmented"));
    }
    if len > PAYLOAD_BYTES_MAX {
        return Err(FormatError::TooLarge(len));
    }
    let count = segment_count(len);
    if segments.is_empty() || segments.end > count {
        return Err(FormatError::Truncated);
    }
    let base = segment_span(len, segments.start).start;
    if sealed.len() != segment_span(len, segments.end - 1).end - base {
        return Err(FormatError::Truncated);
    }
    let mut aad = [0u8; HEADER_BYTES];
    aad.copy_from_slice(&prefix[..HEADER_BYTES]);
    let mut nonce = [0u8; NONCE_BYTES];
    nonce.copy_from_slice(&prefix[HEADER_BYTES..]);
    let cipher = Cipher::new(sealing, &nonce)?;
    let mut out = Vec::with_capacity(sealed.len());
    for i in segments {
        let span = segment_span(len, i);
        let (plain, tag) =
            sealed[span.start - base..span.end - base].split_at(span.len() - TAG_BYTES);
        let at = out.len();
        out.extend_from_slice(plain);
        cipher.open(i, &segment_ad(&aad, i, i + 1 == count), &mut out[at..], tag)?;
    }
    Ok(out)
}

/// The payload length and segment count of a whole segmented message of `bytes` bytes.
fn payload_shape(bytes: usize) -> Result<(usize, usize), FormatError> {
    let rest = bytes
        .checked_sub(PREFIX_BYTES)
        .filter(|&r| r >= TAG_BYTES)
        .ok_or(FormatError::Truncated)?;
    let count = rest.div_ceil(SEGMENT_BYTES + TAG_BYTES);
    let len = rest - count * TAG_BYTES;
    if segment_count(len) != count {
        return Err(FormatError::Truncated);
    }
    Ok((len, count))
}

/// Opens a whole segmented message in place, its header already checked: each segment is
/// authenticated and decrypted where it lies, then moved down to follow the previous one.
pub(crate) fn open_all_in_place(
    sealing: &Sealing,
    mut bytes: Vec<u8>,
) -> Result<Vec<u8>, FormatError> {
    let (len, count) = payload_shape(bytes.len())?;
    if len > PAYLOAD_BYTES_MAX {
        return Err(FormatError::TooLarge(len));
    }
    let mut aad = [0u8; HEADER_BYTES];
    aad.copy_from_slice(&bytes[..HEADER_BYTES]);
    let mut nonce = [0u8; NONCE_BYTES];
    nonce.copy_from_slice(&bytes[HEADER_BYTES..PREFIX_BYTES]);
    let cipher = Cipher::new(sealing, &nonce)?;
    let mut end = 0;
    for i in 0..count {
        let span = segment_span(len, i);
        let plain = span.start..span.end - TAG_BYTES;
        let (body, tag) = bytes[span].split_at_mut(plain.len());
        cipher.open(i, &segment_ad(&aad, i, i + 1 == count), body, tag)?;
        bytes.copy_within(plain.clone(), end);
        end += plain.len();
    }
    debug_assert_eq!(end, len);
    bytes.truncate(end);
    Ok(bytes)
}

/// Opens a whole segmented message (`open` for a header with `FLAG_SEGMENTED`).
pub(crate) fn open_all(
    sealing: &Sealing,
    expected: &Header,
    bytes: &[u8],
) -> Result<Vec<u8>, FormatError> {
    let (len, count) = payload_shape(bytes.len())?;
    open_segments(
        sealing,
        expected,
        bytes,
        len,
        0..count,
        &bytes[PREFIX_BYTES..],
    )
}
