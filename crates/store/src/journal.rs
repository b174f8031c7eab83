//! The index journal: `index-<generation:08>.log`, a preallocated file of chained records.
//!
//! Layout: a 4096-byte header page (magic, version, store id, generation, CRC), then records
//! back to back from offset 4096: `len u32, crc u32, payload[len]`. The CRC of a record is
//! `crc32c_append(prev, len ‖ payload)` where `prev` is the previous record's CRC, or for the
//! first record a seed derived from the store id and generation (see "Chained checksums" in
//! docs/storage.md). A zero length, or a record that does not continue the chain, ends the
//! journal.
//!
//! One record is one transaction: a list of [`Op`]s applied together or not at all. The store
//! writes one record per commit and syncs it before writing the next, so at most the last
//! record can be torn; a broken record followed by a valid one is damage, not a torn tail.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use disk::{Disk, File};

use crate::StoreError;
use crate::delivered::DeliveredKey;
use crate::error::IoContext;
use crate::flags::KeywordSet;
use crate::format::{Dec, DecodeError, Enc, INDEX_FORMAT_VERSION, le_u32};

pub(crate) const JOURNAL_MAGIC: [u8; 8] = *b"MSTWSJNL";
pub(crate) const JOURNAL_HEADER_BYTES: u64 = 4096;
/// Bytes in front of each record's payload.
pub(crate) const RECORD_HEADER_BYTES: u64 = 8;
/// No record is longer than this (a sanity bound on an untrusted length).
pub(crate) const RECORD_PAYLOAD_MAX: u64 = 1 << 30;
/// The largest generation a log name or a snapshot may give: more checkpoints than a store
/// will ever make, and far from `u64::MAX`, so `generation + 1` (the next log) never overflows
/// whatever a damaged snapshot or a stray file name says (found by fuzzing, docs/fuzzing.md).
pub(crate) const GENERATION_MAX: u64 = 1 << 62;

/// One change to the index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Op {
    CreateFolder {
        folder: u32,
        uidvalidity: u32,
        user: String,
        name: String,
    },
    RenameFolder {
        folder: u32,
        name: String,
    },
    DeleteFolder {
        folder: u32,
    },
    /// The folder now belongs to `user` (a user rename: one record, one op per folder).
    ChangeUser {
        folder: u32,
        user: String,
    },
    /// Keyword tables are append-only: `index` is always the table's current length.
    DefineKeyword {
        folder: u32,
        index: u8,
        name: String,
    },
    Append(AppendOp),
    SetFlags {
        folder: u32,
        modseq: u64,
        op: u8,
        flags: u8,
        keywords: KeywordSet,
        uids: Vec<u32>,
    },
    Expunge {
        folder: u32,
        modseq: u64,
        uids: Vec<u32>,
    },
    /// Every UID below `uid`: one cheap record however many messages it removes.
    ExpungeBelow {
        folder: u32,
        modseq: u64,
        uid: u32,
    },
    /// Defrag switch: the message now lives at `start` (units).
    Move {
        folder: u32,
        uid: u32,
        start: u64,
    },
    /// Raises the folder's UIDNEXT (never lowers it): an import keeps the source's next UID,
    /// so a UID the source already gave out (to a message expunged there) is never reused.
    SetUidNext {
        folder: u32,
        modseq: u64,
        uidnext: u32,
    },
    /// Gives messages the MODSEQs they had in another store and sets the folder's
    /// HIGHESTMODSEQ to `highest`, which may be lower than now: the one change that does not
    /// ascend (S4's exception, docs/storage.md). Written only for a folder no client has
    /// seen here (a user moved from another node, before the switch).
    RestoreModseqs {
        folder: u32,
        highest: u64,
        /// (UID, MODSEQ) pairs.
        entries: Vec<(u32, u64)>,
    },
    /// Keys of handed-over copies stored (or settled by the user's rules), recorded at `at`
    /// (unix seconds): in the same record as their appends, so a copy and its key are durable
    /// together (index format 2; docs/storage.md, "Delivered keys"). No folder changes.
    Delivered {
        at: u64,
        keys: Vec<DeliveredKey>,
    },
}

impl Op {
    /// The folder the change is in (`None`: no folder's).
    pub(crate) fn folder(&self) -> Option<u32> {
        Some(match self {
            Op::CreateFolder { folder, .. }
            | Op::RenameFolder { folder, .. }
            | Op::DeleteFolder { folder }
            | Op::ChangeUser { folder, .. }
            | Op::DefineKeyword { folder, .. }
            | Op::SetFlags { folder, .. }
            | Op::Expunge { folder, .. }
            | Op::ExpungeBelow { folder, .. }
            | Op::Move { folder, .. }
            | Op::SetUidNext { folder, .. }
            | Op::RestoreModseqs { folder, .. } => *folder,
            Op::Append(a) => a.folder,
            Op::Delivered { .. } => return None,
        })
    }
}

/// An appended message's index entry, as journaled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct AppendOp {
    pub(crate) folder: u32,
    pub(crate) uid: u32,
    pub(crate) start: u64,
    pub(crate) summary_len: u32,
    pub(crate) content_len: u32,
    pub(crate) data_crc: u32,
    pub(crate) internal_date: i64,
    pub(crate) flags: u8,
    pub(crate) keywords: KeywordSet,
    pub(crate) modseq: u64,
}

fn uids(e: &mut Enc, uids: &[u32]) {
    e.u32(uids.len() as u32);
    for &u in uids {
        e.u32(u);
    }
}

fn get_uids(d: &mut Dec<'_>) -> Result<Vec<u32>, DecodeError> {
    let n = d.u32()? as usize;
    if n > d.remaining() / 4 {
        return Err(DecodeError::new("UID list longer than its record"));
    }
    (0..n).map(|_| d.u32()).collect()
}

/// Encodes a transaction as one record payload.
pub(crate) fn encode_ops(ops: &[Op]) -> Vec<u8> {
    let mut e = Enc::default();
    for op in ops {
        match op {
            Op::CreateFolder {
                folder,
                uidvalidity,
                user,
                name,
            } => {
                e.u8(1);
                e.u32(*folder);
                e.u32(*uidvalidity);
                e.str(user);
                e.str(name);
            }
            Op::RenameFolder { folder, name } => {
                e.u8(2);
                e.u32(*folder);
                e.str(name);
            }
            Op::DeleteFolder { folder } => {
                e.u8(3);
                e.u32(*folder);
            }
            Op::ChangeUser { folder, user } => {
                e.u8(11);
                e.u32(*folder);
                e.str(user);
            }
            Op::DefineKeyword {
                folder,
                index,
                name,
            } => {
                e.u8(4);
                e.u32(*folder);
                e.u8(*index);
                e.str(name);
            }
            Op::Append(a) => {
                e.u8(5);
                e.u32(a.folder);
                e.u32(a.uid);
                e.u64(a.start);
                e.u32(a.summary_len);
                e.u32(a.content_len);
                e.u32(a.data_crc);
                e.i64(a.internal_date);
                e.u8(a.flags);
                e.u64(a.keywords.0[0]);
                e.u64(a.keywords.0[1]);
                e.u64(a.modseq);
            }
            Op::SetFlags {
                folder,
                modseq,
                op,
                flags,
                keywords,
                uids: list,
            } => {
                e.u8(6);
                e.u32(*folder);
                e.u64(*modseq);
                e.u8(*op);
                e.u8(*flags);
                e.u64(keywords.0[0]);
                e.u64(keywords.0[1]);
                uids(&mut e, list);
            }
            Op::Expunge {
                folder,
                modseq,
                uids: list,
            } => {
                e.u8(7);
                e.u32(*folder);
                e.u64(*modseq);
                uids(&mut e, list);
            }
            Op::ExpungeBelow {
                folder,
                modseq,
                uid,
            } => {
                e.u8(8);
                e.u32(*folder);
                e.u64(*modseq);
                e.u32(*uid);
            }
            Op::Move { folder, uid, start } => {
                e.u8(9);
                e.u32(*folder);
                e.u32(*uid);
                e.u64(*start);
            }
            Op::SetUidNext {
                folder,
                modseq,
                uidnext,
            } => {
                e.u8(10);
                e.u32(*folder);
                e.u64(*modseq);
                e.u32(*uidnext);
            }
            Op::RestoreModseqs {
                folder,
                highest,
                entries,
            } => {
                e.u8(12);
                e.u32(*folder);
                e.u64(*highest);
                e.u32(entries.len() as u32);
                for &(uid, modseq) in entries {
                    e.u32(uid);
                    e.u64(modseq);
                }
            }
            Op::Delivered { at, keys } => {
                e.u8(13);
                e.u64(*at);
                e.u32(keys.len() as u32);
                for key in keys {
                    e.0.extend_from_slice(key);
                }
            }
        }
    }
    e.0
}

/// Decodes a record payload; any malformed byte is an error, never a panic.
pub(crate) fn decode_ops(payload: &[u8]) -> Result<Vec<Op>, DecodeError> {
    let mut d = Dec::new(payload);
    let mut ops = Vec::new();
    while !d.is_empty() {
        let op = match d.u8()? {
            1 => Op::CreateFolder {
                folder: d.u32()?,
                uidvalidity: d.u32()?,
                user: d.str()?,
                name: d.str()?,
            },
            2 => Op::RenameFolder {
                folder: d.u32()?,
                name: d.str()?,
            },
            3 => Op::DeleteFolder { folder: d.u32()? },
            11 => Op::ChangeUser {
                folder: d.u32()?,
                user: d.str()?,
            },
            4 => Op::DefineKeyword {
                folder: d.u32()?,
                index: d.u8()?,
                name: d.str()?,
            },
            5 => Op::Append(AppendOp {
                folder: d.u32()?,
                uid: d.u32()?,
                start: d.u64()?,
                summary_len: d.u32()?,
                content_len: d.u32()?,
                data_crc: d.u32()?,
                internal_date: d.i64()?,
                flags: d.u8()?,
                keywords: KeywordSet([d.u64()?, d.u64()?]),
                modseq: d.u64()?,
            }),
            6 => Op::SetFlags {
                folder: d.u32()?,
                modseq: d.u64()?,
                op: d.u8()?,
                flags: d.u8()?,
                keywords: KeywordSet([d.u64()?, d.u64()?]),
                uids: get_uids(&mut d)?,
            },
            7 => Op::Expunge {
                folder: d.u32()?,
                modseq: d.u64()?,
                uids: get_uids(&mut d)?,
            },
            8 => Op::ExpungeBelow {
                folder: d.u32()?,
                modseq: d.u64()?,
                uid: d.u32()?,
            },
            9 => Op::Move {
                folder: d.u32()?,
                uid: d.u32()?,
                start: d.u64()?,
            },
            10 => Op::SetUidNext {
                folder: d.u32()?,
                modseq: d.u64()?,
                uidnext: d.u32()?,
            },
            12 => {
                let folder = d.u32()?;
                let highest = d.u64()?;
                let n = d.u32()? as usize;
                if n > d.remaining() / 12 {
                    return Err(DecodeError::new("MODSEQ list longer than its record"));
                }
                let entries = (0..n)
                    .map(|_| Ok((d.u32()?, d.u64()?)))
                    .collect::<Result<Vec<_>, DecodeError>>()?;
                Op::RestoreModseqs {
                    folder,
                    highest,
                    entries,
                }
            }
            13 => {
                let at = d.u64()?;
                let n = d.u32()? as usize;
                if n > d.remaining() / 16 {
                    return Err(DecodeError::new("key list longer than its record"));
                }
                let keys = (0..n)
                    .map(|_| {
                        let mut key = [0u8; 16];
                        for byte in &mut key {
                            *byte = d.u8()?;
                        }
                        Ok(key)
                    })
                    .collect::<Result<Vec<_>, DecodeError>>()?;
                Op::Delivered { at, keys }
            }
            tag => return Err(DecodeError::new(format!("unknown operation tag {tag}"))),
        };
        ops.push(op);
    }
    Ok(ops)
}

/// The first link of a journal's chain, derived from the store and the generation, so a
/// record of another generation (or another store) never continues it.
pub(crate) fn chain_seed(store_id: u64, generation: u64) -> u32 {
    let mut b = Vec::with_capacity(24);
    b.extend_from_slice(b"mailstow");
    b.extend_from_slice(&store_id.to_le_bytes());
    b.extend_from_slice(&generation.to_le_bytes());
    crc32c::crc32c(&b)
}

/// The CRC of a record that follows a record with CRC `prev`.
pub(crate) fn record_crc(prev: u32, payload: &[u8]) -> u32 {
    let len = (payload.len() as u32).to_le_bytes();
    crc32c::crc32c_append(crc32c::crc32c_append(prev, &len), payload)
}

/// Builds the bytes of one record.
pub(crate) fn encode_record(prev: u32, payload: &[u8]) -> (Vec<u8>, u32) {
    let crc = record_crc(prev, payload);
    let mut out = Vec::with_capacity(payload.len() + 8);
    out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    out.extend_from_slice(&crc.to_le_bytes());
    out.extend_from_slice(payload);
    (out, crc)
}

pub(crate) fn encode_header(store_id: u64, generation: u64) -> Vec<u8> {
    let mut e = Enc::default();
    e.0.extend_from_slice(&JOURNAL_MAGIC);
    e.u32(INDEX_FORMAT_VERSION);
    e.u32(0);
    e.u64(store_id);
    e.u64(generation);
    e.0.resize(60, 0);
    let crc = crc32c::crc32c(&e.0);
    e.u32(crc);
    e.0.resize(JOURNAL_HEADER_BYTES as usize, 0);
    e.0
}

/// The index format a journal header says (bytes 8..12), once [`decode_header`] accepted it.
pub(crate) fn header_version(buf: &[u8]) -> u32 {
    buf.get(8..12).map_or(0, le_u32)
}

/// Checks a journal header; returns the generation it names.
pub(crate) fn decode_header(buf: &[u8], store_id: u64) -> Result<u64, DecodeError> {
    if buf.len() < 64 {
        return Err(DecodeError::new("journal header cut short"));
    }
    if buf[..8] != JOURNAL_MAGIC {
        return Err(DecodeError::new("journal header has a wrong magic number"));
    }
    if crc32c::crc32c(&buf[..60]) != le_u32(&buf[60..64]) {
        return Err(DecodeError::new("journal header checksum mismatch"));
    }
    let mut d = Dec::new(&buf[8..60]);
    let version = d.u32()?;
    let _ = d.u32()?;
    let id = d.u64()?;
    let generation = d.u64()?;
    if !(1..=INDEX_FORMAT_VERSION).contains(&version) {
        return Err(DecodeError::new(format!(
            "journal format version {version} not supported"
        )));
    }
    if id != store_id {
        return Err(DecodeError::new(
            "journal belongs to another store (store id mismatch)",
        ));
    }
    Ok(generation)
}

/// How a scan of a journal's records ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ScanEnd {
    /// A zero length or the end of the file: nothing after the last record.
    Clean,
    /// The record at `offset` does not continue the chain and nothing valid follows it: an
    /// interrupted write, never acknowledged.
    Torn { offset: u64, reason: String },
    /// The record at `offset` is broken but the one after it continues the chain: damage.
    Damaged { offset: u64, reason: String },
}

/// The result of scanning a journal image.
#[derive(Debug, Clone)]
pub(crate) struct Scan {
    pub(crate) records: u64,
    /// Offset just past the last valid record: where the next record goes.
    pub(crate) end: u64,
    pub(crate) last_crc: u32,
    pub(crate) stop: ScanEnd,
}

/// Walks the records of a journal image (header already checked), calling `each` with every
/// valid payload in order. `each` failing stops the scan with its error.
pub(crate) fn scan(
    image: &[u8],
    seed: u32,
    mut each: impl FnMut(u64, &[u8]) -> Result<(), StoreError>,
) -> Result<Scan, StoreError> {
    let mut pos = JOURNAL_HEADER_BYTES;
    let mut prev = seed;
    let mut records = 0;
    let stop = loop {
        match check_record(image, pos, prev) {
            Ok(None) => break ScanEnd::Clean,
            Ok(Some((len, crc))) => {
                let start = (pos + RECORD_HEADER_BYTES) as usize;
                each(pos, &image[start..start + len as usize])?;
                records += 1;
                prev = crc;
                pos += RECORD_HEADER_BYTES + len;
            }
            Err(reason) => {
                // Is there a valid record right after the broken one (its stored length and
                // CRC taken at face value)? Then this is not a torn tail but damage.
                let followed = stored_len_crc(image, pos).is_some_and(|(len, crc)| {
                    len > 0
                        && matches!(
                            check_record(image, pos + RECORD_HEADER_BYTES + len, crc),
                            Ok(Some(_))
                        )
                });
                break if followed {
                    ScanEnd::Damaged {
                        offset: pos,
                        reason,
                    }
                } else {
                    ScanEnd::Torn {
                        offset: pos,
                        reason,
                    }
                };
            }
        }
    };
    Ok(Scan {
        records,
        end: pos,
        last_crc: prev,
        stop,
    })
}

fn stored_len_crc(image: &[u8], pos: u64) -> Option<(u64, u32)> {
    let p = usize::try_from(pos).ok()?;
    if p.checked_add(8)? > image.len() {
        return None;
    }
    Some((le_u32(&image[p..]) as u64, le_u32(&image[p + 4..])))
}

/// `Ok(None)`: end of records; `Ok(Some((len, crc)))`: a valid record; `Err`: broken.
fn check_record(image: &[u8], pos: u64, prev: u32) -> Result<Option<(u64, u32)>, String> {
    let Some((len, crc)) = stored_len_crc(image, pos) else {
        return Ok(None);
    };
    if len == 0 {
        return if crc == 0 {
            Ok(None)
        } else {
            Err("zero length with a checksum".into())
        };
    }
    if len > RECORD_PAYLOAD_MAX || pos + RECORD_HEADER_BYTES + len > image.len() as u64 {
        return Err(format!("length {len} runs past the end of the journal"));
    }
    let start = (pos + RECORD_HEADER_BYTES) as usize;
    let payload = &image[start..start + len as usize];
    if record_crc(prev, payload) != crc {
        return Err("checksum does not continue the chain".into());
    }
    Ok(Some((len, crc)))
}

pub(crate) fn log_name(generation: u64) -> String {
    format!("index-{generation:08}.log")
}

/// Parses `index-<generation>.log`.
pub(crate) fn parse_log_name(name: &str) -> Option<u64> {
    let digits = name.strip_prefix("index-")?.strip_suffix(".log")?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok().filter(|&g| g <= GENERATION_MAX)
}

/// The open journal the writer appends to.
pub(crate) struct Journal {
    pub(crate) file: Arc<dyn File>,
    pub(crate) path: PathBuf,
    pub(crate) generation: u64,
    /// Where the next record goes.
    pub(crate) tail: u64,
    pub(crate) last_crc: u32,
    /// The file's allocated length.
    pub(crate) len: u64,
    pub(crate) records: u64,
    /// The index format its header says: a log of format 1 never gets a `Delivered` op.
    pub(crate) version: u32,
}

impl Journal {
    /// Preallocated size of a new journal: the checkpoint threshold plus room for the record
    /// that crosses it.
    pub(crate) fn prealloc_bytes(checkpoint_bytes: u64) -> u64 {
        (JOURNAL_HEADER_BYTES + checkpoint_bytes + (256 << 10)).next_multiple_of(4096)
    }

    /// Creates (or re-creates) `index-<generation>.log`: header, preallocation, sync, directory
    /// sync. A failure leaves no new file behind (a full disk must not fill up further with
    /// journals that were never used).
    pub(crate) fn create(
        disk: &dyn Disk,
        dir: &Path,
        store_id: u64,
        generation: u64,
        prealloc: u64,
    ) -> Result<Journal, StoreError> {
        let path = dir.join(log_name(generation));
        let what = || format!("creating {}", path.display());
        let existed = disk.exists(&path);
        let file = disk.open(&path, true).ctx(what)?;
        let made = file
            .set_len(0)
            .and_then(|()| file.allocate(prealloc))
            .and_then(|()| file.write_all_at(&encode_header(store_id, generation), 0))
            .and_then(|()| file.sync_data())
            .and_then(|()| disk.sync_dir(dir));
        if let Err(e) = made {
            if !existed {
                let _ = disk.remove(&path);
            }
            return Err(StoreError::io(what(), e));
        }
        Ok(Journal {
            file,
            path,
            generation,
            tail: JOURNAL_HEADER_BYTES,
            last_crc: chain_seed(store_id, generation),
            len: prealloc,
            records: 0,
            version: INDEX_FORMAT_VERSION,
        })
    }

    /// [`Journal::create`] with `prealloc`, or on a full file system with the least room a
    /// journal starts with ([`Journal::prealloc_bytes`] of 0: its header and the slack),
    /// which is what opening a store needs free at most (docs/storage.md, "A full disk").
    pub(crate) fn create_fitting(
        disk: &dyn Disk,
        dir: &Path,
        store_id: u64,
        generation: u64,
        prealloc: u64,
    ) -> Result<Journal, StoreError> {
        match Journal::create(disk, dir, store_id, generation, prealloc) {
            Err(e) if e.is_out_of_space() && prealloc > Journal::prealloc_bytes(0) => {
                Journal::create(disk, dir, store_id, generation, Journal::prealloc_bytes(0))
            }
            other => other,
        }
    }

    /// Bytes of records written so far.
    pub(crate) fn used(&self) -> u64 {
        self.tail - JOURNAL_HEADER_BYTES
    }

    /// Makes room past the tail for a record of `payload_len` bytes, growing the file if it
    /// must (rare: a record bigger than the slack, or a checkpoint put off by a full disk).
    /// A failure writes nothing: the journal goes on as it was.
    pub(crate) fn make_room(&mut self, payload_len: usize) -> Result<(), StoreError> {
        let end = self.tail + RECORD_HEADER_BYTES + payload_len as u64;
        if end <= self.len {
            return Ok(());
        }
        let what = || format!("growing {}", self.path.display());
        let roomy = (end + (1 << 20)).next_multiple_of(4096);
        let new_len = match self.file.allocate(roomy) {
            Err(e) if disk::is_out_of_space(&e) => {
                let exact = end.next_multiple_of(4096);
                self.file.allocate(exact).ctx(what)?;
                exact
            }
            other => {
                other.ctx(what)?;
                roomy
            }
        };
        // The new length becomes durable with the record's fdatasync.
        self.len = new_len;
        Ok(())
    }

    /// Appends one record and syncs it. Returns the bytes written. On error the file's tail is
    /// unknown; the caller must stop writing (the store fails until reopened), unless the
    /// error came from [`Journal::make_room`], which writes nothing.
    pub(crate) fn append(&mut self, payload: &[u8]) -> Result<u64, StoreError> {
        self.make_room(payload.len())?;
        let (bytes, crc) = encode_record(self.last_crc, payload);
        let end = self.tail + bytes.len() as u64;
        assert!(end <= self.len, "make_room gave the record its room");
        let what = || format!("writing {}", self.path.display());
        self.file.write_all_at(&bytes, self.tail).ctx(what)?;
        self.file.sync_data().ctx(what)?;
        self.tail = end;
        self.last_crc = crc;
        self.records += 1;
        Ok(bytes.len() as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample_ops() -> Vec<Op> {
        vec![
            Op::CreateFolder {
                folder: 3,
                uidvalidity: 99,
                user: "u".into(),
                name: "INBOX".into(),
            },
            Op::RenameFolder {
                folder: 3,
                name: "X/Y".into(),
            },
            Op::ChangeUser {
                folder: 3,
                user: "v".into(),
            },
            Op::DefineKeyword {
                folder: 3,
                index: 0,
                name: "$Junk".into(),
            },
            Op::Append(AppendOp {
                folder: 3,
                uid: 1,
                start: 8,
                summary_len: 20,
                content_len: 3000,
                data_crc: 0xdead_beef,
                internal_date: -5,
                flags: 3,
                keywords: KeywordSet([1, 1 << 63]),
                modseq: 2,
            }),
            Op::SetFlags {
                folder: 3,
                modseq: 3,
                op: 1,
                flags: 8,
                keywords: KeywordSet([0, 0]),
                uids: vec![1, 2, 3],
            },
            Op::Expunge {
                folder: 3,
                modseq: 4,
                uids: vec![1],
            },
            Op::ExpungeBelow {
                folder: 3,
                modseq: 5,
                uid: u32::MAX,
            },
            Op::Move {
                folder: 3,
                uid: 9,
                start: 1 << 40,
            },
            Op::SetUidNext {
                folder: 3,
                modseq: 6,
                uidnext: 25_022,
            },
            Op::RestoreModseqs {
                folder: 3,
                highest: 40,
                entries: vec![(1, 40), (2, 3), (25_021, 17)],
            },
            Op::DeleteFolder { folder: 3 },
        ]
    }

    #[test]
    fn ops_round_trip() {
        let ops = sample_ops();
        assert_eq!(decode_ops(&encode_ops(&ops)).unwrap(), ops);
        assert_eq!(decode_ops(&[]).unwrap(), vec![]);
    }

    #[test]
    fn truncated_or_garbage_payloads_fail_cleanly() {
        let bytes = encode_ops(&sample_ops());
        for cut in 0..bytes.len() {
            // Every prefix either decodes (ends on an op boundary) or fails; never panics.
            let _ = decode_ops(&bytes[..cut]);
        }
        assert!(decode_ops(&[42]).is_err());
        assert!(decode_ops(&[7, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 255, 255, 255, 255]).is_err());
    }

    fn image(records: &[&[u8]], seed: u32) -> Vec<u8> {
        let mut img = encode_header(1, 1);
        let mut prev = seed;
        for r in records {
            let (bytes, crc) = encode_record(prev, r);
            img.extend_from_slice(&bytes);
            prev = crc;
        }
        img.resize(img.len() + 64, 0);
        img
    }

    fn payloads(img: &[u8], seed: u32) -> (Vec<Vec<u8>>, Scan) {
        let mut out = Vec::new();
        let scan = scan(img, seed, |_, p| {
            out.push(p.to_vec());
            Ok(())
        })
        .unwrap();
        (out, scan)
    }

    #[test]
    fn header_checks() {
        let h = encode_header(7, 12);
        assert_eq!(decode_header(&h, 7).unwrap(), 12);
        assert!(decode_header(&h, 8).is_err());
        let mut bad = h.clone();
        bad[20] ^= 1;
        assert!(decode_header(&bad, 7).is_err());
        assert!(decode_header(&h[..30], 7).is_err());
    }

    #[test]
    fn chain_scan_finds_all_records() {
        let seed = chain_seed(1, 1);
        let img = image(&[b"one", b"two", b"three"], seed);
        let (got, s) = payloads(&img, seed);
        assert_eq!(
            got,
            vec![b"one".to_vec(), b"two".to_vec(), b"three".to_vec()]
        );
        assert_eq!(s.stop, ScanEnd::Clean);
        assert_eq!(s.records, 3);
        assert_eq!(s.end, JOURNAL_HEADER_BYTES + 3 * 8 + 3 + 3 + 5);
    }

    #[test]
    fn wrong_seed_reads_nothing() {
        let img = image(&[b"one"], chain_seed(1, 1));
        let (got, s) = payloads(&img, chain_seed(1, 2));
        assert!(got.is_empty());
        assert!(matches!(s.stop, ScanEnd::Torn { .. }));
    }

    #[test]
    fn torn_tail_versus_damage_in_the_middle() {
        let seed = chain_seed(1, 1);
        let img = image(&[b"first", b"second", b"third"], seed);
        let second = JOURNAL_HEADER_BYTES as usize + 8 + 5;
        let third = second + 8 + 6;
        // Flip a payload byte of the last record: a torn tail.
        let mut t = img.clone();
        t[third + 9] ^= 1;
        let (got, s) = payloads(&t, seed);
        assert_eq!(got.len(), 2);
        assert!(matches!(s.stop, ScanEnd::Torn { offset, .. } if offset == third as u64));
        assert_eq!(s.end, third as u64);
        // Flip a payload byte of the middle record: the next record still chains: damage.
        let mut m = img.clone();
        m[second + 9] ^= 1;
        let (got, s) = payloads(&m, seed);
        assert_eq!(got.len(), 1);
        assert!(matches!(s.stop, ScanEnd::Damaged { offset, .. } if offset == second as u64));
        // A huge length is broken, not a panic.
        let mut h = img.clone();
        h[second..second + 4].copy_from_slice(&u32::MAX.to_le_bytes());
        let (got, s) = payloads(&h, seed);
        assert_eq!(got.len(), 1);
        assert!(matches!(s.stop, ScanEnd::Torn { .. }));
    }

    #[test]
    fn a_stale_survivor_of_an_older_chain_is_not_valid() {
        // Records k and k+1 written; k torn; k' written over k with the same length. The old
        // k+1 must not read as valid after k'.
        let seed = chain_seed(1, 1);
        let old = image(&[b"aaaa", b"kkkk", b"next"], seed);
        let new = image(&[b"aaaa", b"KKKK"], seed);
        let mut img = old.clone();
        let end_new = JOURNAL_HEADER_BYTES as usize + 2 * 12;
        img[..end_new].copy_from_slice(&new[..end_new]);
        let (got, _) = payloads(&img, seed);
        assert_eq!(got, vec![b"aaaa".to_vec(), b"KKKK".to_vec()]);
    }

    #[test]
    fn log_names() {
        assert_eq!(log_name(5), "index-00000005.log");
        assert_eq!(parse_log_name("index-00000005.log"), Some(5));
        assert_eq!(parse_log_name("index-.log"), None);
        assert_eq!(parse_log_name("index-12a.log"), None);
        assert_eq!(parse_log_name("volume.dat"), None);
    }
}
