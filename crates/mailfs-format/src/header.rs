//! The clear header every envelope starts with (docs/mailfs.md 3), the sizes of an
//! envelope's parts, and the check that a header is the one a reader expected (M1).

use crate::error::FormatError;

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

/// Header flag: the payload is sealed in segments.
pub const FLAG_SEGMENTED: u16 = 1 << 1;

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

/// The header of `bytes` if it is `expected` in everything but the flags (which the tag or
/// MAC binds: flipping one is a forgery).
pub(crate) fn check_expected(expected: &Header, bytes: &[u8]) -> Result<Header, FormatError> {
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
