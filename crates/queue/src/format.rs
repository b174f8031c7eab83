//! Byte layouts of the queue's segment files, and their encoding and decoding.
//!
//! Everything that knows an offset lives here; the rest of the crate deals in the structs.
//! Decoding never trusts a length it has not checked and never panics on bad bytes: it
//! returns a description of what is wrong. The layouts are repeated above their constants so
//! the code can be checked against `docs/storage.md` without switching files.

use crate::{Envelope, Recipient, RecipientStatus};

// Segment file
//
//   0            header (4096 bytes, one page)
//   4096         slot area: slot_count × 64-byte slots (the on-disk MIN table)
//   data_offset  record area: records back to back, each padded to 8 bytes
//   segment_bytes

/// Size of the header page.
pub(crate) const HEADER_BYTES: u64 = 4096;
/// Size of one slot.
pub(crate) const SLOT_BYTES: u64 = 64;
/// One slot per this many bytes of segment.
pub(crate) const BYTES_PER_SLOT: u64 = 2048;
/// Smallest segment a header may declare (and `QueueConfig::validate` accepts); the largest
/// is below 4 GiB, since record offsets are 32-bit.
pub(crate) const SEGMENT_BYTES_MIN: u64 = 1 << 20;
/// Largest segment size: the largest multiple of 4096 below 4 GiB.
pub(crate) const SEGMENT_BYTES_LIMIT: u64 = (u32::MAX as u64) & !4095;

// Segment header
//
//   off size field
//    0   8   magic b"MSTWQSEG"
//    8   4   format version (1)
//   12   4   kind: 1 main, 2 deferred
//   16   8   segment sequence number (its name)
//   24   8   generation: queue-wide, max of all segments + 1 each time a segment is (re)activated
//   32   8   segment_bytes
//   40   4   slot_count
//   44   4   data_offset
//   48   8   id floor: the queue's next message id when this generation began
//   56   4   CRC-32C of bytes 0..56

pub(crate) const MAGIC: &[u8; 8] = b"MSTWQSEG";
pub(crate) const VERSION: u32 = 1;
const H_MAGIC: usize = 0;
const H_VERSION: usize = 8;
const H_KIND: usize = 12;
const H_SEQ: usize = 16;
const H_GENERATION: usize = 24;
const H_SEGMENT_BYTES: usize = 32;
const H_SLOT_COUNT: usize = 40;
const H_DATA_OFFSET: usize = 44;
const H_ID_FLOOR: usize = 48;
const H_CRC: usize = 56;
/// Bytes of the header that are meaningful (the rest of the page is zero).
pub(crate) const HEADER_USED: usize = 60;

// Slot (64 bytes)
//
//   off size field
//    0   8   message id
//    8   4   record offset in the segment
//   12   4   record length (padded)
//   16   4   envelope length
//   20   4   content length
//   24   2   recipient count
//   26   2   attempts so far
//   28   8   arrival time (Unix ms)
//   36   8   next attempt time (Unix ms; 0 = now)
//   44   4   CRC-32C of the record (header, envelope, content; not the status bytes)
//   48   1   flags: bit 0 = last slot of its commit batch
//   49   7   generation of the segment when the slot was written (low 56 bits)
//   56   1   done flag, written in place, outside the checksum: 0 pending, 1 finished
//   57   1   status hint, written in place, outside the checksum: 1 = a status byte may be non-zero
//   58   2   reserved (0)
//   60   4   chained CRC of bytes 0..56 (seed: previous slot's CRC; slot 0: CRC of the generation)

const S_ID: usize = 0;
const S_OFFSET: usize = 8;
const S_LEN: usize = 12;
const S_ENV_LEN: usize = 16;
const S_CONTENT_LEN: usize = 20;
const S_RECIPIENTS: usize = 24;
const S_ATTEMPTS: usize = 26;
const S_ARRIVAL: usize = 28;
const S_NEXT_ATTEMPT: usize = 36;
const S_RECORD_CRC: usize = 44;
const S_FLAGS: usize = 48;
const S_GENERATION: usize = 49;
/// The part of the generation a slot carries.
pub(crate) const SLOT_GENERATION_MASK: u64 = (1 << 56) - 1;
/// Offset of the done flag inside a slot (written in place).
pub(crate) const S_DONE: usize = 56;
/// Offset of the status hint inside a slot (written in place, right after the done flag).
pub(crate) const S_HINT: usize = 57;
const S_CRC: usize = 60;
/// Slot flag: this slot is the last of its commit batch.
pub(crate) const FLAG_BATCH_END: u8 = 1;

// Record (in the record area)
//
//   size field
//    8   message id (must match the slot)
//    2   recipient count n
//    2   reserved (0)
//    4   envelope length
//    4   content length
//    n   status bytes, one per recipient, written in place, outside every checksum
//    …   envelope (see `encode_envelope`)
//    …   content
//   0–7  zero padding to 8 bytes

/// Size of the fixed record header before the status bytes.
pub(crate) const RECORD_HEADER_BYTES: usize = 20;

/// Status byte values.
pub(crate) const STATUS_PENDING: u8 = 0;
pub(crate) const STATUS_DELIVERED: u8 = 1;
pub(crate) const STATUS_FAILED: u8 = 2;
pub(crate) const STATUS_MOVED: u8 = 3;

/// Most recipients the format can hold (16-bit count).
pub(crate) const RECIPIENTS_LIMIT: usize = u16::MAX as usize;
/// Longest string the format can hold (16-bit length prefix).
pub(crate) const STRING_LIMIT: usize = u16::MAX as usize;
/// Failure reasons kept in deferred copies are cut to this many bytes, so a copy stays close
/// to the size of the record it replaces.
pub(crate) const REASON_BYTES_MAX: usize = 256;

/// Which queue a segment belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Kind {
    Main = 1,
    Deferred = 2,
}

impl Kind {
    pub(crate) fn prefix(self) -> &'static str {
        match self {
            Kind::Main => "main",
            Kind::Deferred => "deferred",
        }
    }

    pub(crate) fn index(self) -> usize {
        self as usize - 1
    }

    fn from_u32(v: u32) -> Option<Kind> {
        match v {
            1 => Some(Kind::Main),
            2 => Some(Kind::Deferred),
            _ => None,
        }
    }
}

/// The file name of segment `seq` of `kind`: `main-00000001.seg`.
pub(crate) fn segment_name(kind: Kind, seq: u64) -> String {
    format!("{}-{seq:08}.seg", kind.prefix())
}

/// Where a new segment is built before it is renamed to `path`.
pub(crate) fn temp_path(path: &std::path::Path) -> std::path::PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".tmp");
    name.into()
}

/// Whether `name` is a segment under construction (left behind by a crash: it never held a
/// record, since records are written only after the rename).
pub(crate) fn is_temp_segment_name(name: &str) -> bool {
    name.strip_suffix(".tmp")
        .is_some_and(|n| parse_segment_name(n).is_some())
}

/// Parses a segment file name; `None` for anything else in the directory.
pub(crate) fn parse_segment_name(name: &str) -> Option<(Kind, u64)> {
    let stem = name.strip_suffix(".seg")?;
    let (kind, digits) = if let Some(d) = stem.strip_prefix("main-") {
        (Kind::Main, d)
    } else if let Some(d) = stem.strip_prefix("deferred-") {
        (Kind::Deferred, d)
    } else {
        return None;
    };
    if digits.len() < 8 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let seq = digits.parse().ok().filter(|&seq| seq <= COUNTER_MAX)?;
    Some((kind, seq))
}

/// Slots in a segment of `segment_bytes`.
pub(crate) fn slot_count(segment_bytes: u64) -> u32 {
    (segment_bytes / BYTES_PER_SLOT) as u32
}

/// Where the record area starts: after the slot area, rounded up to a page.
pub(crate) fn data_offset(slot_count: u32) -> u32 {
    (HEADER_BYTES + u64::from(slot_count) * SLOT_BYTES).next_multiple_of(4096) as u32
}

/// The largest record a segment of `segment_bytes` can hold.
pub(crate) fn record_capacity(segment_bytes: u64) -> u64 {
    segment_bytes - u64::from(data_offset(slot_count(segment_bytes)))
}

/// The smallest segment size (a multiple of 4096, at least `floor`) that holds a record of
/// `need` bytes; `None` past what the format can address.
pub(crate) fn segment_bytes_for(need: u64, floor: u64) -> Option<u64> {
    // The slot area takes 64 bytes per 2 KiB, 1/32 of the segment, after the header page.
    let mut bytes = ((need + 2 * 4096) * 32 / 31)
        .next_multiple_of(4096)
        .max(floor);
    while record_capacity(bytes) < need {
        bytes += 4096;
    }
    (bytes <= SEGMENT_BYTES_LIMIT).then_some(bytes)
}

/// Byte offset of slot `index` in its segment.
pub(crate) fn slot_offset(index: u32) -> u64 {
    HEADER_BYTES + u64::from(index) * SLOT_BYTES
}

/// Rounds a record length up to the 8-byte record alignment.
pub(crate) fn pad8(len: u64) -> u64 {
    len.next_multiple_of(8)
}

/// The seed of a segment's slot chain for one generation.
pub(crate) fn chain_seed(generation: u64) -> u32 {
    crc32c::crc32c(&generation.to_le_bytes())
}

/// Message ids, generations and segment sequence numbers count up by one from 1, so none
/// comes near this; one read from disk above it is damage, and refusing it keeps every
/// `+ 1` the queue does on them inside u64 (found by fuzzing, docs/fuzzing.md).
pub(crate) const COUNTER_MAX: u64 = 1 << 62;

/// A decoded segment header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Header {
    pub(crate) kind: Kind,
    pub(crate) seq: u64,
    pub(crate) generation: u64,
    pub(crate) segment_bytes: u64,
    pub(crate) slot_count: u32,
    pub(crate) data_offset: u32,
    pub(crate) id_floor: u64,
}

/// The version in a segment header's first 12 bytes when the magic is ours and the version is
/// above [`VERSION`] (a newer build's segment), whatever the rest of the header holds.
pub(crate) fn newer_version(b: &[u8]) -> Option<u32> {
    if b.len() < H_VERSION + 4 || &b[H_MAGIC..H_MAGIC + 8] != MAGIC {
        return None;
    }
    Some(get_u32(b, H_VERSION)).filter(|&v| v > VERSION)
}

impl Header {
    /// A header for a segment of `segment_bytes` with the derived slot count and data offset.
    pub(crate) fn new(
        kind: Kind,
        seq: u64,
        generation: u64,
        segment_bytes: u64,
        id_floor: u64,
    ) -> Header {
        let slots = slot_count(segment_bytes);
        Header {
            kind,
            seq,
            generation,
            segment_bytes,
            slot_count: slots,
            data_offset: data_offset(slots),
            id_floor,
        }
    }

    pub(crate) fn encode(&self) -> [u8; HEADER_USED] {
        let mut b = [0u8; HEADER_USED];
        b[H_MAGIC..H_MAGIC + 8].copy_from_slice(MAGIC);
        put_u32(&mut b, H_VERSION, VERSION);
        put_u32(&mut b, H_KIND, self.kind as u32);
        put_u64(&mut b, H_SEQ, self.seq);
        put_u64(&mut b, H_GENERATION, self.generation);
        put_u64(&mut b, H_SEGMENT_BYTES, self.segment_bytes);
        put_u32(&mut b, H_SLOT_COUNT, self.slot_count);
        put_u32(&mut b, H_DATA_OFFSET, self.data_offset);
        put_u64(&mut b, H_ID_FLOOR, self.id_floor);
        let crc = crc32c::crc32c(&b[..H_CRC]);
        put_u32(&mut b, H_CRC, crc);
        b
    }

    /// Decodes and checks a header: magic, version, CRC, and that the geometry is the one
    /// this code derives from `segment_bytes` (so a wrong field can never send a read past
    /// the file).
    pub(crate) fn decode(b: &[u8]) -> Result<Header, String> {
        if b.len() < HEADER_USED {
            return Err(format!("header is {} bytes, want {HEADER_USED}", b.len()));
        }
        if &b[H_MAGIC..H_MAGIC + 8] != MAGIC {
            return Err("bad magic (not a queue segment)".into());
        }
        let crc = get_u32(b, H_CRC);
        if crc != crc32c::crc32c(&b[..H_CRC]) {
            return Err("header checksum mismatch".into());
        }
        let version = get_u32(b, H_VERSION);
        if version != VERSION {
            return Err(format!("unsupported format version {version}"));
        }
        let kind = Kind::from_u32(get_u32(b, H_KIND))
            .ok_or_else(|| format!("unknown segment kind {}", get_u32(b, H_KIND)))?;
        let segment_bytes = get_u64(b, H_SEGMENT_BYTES);
        if !(SEGMENT_BYTES_MIN..=u64::from(u32::MAX)).contains(&segment_bytes)
            || !segment_bytes.is_multiple_of(4096)
        {
            return Err(format!("implausible segment size {segment_bytes}"));
        }
        let header = Header::new(
            kind,
            get_u64(b, H_SEQ),
            get_u64(b, H_GENERATION),
            segment_bytes,
            get_u64(b, H_ID_FLOOR),
        );
        if [header.seq, header.generation, header.id_floor]
            .iter()
            .any(|&n| n > COUNTER_MAX)
        {
            return Err("implausible sequence number, generation or id floor".into());
        }
        if get_u32(b, H_SLOT_COUNT) != header.slot_count
            || get_u32(b, H_DATA_OFFSET) != header.data_offset
        {
            return Err("slot count or data offset do not match the segment size".into());
        }
        Ok(header)
    }
}

/// A decoded slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub(crate) struct Slot {
    pub(crate) id: u64,
    pub(crate) offset: u32,
    pub(crate) len: u32,
    pub(crate) env_len: u32,
    pub(crate) content_len: u32,
    pub(crate) recipients: u16,
    pub(crate) attempts: u16,
    pub(crate) arrival_ms: u64,
    pub(crate) next_attempt_ms: u64,
    pub(crate) record_crc: u32,
    pub(crate) flags: u8,
    /// Low 56 bits of the generation the slot was written in.
    pub(crate) generation: u64,
    pub(crate) done: u8,
    pub(crate) hint: u8,
}

impl Slot {
    /// Encodes the slot, chaining its CRC on `prev_crc`; returns the bytes and the CRC.
    pub(crate) fn encode(&self, prev_crc: u32) -> ([u8; SLOT_BYTES as usize], u32) {
        let mut b = [0u8; SLOT_BYTES as usize];
        put_u64(&mut b, S_ID, self.id);
        put_u32(&mut b, S_OFFSET, self.offset);
        put_u32(&mut b, S_LEN, self.len);
        put_u32(&mut b, S_ENV_LEN, self.env_len);
        put_u32(&mut b, S_CONTENT_LEN, self.content_len);
        put_u16(&mut b, S_RECIPIENTS, self.recipients);
        put_u16(&mut b, S_ATTEMPTS, self.attempts);
        put_u64(&mut b, S_ARRIVAL, self.arrival_ms);
        put_u64(&mut b, S_NEXT_ATTEMPT, self.next_attempt_ms);
        put_u32(&mut b, S_RECORD_CRC, self.record_crc);
        b[S_FLAGS] = self.flags;
        b[S_GENERATION..S_GENERATION + 7]
            .copy_from_slice(&(self.generation & SLOT_GENERATION_MASK).to_le_bytes()[..7]);
        b[S_DONE] = self.done;
        b[S_HINT] = self.hint;
        let crc = crc32c::crc32c_append(prev_crc, &b[..S_DONE]);
        put_u32(&mut b, S_CRC, crc);
        (b, crc)
    }

    /// Decodes a slot without checking anything.
    pub(crate) fn decode(b: &[u8]) -> Slot {
        Slot {
            id: get_u64(b, S_ID),
            offset: get_u32(b, S_OFFSET),
            len: get_u32(b, S_LEN),
            env_len: get_u32(b, S_ENV_LEN),
            content_len: get_u32(b, S_CONTENT_LEN),
            recipients: get_u16(b, S_RECIPIENTS),
            attempts: get_u16(b, S_ATTEMPTS),
            arrival_ms: get_u64(b, S_ARRIVAL),
            next_attempt_ms: get_u64(b, S_NEXT_ATTEMPT),
            record_crc: get_u32(b, S_RECORD_CRC),
            flags: b[S_FLAGS],
            generation: {
                let mut g = [0u8; 8];
                g[..7].copy_from_slice(&b[S_GENERATION..S_GENERATION + 7]);
                u64::from_le_bytes(g)
            },
            done: b[S_DONE],
            hint: b[S_HINT],
        }
    }

    /// The CRC stored in slot bytes `b`.
    pub(crate) fn stored_crc(b: &[u8]) -> u32 {
        get_u32(b, S_CRC)
    }

    /// The CRC slot bytes `b` should carry if they continue a chain at `prev_crc`.
    pub(crate) fn expected_crc(b: &[u8], prev_crc: u32) -> u32 {
        crc32c::crc32c_append(prev_crc, &b[..S_DONE])
    }

    /// Checks the fields of a slot whose checksum is good against its segment's geometry and
    /// the end of the previous record (`expected_offset`).
    pub(crate) fn check_fields(&self, header: &Header, expected_offset: u32) -> Result<(), String> {
        if self.generation != header.generation & SLOT_GENERATION_MASK {
            return Err(format!(
                "slot of generation {}, segment is at {}",
                self.generation, header.generation
            ));
        }
        if self.id == 0 || self.id > COUNTER_MAX {
            return Err(format!("implausible message id {}", self.id));
        }
        if self.recipients == 0 {
            return Err("no recipients".into());
        }
        if self.offset != expected_offset {
            return Err(format!(
                "record offset {} does not follow the previous record (want {expected_offset})",
                self.offset
            ));
        }
        let want = record_len(
            usize::from(self.recipients),
            self.env_len as usize,
            self.content_len as usize,
        );
        if u64::from(self.len) != want {
            return Err(format!(
                "record length {} does not match its parts ({want})",
                self.len
            ));
        }
        if u64::from(self.offset) + u64::from(self.len) > header.segment_bytes {
            return Err("record extends past the end of the segment".into());
        }
        Ok(())
    }
}

/// Padded length of a record with `n` recipients, `env` envelope bytes and `content` bytes.
pub(crate) fn record_len(n: usize, env: usize, content: usize) -> u64 {
    pad8((RECORD_HEADER_BYTES + n + env) as u64 + content as u64)
}

/// Builds a record: header, initial status bytes, envelope, content, padding. Returns the
/// bytes and the record CRC (over header, envelope and content).
#[cfg(test)]
pub(crate) fn encode_record(
    id: u64,
    statuses: &[u8],
    envelope: &[u8],
    content: &[u8],
) -> (Vec<u8>, u32) {
    let mut b =
        Vec::with_capacity(record_len(statuses.len(), envelope.len(), content.len()) as usize);
    let crc = encode_record_into(&mut b, id, statuses, envelope, content);
    (b, crc)
}

/// Appends a record to `out` (so a batch is built in one buffer without copying the content
/// twice) and returns its CRC.
pub(crate) fn encode_record_into(
    out: &mut Vec<u8>,
    id: u64,
    statuses: &[u8],
    envelope: &[u8],
    content: &[u8],
) -> u32 {
    let start = out.len();
    let len = record_len(statuses.len(), envelope.len(), content.len()) as usize;
    let crc = encode_record_head(out, id, statuses, envelope, content);
    out.extend_from_slice(content);
    out.resize(start + len, 0);
    crc
}

/// Appends what comes before the content of a record (header, initial status bytes,
/// envelope) to `out` and returns the record's CRC: the content follows at once and then
/// the zero padding to [`record_len`], written by the caller (the writer writes a large
/// content from the producer's buffer instead of copying it into its own).
pub(crate) fn encode_record_head(
    out: &mut Vec<u8>,
    id: u64,
    statuses: &[u8],
    envelope: &[u8],
    content: &[u8],
) -> u32 {
    let start = out.len();
    out.extend_from_slice(&id.to_le_bytes());
    out.extend_from_slice(&(statuses.len() as u16).to_le_bytes());
    out.extend_from_slice(&[0, 0]);
    out.extend_from_slice(&(envelope.len() as u32).to_le_bytes());
    out.extend_from_slice(&(content.len() as u32).to_le_bytes());
    let crc = crc32c::crc32c(&out[start..]);
    out.extend_from_slice(statuses);
    out.extend_from_slice(envelope);
    crc32c::crc32c_append(crc32c::crc32c_append(crc, envelope), content)
}

/// A record checked against its slot, borrowing from the read buffer.
#[derive(Debug)]
pub(crate) struct RecordView<'a> {
    pub(crate) statuses: &'a [u8],
    pub(crate) envelope: &'a [u8],
    pub(crate) content: &'a [u8],
    /// Where `content` starts in the record.
    pub(crate) content_start: usize,
}

/// Checks record bytes `b` (exactly `slot.len` long) against their slot: id, lengths, CRC.
pub(crate) fn check_record<'a>(b: &'a [u8], slot: &Slot) -> Result<RecordView<'a>, String> {
    if b.len() as u64 != u64::from(slot.len) || b.len() < RECORD_HEADER_BYTES {
        return Err(format!(
            "record is {} bytes, slot says {}",
            b.len(),
            slot.len
        ));
    }
    let id = get_u64(b, 0);
    if id != slot.id {
        return Err(format!(
            "record holds message id {id}, slot says {}",
            slot.id
        ));
    }
    let n = usize::from(get_u16(b, 8));
    let env_len = get_u32(b, 12) as usize;
    let content_len = get_u32(b, 16) as usize;
    if n != usize::from(slot.recipients)
        || env_len != slot.env_len as usize
        || content_len != slot.content_len as usize
    {
        return Err("record lengths do not match the slot".into());
    }
    let env_start = RECORD_HEADER_BYTES + n;
    let content_start = env_start + env_len;
    let end = content_start + content_len;
    if end > b.len() {
        return Err("record parts overrun the record".into());
    }
    let crc = crc32c::crc32c(&b[..RECORD_HEADER_BYTES]);
    let crc = crc32c::crc32c_append(crc, &b[env_start..end]);
    if crc != slot.record_crc {
        return Err("record checksum mismatch".into());
    }
    Ok(RecordView {
        statuses: &b[RECORD_HEADER_BYTES..env_start],
        envelope: &b[env_start..content_start],
        content: &b[content_start..end],
        content_start,
    })
}

// Envelope encoding (inside the record):
//
//   8  arrival time (Unix ms)
//   2+ sender: u16 length, UTF-8 bytes
//   2  recipient count n
//   n × { 1 initial status, 2+ address, 1 has-error flag, [2+ last error] }

/// The status byte of a status.
pub(crate) fn status_code(s: RecipientStatus) -> u8 {
    match s {
        RecipientStatus::Pending => STATUS_PENDING,
        RecipientStatus::Delivered => STATUS_DELIVERED,
        RecipientStatus::Failed => STATUS_FAILED,
        RecipientStatus::Moved => STATUS_MOVED,
    }
}

/// The status of a status byte; `None` for a value no version of this code writes.
pub(crate) fn status_from_code(b: u8) -> Option<RecipientStatus> {
    Some(match b {
        STATUS_PENDING => RecipientStatus::Pending,
        STATUS_DELIVERED => RecipientStatus::Delivered,
        STATUS_FAILED => RecipientStatus::Failed,
        STATUS_MOVED => RecipientStatus::Moved,
        _ => return None,
    })
}

/// Encodes an envelope. The caller has checked the string lengths against the limits (all
/// below [`STRING_LIMIT`]) and the recipient count (below [`RECIPIENTS_LIMIT`]).
pub(crate) fn encode_envelope(e: &Envelope) -> Vec<u8> {
    let mut b = Vec::with_capacity(
        16 + e.sender.len()
            + e.recipients
                .iter()
                .map(|r| 6 + r.address.len())
                .sum::<usize>(),
    );
    b.extend_from_slice(&e.arrival_ms.to_le_bytes());
    put_str(&mut b, &e.sender);
    b.extend_from_slice(&(e.recipients.len() as u16).to_le_bytes());
    for r in &e.recipients {
        b.push(status_code(r.status));
        put_str(&mut b, &r.address);
        match &r.last_error {
            None => b.push(0),
            Some(err) => {
                b.push(1);
                put_str(&mut b, err);
            }
        }
    }
    b
}

/// Decodes an envelope; the statuses are the initial ones stored in it.
pub(crate) fn decode_envelope(b: &[u8]) -> Result<Envelope, String> {
    let mut r = Reader { b, at: 0 };
    let arrival_ms = r.u64()?;
    let sender = r.string()?;
    let n = usize::from(r.u16()?);
    let mut recipients = Vec::with_capacity(n.min(b.len()));
    for _ in 0..n {
        let status = status_from_code(r.u8()?).ok_or("bad recipient status in envelope")?;
        let address = r.string()?;
        let last_error = match r.u8()? {
            0 => None,
            1 => Some(r.string()?),
            _ => return Err("bad error flag in envelope".into()),
        };
        recipients.push(Recipient {
            address,
            status,
            last_error,
        });
    }
    if r.at != b.len() {
        return Err("trailing bytes after the envelope".into());
    }
    Ok(Envelope {
        sender,
        recipients,
        arrival_ms,
    })
}

fn put_str(b: &mut Vec<u8>, s: &str) {
    b.extend_from_slice(&(s.len() as u16).to_le_bytes());
    b.extend_from_slice(s.as_bytes());
}

struct Reader<'a> {
    b: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        let end = self
            .at
            .checked_add(n)
            .filter(|&e| e <= self.b.len())
            .ok_or("envelope truncated")?;
        let s = &self.b[self.at..end];
        self.at = end;
        Ok(s)
    }
    fn u8(&mut self) -> Result<u8, String> {
        Ok(self.take(1)?[0])
    }
    fn u16(&mut self) -> Result<u16, String> {
        Ok(get_u16(self.take(2)?, 0))
    }
    fn u64(&mut self) -> Result<u64, String> {
        Ok(get_u64(self.take(8)?, 0))
    }
    fn string(&mut self) -> Result<String, String> {
        let n = usize::from(self.u16()?);
        let bytes = self.take(n)?;
        String::from_utf8(bytes.to_vec()).map_err(|_| "envelope string is not UTF-8".to_string())
    }
}

fn put_u16(b: &mut [u8], at: usize, v: u16) {
    b[at..at + 2].copy_from_slice(&v.to_le_bytes());
}
fn put_u32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_le_bytes());
}
fn put_u64(b: &mut [u8], at: usize, v: u64) {
    b[at..at + 8].copy_from_slice(&v.to_le_bytes());
}
fn get_u16(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}
fn get_u32(b: &[u8], at: usize) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[at..at + 4]);
    u32::from_le_bytes(a)
}
fn get_u64(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(a)
}
