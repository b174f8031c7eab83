//! Byte layouts of the volume: its header, the 32-byte message header, the summary, and the
//! little-endian encoder/decoder every on-disk structure uses.
//!
//! Decoding never trusts a length: every read is bounds-checked and fails with a
//! [`DecodeError`], which callers turn into a `Corrupt` error naming the file and offset.

use crate::Summary;

/// The allocation unit of `volume.dat`; equal to the atomic sector.
pub(crate) const UNIT: u64 = disk::SECTOR_BYTES;
/// Bytes at the start of `volume.dat` reserved for its header (one page).
pub(crate) const VOLUME_HEADER_BYTES: u64 = 4096;
/// The first unit messages may use.
pub(crate) const DATA_START_UNIT: u64 = VOLUME_HEADER_BYTES / UNIT;
pub(crate) const VOLUME_MAGIC: [u8; 8] = *b"MSTWSVOL";
/// The format of `volume.dat`.
pub(crate) const FORMAT_VERSION: u32 = 1;
/// The format of the index files, `index-*.log` and `index.snap`: 2 added the `Delivered`
/// journal operation and the snapshot's delivered-key sections (docs/storage.md, "Index
/// format 2"). This build writes 2 and reads 1 and 2.
pub(crate) const INDEX_FORMAT_VERSION: u32 = 2;
pub(crate) const MSG_MAGIC: [u8; 4] = *b"MSGM";
pub(crate) const MSG_HEADER_BYTES: usize = 32;

/// A decoding failure: what was being read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DecodeError(pub(crate) String);

impl DecodeError {
    pub(crate) fn new(what: impl Into<String>) -> DecodeError {
        DecodeError(what.into())
    }
}

/// Appends little-endian fields to a buffer.
#[derive(Default)]
pub(crate) struct Enc(pub(crate) Vec<u8>);

impl Enc {
    pub(crate) fn u8(&mut self, v: u8) {
        self.0.push(v);
    }
    pub(crate) fn u16(&mut self, v: u16) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    pub(crate) fn u32(&mut self, v: u32) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    pub(crate) fn u64(&mut self, v: u64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    pub(crate) fn i64(&mut self, v: i64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    /// A string of at most 65535 bytes (names are validated far below that).
    pub(crate) fn str(&mut self, s: &str) {
        let len = s.len().min(u16::MAX as usize);
        self.u16(len as u16);
        self.0.extend_from_slice(&s.as_bytes()[..len]);
    }
}

/// Reads little-endian fields from a slice, bounds-checked.
pub(crate) struct Dec<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Dec<'a> {
    pub(crate) fn new(buf: &'a [u8]) -> Dec<'a> {
        Dec { buf, pos: 0 }
    }
    pub(crate) fn is_empty(&self) -> bool {
        self.pos >= self.buf.len()
    }
    pub(crate) fn remaining(&self) -> usize {
        self.buf.len().saturating_sub(self.pos)
    }
    pub(crate) fn bytes(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        if self.remaining() < n {
            return Err(DecodeError::new(format!(
                "field of {n} bytes at {} runs past the end ({} bytes)",
                self.pos,
                self.buf.len()
            )));
        }
        let out = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(out)
    }
    fn arr<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.bytes(N)?);
        Ok(out)
    }
    pub(crate) fn u8(&mut self) -> Result<u8, DecodeError> {
        Ok(self.arr::<1>()?[0])
    }
    pub(crate) fn u16(&mut self) -> Result<u16, DecodeError> {
        Ok(u16::from_le_bytes(self.arr()?))
    }
    pub(crate) fn u32(&mut self) -> Result<u32, DecodeError> {
        Ok(u32::from_le_bytes(self.arr()?))
    }
    pub(crate) fn u64(&mut self) -> Result<u64, DecodeError> {
        Ok(u64::from_le_bytes(self.arr()?))
    }
    pub(crate) fn i64(&mut self) -> Result<i64, DecodeError> {
        Ok(i64::from_le_bytes(self.arr()?))
    }
    pub(crate) fn str(&mut self) -> Result<String, DecodeError> {
        let len = self.u16()? as usize;
        let bytes = self.bytes(len)?;
        String::from_utf8(bytes.to_vec()).map_err(|_| DecodeError::new("string is not UTF-8"))
    }
}

pub(crate) fn le_u32(b: &[u8]) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[..4]);
    u32::from_le_bytes(a)
}

/// The fixed header at the start of `volume.dat`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct VolumeHeader {
    /// Random at creation; journals and snapshots carry it, so files of two stores never mix.
    pub(crate) store_id: u64,
}

impl VolumeHeader {
    /// 64 meaningful bytes: magic, version, unit size, store id, data start, CRC at 60.
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut e = Enc::default();
        e.0.extend_from_slice(&VOLUME_MAGIC);
        e.u32(FORMAT_VERSION);
        e.u32(UNIT as u32);
        e.u64(self.store_id);
        e.u64(DATA_START_UNIT);
        e.0.resize(60, 0);
        let crc = crc32c::crc32c(&e.0);
        e.u32(crc);
        e.0.resize(VOLUME_HEADER_BYTES as usize, 0);
        e.0
    }

    pub(crate) fn decode(buf: &[u8]) -> Result<VolumeHeader, DecodeError> {
        if buf.len() < 64 {
            return Err(DecodeError::new("volume header is shorter than 64 bytes"));
        }
        if buf[..8] != VOLUME_MAGIC {
            return Err(DecodeError::new("volume header has a wrong magic number"));
        }
        if crc32c::crc32c(&buf[..60]) != le_u32(&buf[60..64]) {
            return Err(DecodeError::new("volume header checksum mismatch"));
        }
        let mut d = Dec::new(&buf[8..60]);
        let version = d.u32()?;
        let unit = d.u32()?;
        let store_id = d.u64()?;
        let start = d.u64()?;
        if version != FORMAT_VERSION || unit as u64 != UNIT || start != DATA_START_UNIT {
            return Err(DecodeError::new(format!(
                "volume format version {version}, unit {unit}, data start {start} not supported"
            )));
        }
        Ok(VolumeHeader { store_id })
    }
}

/// The header in front of every message in the volume.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct MsgHeader {
    pub(crate) folder: u32,
    pub(crate) uid: u32,
    pub(crate) summary_len: u32,
    pub(crate) content_len: u32,
    /// CRC-32C of summary + content.
    pub(crate) data_crc: u32,
}

impl MsgHeader {
    pub(crate) fn encode(&self) -> [u8; MSG_HEADER_BYTES] {
        let mut out = [0u8; MSG_HEADER_BYTES];
        out[0..4].copy_from_slice(&MSG_MAGIC);
        out[4..8].copy_from_slice(&self.folder.to_le_bytes());
        out[8..12].copy_from_slice(&self.uid.to_le_bytes());
        out[12..16].copy_from_slice(&self.summary_len.to_le_bytes());
        out[16..20].copy_from_slice(&self.content_len.to_le_bytes());
        out[20..24].copy_from_slice(&self.data_crc.to_le_bytes());
        let crc = crc32c::crc32c(&out[..28]);
        out[28..32].copy_from_slice(&crc.to_le_bytes());
        out
    }

    pub(crate) fn decode(buf: &[u8]) -> Result<MsgHeader, DecodeError> {
        if buf.len() < MSG_HEADER_BYTES {
            return Err(DecodeError::new("message header cut short"));
        }
        if buf[0..4] != MSG_MAGIC {
            return Err(DecodeError::new("no message header (wrong magic)"));
        }
        if crc32c::crc32c(&buf[..28]) != le_u32(&buf[28..32]) {
            return Err(DecodeError::new("message header checksum mismatch"));
        }
        Ok(MsgHeader {
            folder: le_u32(&buf[4..]),
            uid: le_u32(&buf[8..]),
            summary_len: le_u32(&buf[12..]),
            content_len: le_u32(&buf[16..]),
            data_crc: le_u32(&buf[20..]),
        })
    }

    /// Bytes the message occupies before padding.
    #[cfg(test)]
    pub(crate) fn record_bytes(&self) -> u64 {
        MSG_HEADER_BYTES as u64 + self.summary_len as u64 + self.content_len as u64
    }
}

/// Units needed for a message with these lengths.
pub(crate) fn units_for(summary_len: u32, content_len: u32) -> u64 {
    (MSG_HEADER_BYTES as u64 + summary_len as u64 + content_len as u64).div_ceil(UNIT)
}

/// Cuts `s` to at most `max` bytes on a character boundary.
fn cut(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s[..end].to_string()
}

/// Parses the headers once, at append, into the summary stored in front of the content.
pub fn parse_summary(content: &[u8], field_max: usize) -> Summary {
    let size = content.len() as u64;
    let Some(msg) = mail_parser::MessageParser::default().parse_headers(content) else {
        return Summary {
            size,
            ..Summary::default()
        };
    };
    let addr = |a: &mail_parser::Addr<'_>| match (a.name(), a.address()) {
        (Some(n), Some(ad)) => format!("{n} <{ad}>"),
        (None, Some(ad)) => ad.to_string(),
        (Some(n), None) => n.to_string(),
        (None, None) => String::new(),
    };
    // Groups keep their names (`friends: a@x, b@y;`), so SEARCH TO finds a group by name.
    let list = |a: Option<&mail_parser::Address<'_>>| match a {
        Some(mail_parser::Address::Group(groups)) => groups
            .iter()
            .map(|g| {
                let members = g.addresses.iter().map(addr).collect::<Vec<_>>().join(", ");
                match &g.name {
                    Some(name) => format!("{name}: {members};"),
                    None => members,
                }
            })
            .filter(|s| !s.is_empty())
            .collect::<Vec<_>>()
            .join(", "),
        Some(a) => a.iter().map(addr).collect::<Vec<_>>().join(", "),
        None => String::new(),
    };
    let (structure, preview) = mime_structure::Structure::parse_with_preview(content);
    let date = cut(
        &msg.date().map(|d| d.to_rfc822()).unwrap_or_default(),
        field_max,
    );
    Summary {
        from: cut(&list(msg.from()), field_max),
        to: cut(&list(msg.to()), field_max),
        subject: cut(msg.subject().unwrap_or(""), field_max),
        sent: mail_model::sent_at(&date),
        date,
        message_id: cut(msg.message_id().unwrap_or(""), field_max),
        size,
        structure: structure.to_bytes(),
        preview: preview.text,
        has_attachment: preview.has_attachment,
        references: Some(threading_ids(&msg, field_max)),
    }
}

/// [`Summary::references`]: RFC 5256 3 (REFERENCES) step 1.A, the References ids, or else
/// the first In-Reply-To id; the newest that fit in `field_max` bytes.
fn threading_ids(msg: &mail_parser::Message<'_>, field_max: usize) -> String {
    let ids = |v: &mail_parser::HeaderValue<'_>| -> Vec<String> {
        v.as_text_list()
            .map(|l| l.iter().map(|s| s.to_string()).collect())
            .or_else(|| v.as_text().map(|s| vec![s.to_string()]))
            .unwrap_or_default()
    };
    let mut chosen = ids(msg.references());
    if chosen.is_empty() {
        chosen = ids(msg.in_reply_to()).into_iter().take(1).collect();
    }
    // Ids never hold white space (RFC 5322 3.6.4); one that does is not an id.
    chosen.retain(|id| !id.is_empty() && !id.contains(char::is_whitespace));
    let mut kept: Vec<&str> = Vec::new();
    let mut used = 0usize;
    for id in chosen.iter().rev() {
        let cost = id.len() + usize::from(!kept.is_empty());
        if used + cost > field_max {
            break;
        }
        used += cost;
        kept.push(id);
    }
    kept.reverse();
    kept.join(" ")
}

/// The summary's byte form: five length-prefixed strings (the size is the content length),
/// then the MIME structure as a u32-length-prefixed blob (empty allowed), then the preview
/// (a length-prefixed string) and one byte of marks (bit 0: has an attachment), then the
/// threading ids (a length-prefixed string, present whenever they were looked for, even
/// empty). Older summaries end earlier and read back with what they lack empty: one written
/// before the structure existed ends after the strings, one written before the preview after
/// the structure, one written before the threading ids after the marks (its ids read as
/// unknown, `None`). Each part is written only when it or a later one is present, so a
/// summary without them is still written in the oldest form.
pub(crate) fn encode_summary(s: &Summary) -> Vec<u8> {
    let mut e = Enc::default();
    for field in [&s.from, &s.to, &s.subject, &s.date, &s.message_id] {
        e.str(field);
    }
    let with_references = s.references.is_some();
    let with_preview = !s.preview.is_empty() || s.has_attachment || with_references;
    if !s.structure.is_empty() || with_preview {
        e.u32(s.structure.len() as u32);
        e.0.extend_from_slice(&s.structure);
    }
    if with_preview {
        e.str(&s.preview);
        e.u8(u8::from(s.has_attachment));
    }
    if let Some(references) = &s.references {
        e.str(references);
    }
    e.0
}

pub(crate) fn decode_summary(buf: &[u8], size: u64) -> Result<Summary, DecodeError> {
    let mut d = Dec::new(buf);
    let summary = Summary {
        from: d.str()?,
        to: d.str()?,
        subject: d.str()?,
        date: d.str()?,
        message_id: d.str()?,
        size,
        structure: if d.is_empty() {
            Vec::new()
        } else {
            let n = d.u32()? as usize;
            d.bytes(n)?.to_vec()
        },
        preview: String::new(),
        has_attachment: false,
        references: None,
        sent: None,
    };
    let mut summary = summary;
    summary.sent = mail_model::sent_at(&summary.date);
    if !d.is_empty() {
        // The preview and its marks come together.
        summary.preview = d.str()?;
        let marks = d.u8()?;
        if marks & !1 != 0 {
            return Err(DecodeError::new("summary has unknown marks"));
        }
        summary.has_attachment = marks & 1 == 1;
    }
    if !d.is_empty() {
        summary.references = Some(d.str()?);
    }
    if !d.is_empty() {
        return Err(DecodeError::new("summary has trailing bytes"));
    }
    Ok(summary)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn volume_header_round_trip_and_damage() {
        let h = VolumeHeader {
            store_id: 0x1234_5678_9abc_def0,
        };
        let bytes = h.encode();
        assert_eq!(bytes.len() as u64, VOLUME_HEADER_BYTES);
        assert_eq!(VolumeHeader::decode(&bytes).unwrap(), h);
        for i in 0..64 {
            let mut bad = bytes.clone();
            bad[i] ^= 0x10;
            assert!(VolumeHeader::decode(&bad).is_err(), "flip at {i} accepted");
        }
        assert!(VolumeHeader::decode(&bytes[..10]).is_err());
        assert!(VolumeHeader::decode(&[0u8; 4096]).is_err());
    }

    #[test]
    fn message_header_round_trip_and_damage() {
        let h = MsgHeader {
            folder: 7,
            uid: 42,
            summary_len: 10,
            content_len: 1000,
            data_crc: 99,
        };
        let bytes = h.encode();
        assert_eq!(MsgHeader::decode(&bytes).unwrap(), h);
        assert_eq!(h.record_bytes(), 1042);
        assert_eq!(units_for(10, 1000), 3);
        assert_eq!(units_for(0, 480), 1);
        assert_eq!(units_for(0, 481), 2);
        let mut bad = bytes;
        bad[9] ^= 1;
        assert!(MsgHeader::decode(&bad).is_err());
        assert!(MsgHeader::decode(&[0u8; 32]).is_err());
    }

    #[test]
    fn summary_is_parsed_and_round_trips() {
        let msg = b"From: Alice <alice@example.org>\r\nTo: bob@example.org, Carol <c@x.org>\r\n\
Subject: Hello there\r\nDate: Tue, 1 Jul 2003 10:52:37 +0200\r\nMessage-ID: <abc@example.org>\r\n\r\nBody\r\n";
        let s = parse_summary(msg, 1024);
        assert_eq!(s.from, "Alice <alice@example.org>");
        assert_eq!(s.to, "bob@example.org, Carol <c@x.org>");
        assert_eq!(s.subject, "Hello there");
        assert!(s.date.contains("2003"), "{}", s.date);
        assert_eq!(s.message_id, "abc@example.org");
        assert_eq!(s.size, msg.len() as u64);
        let bytes = encode_summary(&s);
        assert_eq!(decode_summary(&bytes, s.size).unwrap(), s);
        assert!(decode_summary(&bytes[..bytes.len() - 1], s.size).is_err());
        // The MIME structure rides along, and reads back as what a fresh parse gives.
        let structure = mime_structure::Structure::from_bytes(&s.structure).unwrap();
        assert_eq!(structure, mime_structure::Structure::parse(msg));
        // A summary written before structures existed still reads, with none.
        let old = encode_summary(&Summary {
            structure: Vec::new(),
            ..s.clone()
        });
        assert!(old.len() < bytes.len());
        assert!(decode_summary(&old, s.size).unwrap().structure.is_empty());
        // The preview and the attachment mark ride along; one written before them reads
        // back without.
        assert_eq!(s.preview, "Body");
        assert!(!s.has_attachment);
        let marked = Summary {
            has_attachment: true,
            ..s.clone()
        };
        assert_eq!(
            decode_summary(&encode_summary(&marked), s.size).unwrap(),
            marked
        );
        let before_previews = encode_summary(&Summary {
            preview: String::new(),
            ..s.clone()
        });
        assert!(before_previews.len() < bytes.len());
        let read = decode_summary(&before_previews, s.size).unwrap();
        assert_eq!((read.preview.as_str(), read.has_attachment), ("", false));
        assert_eq!(read.structure, s.structure);
        // The marks byte sits before the threading ids (`len u16` and the ids): an unknown
        // mark is damage.
        let ids = s.references.as_deref().unwrap_or_default().len();
        let mut unknown = bytes.clone();
        let marks_at = unknown.len() - ids - 3;
        unknown[marks_at] = 2;
        assert!(decode_summary(&unknown, s.size).is_err());
        let cut_s = parse_summary(msg, 5);
        assert_eq!(cut_s.subject, "Hello");
        let none = parse_summary(b"", 10);
        assert_eq!(none.subject, "");
    }

    /// RFC 5256 3 REFERENCES 1.A: References, else the first In-Reply-To; the newest kept.
    #[test]
    fn threading_ids_ride_in_the_summary() {
        let refs =
            b"Message-ID: <c@x>\r\nReferences: <a@x>\r\n <b@x>\r\nIn-Reply-To: <q@x>\r\n\r\nx";
        let s = parse_summary(refs, 1024);
        assert_eq!(s.references.as_deref(), Some("a@x b@x"));
        let back = decode_summary(&encode_summary(&s), s.size).unwrap();
        assert_eq!(back, s);
        let reply = parse_summary(b"In-Reply-To: <q@x> <r@x>\r\n\r\nx", 1024);
        assert_eq!(reply.references.as_deref(), Some("q@x"));
        // Without structure or preview the ids still come back.
        let bare = Summary {
            references: Some("a@x".into()),
            ..Summary::default()
        };
        assert_eq!(decode_summary(&encode_summary(&bare), 0).unwrap(), bare);
        // The newest ids that fit.
        let many = parse_summary(b"References: <aaaa@x> <bbbb@x> <cccc@x>\r\n\r\nx", 13);
        assert_eq!(many.references.as_deref(), Some("bbbb@x cccc@x"));
        // Looked for and none found: known to be none.
        let none = parse_summary(b"Subject: s\r\n\r\nbody", 1024);
        assert_eq!(
            decode_summary(&encode_summary(&none), none.size)
                .unwrap()
                .references
                .as_deref(),
            Some("")
        );
        // A summary written before the ids reads back with them unknown.
        let old = encode_summary(&Summary {
            references: None,
            ..none.clone()
        });
        assert_eq!(decode_summary(&old, none.size).unwrap().references, None);
    }

    #[test]
    fn decoder_never_reads_past_the_end() {
        let mut d = Dec::new(&[1, 2, 3]);
        assert!(d.u32().is_err());
        let mut d = Dec::new(&[5, 0, b'a']);
        assert!(d.str().is_err());
    }
}
