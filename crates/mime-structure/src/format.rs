//! The stored form.
//!
//! ```text
//! version   u8 (1)
//! envelope, body_structure, body: varint length, bytes
//! parts     varint count (1..=PARTS_MAX), then per part, breadth first:
//!   tag           u8: kind (0 leaf, 1 multipart, 2 message) | encoding << 2
//!   header_start  varint
//!   header_len    varint   (body_start - header_start)
//!   body_len      varint   (body_end - body_start)
//!   child_count   varint   (multipart only; a message part has exactly one child)
//! ```
//!
//! Varints are LEB128. Children are not numbered: breadth first, the children of the parts
//! come one after the other, in order, starting at index 1.

use std::fmt;

use crate::limits::PARTS_MAX;
use crate::structure::{Encoding, Kind, Part, Structure};

const VERSION: u8 = 1;

/// A stored structure that cannot be read back (damaged, truncated, or another version).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DecodeError {
    what: &'static str,
}

impl DecodeError {
    fn new(what: &'static str) -> DecodeError {
        DecodeError { what }
    }
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "stored MIME structure is unreadable: {}", self.what)
    }
}

impl std::error::Error for DecodeError {}

impl Structure {
    /// The compact, versioned form to store next to the message.
    pub fn to_bytes(&self) -> Vec<u8> {
        encode(self)
    }

    /// Reads back [`Structure::to_bytes`]. Never panics; damaged input is an error.
    pub fn from_bytes(bytes: &[u8]) -> Result<Structure, DecodeError> {
        decode(bytes)
    }
}

fn encode(s: &Structure) -> Vec<u8> {
    let mut out = Vec::with_capacity(
        16 + s.envelope.len() + s.body_structure.len() + s.body.len() + 8 * s.parts.len(),
    );
    out.push(VERSION);
    for blob in [&s.envelope, &s.body_structure, &s.body] {
        put(&mut out, blob.len() as u64);
        out.extend_from_slice(blob);
    }
    put(&mut out, s.parts.len() as u64);
    for p in &s.parts {
        let kind = match p.kind {
            Kind::Leaf => 0,
            Kind::Multipart => 1,
            Kind::Message => 2,
        };
        out.push(kind | p.encoding.code() << 2);
        put(&mut out, p.header_start);
        put(&mut out, p.body_start - p.header_start);
        put(&mut out, p.body_end - p.body_start);
        if p.kind == Kind::Multipart {
            put(&mut out, u64::from(p.child_count));
        }
    }
    out
}

fn decode(bytes: &[u8]) -> Result<Structure, DecodeError> {
    let mut r = Reader { bytes, pos: 0 };
    if r.u8()? != VERSION {
        return Err(DecodeError::new("unknown version"));
    }
    let envelope = r.blob()?.to_vec();
    let body_structure = r.blob()?.to_vec();
    let body = r.blob()?.to_vec();
    let count = r.varint()?;
    if count == 0 || count > PARTS_MAX as u64 {
        return Err(DecodeError::new("bad part count"));
    }
    let count = count as usize;
    // Every part takes at least 4 bytes: refuse before allocating for a count that lies.
    if count > r.remaining() / 4 {
        return Err(DecodeError::new("truncated"));
    }
    let mut parts = Vec::with_capacity(count);
    let mut next_child = 1usize;
    for index in 0..count {
        let tag = r.u8()?;
        let kind = match tag & 3 {
            0 => Kind::Leaf,
            1 => Kind::Multipart,
            2 => Kind::Message,
            _ => return Err(DecodeError::new("bad part kind")),
        };
        let encoding = Encoding::from_code(tag >> 2).ok_or(DecodeError::new("bad encoding"))?;
        let header_start = r.varint()?;
        let body_start = header_start
            .checked_add(r.varint()?)
            .ok_or(DecodeError::new("offset overflow"))?;
        let body_end = body_start
            .checked_add(r.varint()?)
            .ok_or(DecodeError::new("offset overflow"))?;
        let child_count = match kind {
            Kind::Leaf => 0,
            Kind::Multipart => r.varint()?,
            Kind::Message => 1,
        };
        // Breadth first, a part's children come after every part read so far, so the
        // parts form a tree: each one but the first has exactly one parent, before it.
        if index > 0 && index >= next_child {
            return Err(DecodeError::new("part without a parent"));
        }
        if kind == Kind::Multipart && child_count == 0 {
            return Err(DecodeError::new("multipart without parts"));
        }
        let first_child = if child_count == 0 { 0 } else { next_child };
        next_child = usize::try_from(child_count)
            .ok()
            .and_then(|c| next_child.checked_add(c))
            .filter(|&n| n <= count)
            .ok_or(DecodeError::new("too many children"))?;
        parts.push(Part {
            header_start,
            body_start,
            body_end,
            encoding,
            kind,
            first_child: first_child as u32,
            child_count: child_count as u32,
            message: None,
        });
    }
    if next_child != count {
        return Err(DecodeError::new("part without a parent"));
    }
    if r.remaining() != 0 {
        return Err(DecodeError::new("trailing bytes"));
    }
    link_messages(&mut parts);
    Ok(Structure {
        envelope,
        body_structure,
        body,
        parts,
    })
}

/// Copies each encapsulated message's ranges into its message/rfc822 part. Its text ends
/// where the part does: a multipart message's epilogue, after its closing boundary, is part
/// of its body (RFC 2046 5.1.1), so `[n.TEXT]` carries it (RFC 9051 6.4.5).
pub(crate) fn link_messages(parts: &mut [Part]) {
    for i in 0..parts.len() {
        if parts[i].kind == Kind::Message
            && let Some(child) = parts.get(parts[i].first_child as usize)
        {
            let end = parts[i].body_end.max(child.body_start);
            parts[i].message = Some((child.header_start, child.body_start, end));
        }
    }
}

fn put(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn remaining(&self) -> usize {
        self.bytes.len() - self.pos
    }

    fn u8(&mut self) -> Result<u8, DecodeError> {
        let b = *self
            .bytes
            .get(self.pos)
            .ok_or(DecodeError::new("truncated"))?;
        self.pos += 1;
        Ok(b)
    }

    fn varint(&mut self) -> Result<u64, DecodeError> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.u8()?;
            let bits = u64::from(b & 0x7f);
            if shift == 63 && bits > 1 {
                return Err(DecodeError::new("varint overflow"));
            }
            v |= bits << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(DecodeError::new("varint overflow"))
    }

    fn blob(&mut self) -> Result<&'a [u8], DecodeError> {
        let len = self.varint()?;
        if len > self.remaining() as u64 {
            return Err(DecodeError::new("truncated"));
        }
        let blob = &self.bytes[self.pos..self.pos + len as usize];
        self.pos += len as usize;
        Ok(blob)
    }
}
