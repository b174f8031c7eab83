//! The checkpoint of the whole index: `index.snap`.
//!
//! Layout: magic `MSTWSNAP`, then sections back to back, each `kind u8, len u32,
//! payload[len], crc u32` (CRC-32C of kind, len and payload):
//!
//! | kind | payload |
//! |---:|---|
//! | 1 header | version u32, store id u64, generation u64, next folder id u32, last UIDVALIDITY u32 |
//! | 2 folder | id, UIDVALIDITY, UIDNEXT u32; highest MODSEQ u64; user, name; keyword count u16 and keywords; message count u64 |
//! | 3 messages | folder id u32, count u32, then `count` 57-byte entries (UID, start, MODSEQ, date, keywords, lengths, CRC, flags) |
//! | 5 delivered keys (format 2) | count u32, then `count` entries of `at` u64 and a 16-byte key, oldest first |
//! | 4 end | folder count u32, message count u64 |
//!
//! Each section checks itself, so a damaged snapshot can be salvaged section by section
//! (`StoreConfig::salvage`); without salvage any damage refuses the open. The snapshot is
//! written to `index.snap.tmp`, synced, renamed over `index.snap` and the directory synced:
//! a torn write only ever leaves a torn tmp file, which open removes.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::RwLock;

use disk::Disk;

use crate::StoreError;
use crate::error::IoContext;
use crate::flags::KeywordSet;
use crate::format::{Dec, DecodeError, Enc, INDEX_FORMAT_VERSION, le_u32};
use crate::index::{Catalog, Entry, FOLDER_ID_MAX, Folder, MODSEQ_MAX};
use crate::journal::GENERATION_MAX;

pub(crate) const SNAP_MAGIC: [u8; 8] = *b"MSTWSNAP";
pub(crate) const SNAP_NAME: &str = "index.snap";
pub(crate) const SNAP_TMP_NAME: &str = "index.snap.tmp";
const ENTRIES_PER_SECTION: usize = 4096;
const FLUSH_BYTES: usize = 4 << 20;
const ENTRY_BYTES: usize = 57;
/// A delivered key's entry: `at` u64 and the key.
const DELIVERED_ENTRY_BYTES: usize = 24;

fn section(out: &mut Vec<u8>, kind: u8, payload: &[u8]) {
    let start = out.len();
    out.push(kind);
    out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    out.extend_from_slice(payload);
    let crc = crc32c::crc32c(&out[start..]);
    out.extend_from_slice(&crc.to_le_bytes());
}

fn encode_entry(e: &mut Enc, uid: u32, m: &Entry) {
    e.u32(uid);
    e.u64(m.start);
    e.u64(m.modseq);
    e.i64(m.internal_date);
    e.u64(m.keywords.0[0]);
    e.u64(m.keywords.0[1]);
    e.u32(m.content_len);
    e.u32(m.summary_len);
    e.u32(m.data_crc);
    e.u8(m.flags);
}

fn decode_entry(d: &mut Dec<'_>) -> Result<(u32, Entry), DecodeError> {
    let uid = d.u32()?;
    let e = Entry {
        start: d.u64()?,
        modseq: d.u64()?,
        internal_date: d.i64()?,
        keywords: KeywordSet([d.u64()?, d.u64()?]),
        content_len: d.u32()?,
        summary_len: d.u32()?,
        data_crc: d.u32()?,
        flags: d.u8()?,
    };
    Ok((uid, e))
}

/// Writes the snapshot of `catalog` for generation `generation` and makes it durable under its
/// final name. Returns the bytes written.
pub(crate) fn write(
    disk: &dyn Disk,
    dir: &Path,
    catalog: &RwLock<Catalog>,
    store_id: u64,
    generation: u64,
) -> Result<u64, StoreError> {
    let tmp = dir.join(SNAP_TMP_NAME);
    let what = || format!("writing {}", tmp.display());
    let file = disk.open(&tmp, true).ctx(what)?;
    file.set_len(0).ctx(what)?;
    let mut buf = Vec::with_capacity(FLUSH_BYTES + 1024);
    let mut written = 0u64;
    let mut flush = |buf: &mut Vec<u8>, force: bool| -> Result<(), StoreError> {
        if buf.len() >= FLUSH_BYTES || (force && !buf.is_empty()) {
            file.write_all_at(buf, written).ctx(what)?;
            written += buf.len() as u64;
            buf.clear();
        }
        Ok(())
    };
    buf.extend_from_slice(&SNAP_MAGIC);
    let cat = catalog.read().unwrap_or_else(|p| p.into_inner());
    let mut e = Enc::default();
    e.u32(INDEX_FORMAT_VERSION);
    e.u64(store_id);
    e.u64(generation);
    e.u32(cat.next_folder_id);
    e.u32(cat.last_uidvalidity);
    section(&mut buf, 1, &e.0);
    let mut ids: Vec<u32> = cat.folders.keys().copied().collect();
    ids.sort_unstable();
    let mut total_messages = 0u64;
    for id in &ids {
        let f = cat.folders[id].read();
        let mut e = Enc::default();
        e.u32(f.id);
        e.u32(f.uidvalidity);
        e.u32(f.uidnext);
        e.u64(f.highest_modseq);
        e.str(&f.user);
        e.str(&f.name);
        e.u16(f.keywords.len() as u16);
        for k in &f.keywords {
            e.str(k);
        }
        e.u64(f.messages.len() as u64);
        section(&mut buf, 2, &e.0);
        let mut it = f.messages.iter().peekable();
        while it.peek().is_some() {
            let mut e = Enc(Vec::with_capacity(8 + ENTRIES_PER_SECTION * ENTRY_BYTES));
            e.u32(f.id);
            e.u32(0);
            let mut n = 0u32;
            for (uid, m) in it.by_ref().take(ENTRIES_PER_SECTION) {
                encode_entry(&mut e, *uid, m);
                n += 1;
            }
            e.0[4..8].copy_from_slice(&n.to_le_bytes());
            section(&mut buf, 3, &e.0);
            total_messages += n as u64;
            flush(&mut buf, false)?;
        }
    }
    let mut keys = cat.delivered.entries().peekable();
    while keys.peek().is_some() {
        let mut e = Enc(Vec::with_capacity(
            4 + ENTRIES_PER_SECTION * DELIVERED_ENTRY_BYTES,
        ));
        e.u32(0);
        let mut n = 0u32;
        for (at, key) in keys.by_ref().take(ENTRIES_PER_SECTION) {
            e.u64(*at);
            e.0.extend_from_slice(key);
            n += 1;
        }
        e.0[..4].copy_from_slice(&n.to_le_bytes());
        section(&mut buf, 5, &e.0);
        flush(&mut buf, false)?;
    }
    drop(keys);
    let mut e = Enc::default();
    e.u32(ids.len() as u32);
    e.u64(total_messages);
    section(&mut buf, 4, &e.0);
    drop(cat);
    flush(&mut buf, true)?;
    file.sync_data().ctx(what)?;
    let path = dir.join(SNAP_NAME);
    disk.rename(&tmp, &path)
        .ctx(|| format!("renaming {} over {}", tmp.display(), path.display()))?;
    disk.sync_dir(dir)
        .ctx(|| format!("syncing {}", dir.display()))?;
    Ok(written)
}

/// A snapshot as read back.
#[derive(Debug, Default)]
pub(crate) struct Loaded {
    pub(crate) generation: u64,
    pub(crate) next_folder_id: u32,
    pub(crate) last_uidvalidity: u32,
    pub(crate) folders: Vec<Folder>,
    pub(crate) messages: u64,
    /// Delivered keys with their times, oldest first (format 2).
    pub(crate) delivered: Vec<(u64, [u8; 16])>,
    /// Damage skipped (salvage only).
    pub(crate) problems: Vec<String>,
}

/// Parses a snapshot image. Without `salvage` the first problem is an error; with it,
/// damaged sections are skipped and listed.
pub(crate) fn read(image: &[u8], store_id: u64, salvage: bool) -> Result<Loaded, StoreError> {
    let fail = |what: String| StoreError::corrupt(format!("{SNAP_NAME}: {what}"));
    if image.len() < 8 || image[..8] != SNAP_MAGIC {
        return Err(fail("not a snapshot (wrong magic number)".into()));
    }
    let mut out = Loaded::default();
    let mut folders: BTreeMap<u32, (Folder, u64)> = BTreeMap::new();
    let mut pos = 8usize;
    let mut header_seen = false;
    let mut end_seen = false;
    let problem = |out: &mut Loaded, what: String| -> Result<(), StoreError> {
        if salvage {
            {
                out.problems.push(format!("{SNAP_NAME}: {what}"));
                Ok(())
            }
        } else {
            Err(fail(what))
        }
    };
    while pos < image.len() && !end_seen {
        if image.len() - pos < 9 {
            problem(&mut out, format!("section at {pos} cut short"))?;
            break;
        }
        let kind = image[pos];
        let len = le_u32(&image[pos + 1..]) as usize;
        if len > image.len() - pos - 9 {
            problem(
                &mut out,
                format!("section at {pos} runs past the end; the rest is lost"),
            )?;
            break;
        }
        let payload = &image[pos + 5..pos + 5 + len];
        let stored = le_u32(&image[pos + 5 + len..]);
        let at = pos;
        pos += 9 + len;
        if crc32c::crc32c(&image[at..at + 5 + len]) != stored {
            problem(
                &mut out,
                format!("section at {at} (kind {kind}) is damaged (checksum)"),
            )?;
            continue;
        }
        let mut d = Dec::new(payload);
        let parsed: Result<(), DecodeError> = (|| {
            match kind {
                1 => {
                    let version = d.u32()?;
                    let id = d.u64()?;
                    let generation = d.u64()?;
                    let next_folder_id = d.u32()?;
                    let last_uidvalidity = d.u32()?;
                    if !(1..=INDEX_FORMAT_VERSION).contains(&version) || id != store_id {
                        return Err(DecodeError::new("header names another version or store"));
                    }
                    if next_folder_id > FOLDER_ID_MAX + 1 {
                        return Err(DecodeError::new("header names a folder id out of range"));
                    }
                    if generation > GENERATION_MAX {
                        return Err(DecodeError::new(format!(
                            "header names generation {generation}, past any real one"
                        )));
                    }
                    if !d.is_empty() {
                        return Err(DecodeError::new("section has trailing bytes"));
                    }
                    // Only a header that checks out counts: with salvage, a damaged one after
                    // a good one must not leave its values behind (found by fuzzing).
                    out.generation = generation;
                    out.next_folder_id = next_folder_id;
                    out.last_uidvalidity = last_uidvalidity;
                    header_seen = true;
                }
                2 => {
                    let id = d.u32()?;
                    let uidvalidity = d.u32()?;
                    let uidnext = d.u32()?;
                    let highest_modseq = d.u64()?;
                    let user = d.str()?;
                    let name = d.str()?;
                    let n = d.u16()? as usize;
                    if n > 128 {
                        return Err(DecodeError::new("more than 128 keywords"));
                    }
                    let keywords = (0..n).map(|_| d.str()).collect::<Result<Vec<_>, _>>()?;
                    let count = d.u64()?;
                    if id > FOLDER_ID_MAX || highest_modseq > MODSEQ_MAX {
                        return Err(DecodeError::new(format!(
                            "folder {id}: id or MODSEQ out of range"
                        )));
                    }
                    let mut f = Folder::new(id, &user, &name, uidvalidity);
                    f.uidnext = uidnext;
                    f.highest_modseq = highest_modseq;
                    f.keywords = keywords;
                    if folders.insert(id, (f, count)).is_some() {
                        return Err(DecodeError::new(format!("folder {id} appears twice")));
                    }
                }
                3 => {
                    let id = d.u32()?;
                    let n = d.u32()? as usize;
                    if n > d.remaining() / ENTRY_BYTES {
                        return Err(DecodeError::new("entry count beyond the section"));
                    }
                    let (f, _) = folders.get_mut(&id).ok_or_else(|| {
                        DecodeError::new(format!("messages of unknown folder {id}"))
                    })?;
                    for _ in 0..n {
                        let (uid, e) = decode_entry(&mut d)?;
                        let valid = uid < f.uidnext
                            && f.messages
                                .last_key_value()
                                .is_none_or(|(&last, _)| uid > last)
                            && crate::Flags::from_bits(e.flags).is_some()
                            && e.keywords.fits(f.keywords.len())
                            && e.modseq <= f.highest_modseq
                            && crate::index::extent_fits(e.start, e.units());
                        if !valid {
                            return Err(DecodeError::new(format!(
                                "folder {id} UID {uid} entry is inconsistent"
                            )));
                        }
                        f.insert(uid, e);
                    }
                }
                4 => {
                    let nf = d.u32()?;
                    let nm = d.u64()?;
                    let have: u64 = folders.values().map(|(f, _)| f.messages.len() as u64).sum();
                    if nf as usize != folders.len() || nm != have {
                        return Err(DecodeError::new(format!(
                            "end says {nf} folders and {nm} messages, found {} and {have}",
                            folders.len()
                        )));
                    }
                    end_seen = true;
                }
                5 => {
                    let n = d.u32()? as usize;
                    if n > d.remaining() / DELIVERED_ENTRY_BYTES {
                        return Err(DecodeError::new("key count beyond the section"));
                    }
                    for _ in 0..n {
                        let at = d.u64()?;
                        let mut key = [0u8; 16];
                        for byte in &mut key {
                            *byte = d.u8()?;
                        }
                        out.delivered.push((at, key));
                    }
                }
                k => return Err(DecodeError::new(format!("unknown section kind {k}"))),
            }
            if !d.is_empty() {
                return Err(DecodeError::new("section has trailing bytes"));
            }
            Ok(())
        })();
        if let Err(e) = parsed {
            problem(&mut out, format!("section at {at}: {}", e.0))?;
        }
    }
    if !header_seen {
        return Err(fail("no valid header section".into()));
    }
    if !end_seen {
        problem(&mut out, "no end section: the snapshot is cut short".into())?;
    }
    for (id, (f, count)) in folders {
        if f.messages.len() as u64 != count {
            problem(
                &mut out,
                format!(
                    "folder {id} lists {count} messages, {} found",
                    f.messages.len()
                ),
            )?;
        }
        out.messages += f.messages.len() as u64;
        out.folders.push(f);
    }
    Ok(out)
}
