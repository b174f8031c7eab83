//! Readers: the checked read of a message record (which the `Mailstore` reads of
//! `mailstore.rs` use too), open_folder, page, read_range, read_folder, the user list, stats.
//!
//! A reader copies what it needs from the index under the folder's read lock, releases it,
//! and only then does I/O (docs/storage.md, "Readers and the writer"). Every message read is
//! checked against its header (folder id, UID, lengths) and CRC. If the check fails, the
//! reader looks at the index again: message gone → `NoSuchMessage` (it was expunged and its
//! extent reused under us); message moved → read it at its new place; still there, same
//! place → the data really is damaged → `Corrupt`. Folder ids and UIDs are never reused, so a
//! header naming our (folder, UID) is always our message.

use std::sync::Arc;

use crate::Flags;
use crate::StoreError;
use crate::commit::Store;
use crate::config::StoreConfig;
use crate::format::{MSG_HEADER_BYTES, MsgHeader, UNIT};
use crate::index::{Entry, FolderCell, count_fragments};
use crate::{FolderStats, FolderStatus, FolderView, MessageInfo, MessageSink, StoreStats};

/// How often a reader follows a message that defrag keeps moving before giving up.
const MOVED_RETRIES: usize = 16;

/// Checks a message's bytes (header + summary + content) against its index entry.
pub(crate) fn verify(
    buf: &[u8],
    folder: u32,
    uid: u32,
    e: &Entry,
    check_crc: bool,
) -> Result<(), String> {
    let h = MsgHeader::decode(buf).map_err(|d| d.0)?;
    if h.folder != folder || h.uid != uid {
        return Err(format!(
            "extent holds folder {} UID {}, not this message",
            h.folder, h.uid
        ));
    }
    if h.summary_len != e.summary_len || h.content_len != e.content_len || h.data_crc != e.data_crc
    {
        return Err("message header disagrees with the index".into());
    }
    if check_crc {
        let end = MSG_HEADER_BYTES + e.summary_len as usize + e.content_len as usize;
        if buf.len() < end {
            return Err("message cut short".into());
        }
        if crc32c::crc32c(&buf[MSG_HEADER_BYTES..end]) != e.data_crc {
            return Err("message data checksum mismatch".into());
        }
    }
    Ok(())
}

pub(crate) fn info_of(f: &crate::index::Folder, uid: u32, e: &Entry) -> MessageInfo {
    MessageInfo {
        uid,
        size: e.content_len as u64,
        flags: Flags::from_bits_truncate(e.flags),
        keywords: if e.keywords.0 == [0, 0] {
            Vec::new()
        } else {
            f.keyword_names(e.keywords)
        },
        modseq: e.modseq,
        internal_date: e.internal_date,
    }
}

pub(crate) fn status_of(f: &crate::index::Folder) -> FolderStatus {
    FolderStatus {
        messages: f.messages.len() as u64,
        bytes: f.bytes,
        uidvalidity: f.uidvalidity,
        uidnext: f.uidnext,
        highest_modseq: f.highest_modseq,
    }
}

impl Store {
    pub(crate) fn entry(&self, cell: &FolderCell, uid: u32) -> Result<Entry, StoreError> {
        let f = cell.read();
        if f.deleted {
            return Err(StoreError::NoSuchFolder {
                user: f.user.clone(),
                folder: f.name.clone(),
            });
        }
        f.messages
            .get(&uid)
            .copied()
            .ok_or_else(|| StoreError::NoSuchMessage {
                folder: f.name.clone(),
                uid,
            })
    }

    /// Reads `len` bytes at `offset` of a message's record (offset 0 = its header), with the
    /// check described in the module docs. Returns the entry the bytes belong to.
    pub(crate) fn read_checked(
        &self,
        cell: &FolderCell,
        uid: u32,
        offset: u64,
        len: u64,
        full: bool,
    ) -> Result<(Entry, Vec<u8>), StoreError> {
        for _ in 0..MOVED_RETRIES {
            let e = self.entry(cell, uid)?;
            let record = MSG_HEADER_BYTES as u64 + e.summary_len as u64 + e.content_len as u64;
            let (off, n) = if full {
                (0, record)
            } else {
                (offset, len.min(record.saturating_sub(offset)))
            };
            let mut buf = vec![0u8; if full { n as usize } else { MSG_HEADER_BYTES }];
            let base = e.start * UNIT;
            let mut outcome = self
                .volume
                .read_exact_at(&mut buf, base)
                .map_err(|io| io.to_string());
            let mut part = Vec::new();
            if outcome.is_ok() && !full {
                part = vec![0u8; n as usize];
                outcome = self
                    .volume
                    .read_exact_at(&mut part, base + off)
                    .map_err(|io| io.to_string());
            }
            let checked = outcome.and_then(|()| verify(&buf, cell.id, uid, &e, full));
            // Look again: an extent freed and reused under us, or a move, shows here.
            let now = self.entry(cell, uid);
            match (checked, now) {
                (_, Err(gone)) => return Err(gone),
                (_, Ok(n)) if n.start != e.start => continue,
                (Ok(()), Ok(_)) => return Ok((e, if full { buf } else { part })),
                (Err(reason), Ok(_)) => {
                    let f = cell.read();
                    return Err(StoreError::corrupt(format!(
                        "message {}/{} UID {uid} at unit {}: {reason}",
                        f.user, f.name, e.start
                    )));
                }
            }
        }
        Err(StoreError::corrupt(format!(
            "message UID {uid} kept moving while being read"
        )))
    }

    pub fn config(&self) -> &StoreConfig {
        &self.config
    }

    /// The folder's index entries, from memory only (S7).
    pub fn open_folder(&self, user: &str, folder: &str) -> Result<FolderView, StoreError> {
        let cell = self.folder(user, folder)?;
        let f = cell.read();
        // S7: only the in-memory index; no message byte is read.
        let messages = f
            .messages
            .iter()
            .map(|(&uid, e)| info_of(&f, uid, e))
            .collect();
        Ok(FolderView {
            status: status_of(&f),
            messages,
        })
    }

    /// Bytes the summary cache holds now.
    pub fn summary_cache_bytes(&self) -> usize {
        self.summaries.bytes()
    }

    /// Newest first, at most `count` messages with a UID below `before` (all when `None`),
    /// with the folder's status and unseen count: a page of a message list, from the index
    /// only (S7), its cost independent of where in the folder the page is.
    pub fn page(
        &self,
        user: &str,
        folder: &str,
        before: Option<u32>,
        count: usize,
    ) -> Result<crate::Page, StoreError> {
        let cell = self.folder(user, folder)?;
        let f = cell.read();
        // S7, and O(count + log n) however large the folder: a range of the UID tree.
        let messages = f
            .messages
            .range(..before.unwrap_or(u32::MAX))
            .rev()
            .take(count)
            .map(|(&uid, e)| info_of(&f, uid, e))
            .collect();
        // Kept by the index as messages come, go and change: no scan of the folder.
        debug_assert_eq!(
            f.unseen,
            f.messages.values().filter(|e| !e.seen()).count() as u64,
            "the unseen count"
        );
        Ok(crate::Page {
            status: status_of(&f),
            unseen: f.unseen,
            messages,
        })
    }

    /// `len` bytes of a message's content from `offset` (cut at the end of the message).
    ///
    /// Small messages are read whole and CRC-checked; larger ones (over
    /// `read_chunk_bytes_max`) are checked by header only, as the CRC covers all the bytes.
    pub fn read_range(
        &self,
        user: &str,
        folder: &str,
        uid: u32,
        offset: u64,
        len: u64,
    ) -> Result<Vec<u8>, StoreError> {
        let cell = self.folder(user, folder)?;
        let e = self.entry(&cell, uid)?;
        let size = e.content_len as u64;
        let offset = offset.min(size);
        let len = len.min(size - offset);
        let record = MSG_HEADER_BYTES as u64 + e.summary_len as u64 + size;
        if record <= self.config.read_chunk_bytes_max as u64 {
            let (e, buf) = self.read_checked(&cell, uid, 0, 0, true)?;
            let from = MSG_HEADER_BYTES + e.summary_len as usize + offset as usize;
            return Ok(buf[from..from + len as usize].to_vec());
        }
        let skip = MSG_HEADER_BYTES as u64 + e.summary_len as u64 + offset;
        let (_, part) = self.read_checked(&cell, uid, skip, len, false)?;
        Ok(part)
    }

    /// Streams every message of a folder in UID order, reading runs of adjacent messages with
    /// one read each (at most `read_chunk_bytes_max`).
    pub fn read_folder(
        &self,
        user: &str,
        folder: &str,
        each: &mut MessageSink<'_>,
    ) -> Result<(), StoreError> {
        let cell = self.folder(user, folder)?;
        let entries: Vec<(u32, Entry)> =
            cell.read().messages.iter().map(|(&u, e)| (u, *e)).collect();
        let chunk_max = self.config.read_chunk_bytes_max as u64;
        let mut k = 0;
        while k < entries.len() {
            // A run: adjacent in UID order and on disk, up to one chunk.
            let start = entries[k].1.start;
            let mut end = entries[k].1.end();
            let mut j = k + 1;
            while j < entries.len()
                && entries[j].1.start == end
                && (entries[j].1.end() - start) * UNIT <= chunk_max
            {
                end = entries[j].1.end();
                j += 1;
            }
            let last = &entries[j - 1].1;
            let bytes = (last.start - start) * UNIT
                + MSG_HEADER_BYTES as u64
                + last.summary_len as u64
                + last.content_len as u64;
            let mut buf = vec![0u8; bytes as usize];
            let read_ok = self.volume.read_exact_at(&mut buf, start * UNIT).is_ok();
            for (uid, e) in &entries[k..j] {
                let off = ((e.start - start) * UNIT) as usize;
                let rec_end =
                    off + MSG_HEADER_BYTES + e.summary_len as usize + e.content_len as usize;
                if read_ok && verify(&buf[off..rec_end], cell.id, *uid, e, true).is_ok() {
                    let c = off + MSG_HEADER_BYTES + e.summary_len as usize;
                    each(*uid, &buf[c..rec_end])?;
                    continue;
                }
                // Moved, expunged or damaged since we copied the entries: decide one by one.
                match self.read_checked(&cell, *uid, 0, 0, true) {
                    Ok((e, b)) => each(*uid, &b[MSG_HEADER_BYTES + e.summary_len as usize..])?,
                    Err(StoreError::NoSuchMessage { .. }) => {}
                    Err(other) => return Err(other),
                }
            }
            k = j;
        }
        Ok(())
    }

    /// Every user with at least one folder, sorted.
    pub fn list_users(&self) -> Vec<String> {
        self.catalog().users.keys().cloned().collect()
    }

    /// The I/O counters, lock-free.
    pub fn io_counters(&self) -> crate::IoCounters {
        let c = &self.counters;
        let get = |a: &std::sync::atomic::AtomicU64| a.load(std::sync::atomic::Ordering::Relaxed);
        crate::IoCounters {
            data_syncs: get(&c.data_syncs),
            journal_syncs: get(&c.journal_syncs),
            data_bytes_written: get(&c.data_bytes),
            journal_bytes_written: get(&c.journal_bytes),
            batches: get(&c.batches),
            messages_appended: get(&c.appended),
            checkpoints: get(&c.checkpoints),
            defrag_messages_moved: get(&c.defrag_messages),
            defrag_bytes_moved: get(&c.defrag_bytes),
        }
    }

    /// Every folder's counters (fragments included: one pass over each folder's messages)
    /// and the volume's space, under the writer lock. For the I/O counters alone, cheaply,
    /// use [`Store::io_counters`].
    pub fn stats(&self) -> StoreStats {
        let cells: Vec<Arc<FolderCell>> = {
            let cat = self.catalog();
            let mut v: Vec<_> = cat.folders.values().cloned().collect();
            v.sort_by_key(|c| c.id);
            v
        };
        let mut folders: Vec<FolderStats> = cells
            .iter()
            .map(|c| {
                let f = c.read();
                FolderStats {
                    user: f.user.clone(),
                    folder: f.name.clone(),
                    messages: f.messages.len() as u64,
                    bytes: f.bytes,
                    fragments: count_fragments(&f.messages),
                }
            })
            .collect();
        folders.sort_by(|a, b| (&a.user, &a.folder).cmp(&(&b.user, &b.folder)));
        let io = self.io_counters();
        let w = crate::commit::lock(&self.writer);
        StoreStats {
            folders,
            volume_bytes: w.alloc.end() * UNIT,
            used_bytes: w.alloc.used_units() * UNIT,
            free_bytes: w.alloc.free_units() * UNIT,
            free_extents: w.alloc.free_extent_count() as u64,
            reserved_bytes: w.alloc.reserved_units() * UNIT,
            data_syncs: io.data_syncs,
            journal_syncs: io.journal_syncs,
            data_bytes_written: io.data_bytes_written,
            journal_bytes_written: io.journal_bytes_written,
            batches: io.batches,
            messages_appended: io.messages_appended,
            checkpoints: io.checkpoints,
            defrag_messages_moved: io.defrag_messages_moved,
            defrag_bytes_moved: io.defrag_bytes_moved,
            journal_gen: w.journal.generation,
            journal_bytes: w.journal.used(),
        }
    }
}
