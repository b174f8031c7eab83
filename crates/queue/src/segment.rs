//! Reading a segment file: its header, its slot chain, and the check of its last batch.
//!
//! Recovery and `check` (fsck) share this code so they cannot disagree about where a
//! segment's valid data ends. Nothing here writes.

use std::io;
use std::path::PathBuf;
use std::sync::Arc;

use disk::File;

use crate::format::{self, FLAG_BATCH_END, Header, Kind, SLOT_BYTES, Slot};

/// Slot area bytes read per `pread` while scanning (the doc asks for at least 64 KiB).
const SCAN_CHUNK: usize = 256 << 10;

/// One segment as the running queue tracks it.
pub(crate) struct SegmentInfo {
    pub(crate) path: PathBuf,
    pub(crate) file: Arc<dyn File>,
    pub(crate) header: Header,
    /// Valid slots whose done flag is not durably 1. The segment may be recycled only at 0 (Q5).
    pub(crate) live: usize,
    pub(crate) state: SegState,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SegState {
    /// The writer appends here (one per kind).
    Active,
    /// Full, or the writer moved on; only in-place marks are written.
    Sealed,
    /// Every slot done: waiting on the free list for reuse.
    Free,
}

/// One valid slot of a chain.
#[derive(Clone, Debug)]
pub(crate) struct ChainEntry {
    pub(crate) index: u32,
    pub(crate) slot: Slot,
    /// The CRC the next slot chains on (this slot's stored CRC).
    pub(crate) crc: u32,
    /// The raw done flag.
    pub(crate) done: u8,
}

/// What scanning a segment's slot area found.
#[derive(Debug, Default)]
pub(crate) struct Scan {
    /// The chain, in slot order, without the dropped incomplete batch.
    pub(crate) chain: Vec<ChainEntry>,
    /// Damaged slots the chain continues over: (index, raw done flag). Their messages are lost.
    pub(crate) damaged: Vec<(u32, u8)>,
    /// Slots dropped because their batch's last slot never made it to disk (never acknowledged).
    pub(crate) incomplete_dropped: usize,
    /// Slots whose checksum is good but whose fields are impossible (ends the chain).
    pub(crate) bad_fields: Option<(u32, String)>,
    /// Highest message id in any slot of the chain, dropped ones included: an id that was
    /// written once is never handed out again, acknowledged or not.
    pub(crate) max_id: u64,
}

impl Scan {
    /// Where the writer continues: (next slot index, next record offset, chain CRC).
    pub(crate) fn cursor(&self, header: &Header) -> (u32, u32, u32) {
        match self.chain.last() {
            Some(last) => (last.index + 1, last.slot.offset + last.slot.len, last.crc),
            None => (0, header.data_offset, format::chain_seed(header.generation)),
        }
    }

    /// Indexes into `chain` of the last batch: from after the previous batch end to the end.
    pub(crate) fn last_batch(&self) -> std::ops::Range<usize> {
        let n = self.chain.len();
        if n == 0 {
            return 0..0;
        }
        let start = self.chain[..n - 1]
            .iter()
            .rposition(|e| e.slot.flags & FLAG_BATCH_END != 0)
            .map_or(0, |i| i + 1);
        start..n
    }
}

/// Reads up to `buf.len()` bytes at `offset`, stopping early only at the end of the file.
pub(crate) fn read_upto(file: &dyn File, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    let mut done = 0;
    while done < buf.len() {
        let n = file.read_at(&mut buf[done..], offset + done as u64)?;
        if n == 0 {
            break;
        }
        done += n;
    }
    Ok(done)
}

/// Reads and checks the header of `file` named `(kind, seq)`. `Ok(Err(reason))` = unreadable.
pub(crate) fn load_header(
    file: &dyn File,
    kind: Kind,
    seq: u64,
) -> io::Result<Result<Header, String>> {
    let mut buf = [0u8; format::HEADER_USED];
    let n = read_upto(file, &mut buf, 0)?;
    if n < buf.len() {
        return Ok(Err(format!(
            "file is {n} bytes, shorter than a segment header"
        )));
    }
    Ok(Header::decode(&buf).and_then(|h| {
        if h.kind != kind || h.seq != seq {
            Err(format!(
                "header names {} but the file is named {}",
                format::segment_name(h.kind, h.seq),
                format::segment_name(kind, seq)
            ))
        } else {
            Ok(h)
        }
    }))
}

/// The format version of a segment whose header did not decode, if it is one a newer build
/// writes: the magic is ours and the version above [`format::VERSION`]. Only those two
/// fields are read, since a newer header may lay out (and checksum) the rest differently.
pub(crate) fn newer_format(file: &dyn File) -> io::Result<Option<u32>> {
    let mut buf = [0u8; 12];
    let n = read_upto(file, &mut buf, 0)?;
    Ok(format::newer_version(&buf[..n]))
}

/// Walks the slot chain from slot 0 (reading the slot area in large chunks) until the first
/// slot that does not continue it (Q2). A single damaged slot whose successor still chains on
/// it (bit rot, not a tear: a tear replaces whole sectors, so the successor of a stale slot
/// never chains) is recorded and skipped. Finally drops the slots after the last batch-end
/// flag: their batch's tail is missing, so it was never synced and never acknowledged.
pub(crate) fn scan_slots(file: &dyn File, header: &Header) -> io::Result<Scan> {
    let mut scan = Scan::default();
    let slot_count = header.slot_count as usize;
    let area = slot_count * SLOT_BYTES as usize;
    let mut buf = vec![0u8; SCAN_CHUNK.min(area)];
    let mut buf_start = 0usize; // slot-area offset of buf[0]
    let mut buf_len = 0usize;
    let mut prev = format::chain_seed(header.generation);
    let mut expected_offset = header.data_offset;
    let mut i = 0usize;
    // Returns the 64 bytes of slot `k`, or None past the end of the file or area.
    let mut fetch =
        |k: usize, buf_start: &mut usize, buf_len: &mut usize| -> io::Result<Option<[u8; 64]>> {
            if k >= slot_count {
                return Ok(None);
            }
            let at = k * SLOT_BYTES as usize;
            if at < *buf_start || at + SLOT_BYTES as usize > *buf_start + *buf_len {
                let want = buf.len().min(area - at);
                let n = read_upto(file, &mut buf[..want], format::HEADER_BYTES + at as u64)?;
                *buf_start = at;
                *buf_len = n;
                if n < SLOT_BYTES as usize {
                    return Ok(None);
                }
            }
            let rel = at - *buf_start;
            let mut s = [0u8; 64];
            s.copy_from_slice(&buf[rel..rel + 64]);
            Ok(Some(s))
        };
    while let Some(b) = fetch(i, &mut buf_start, &mut buf_len)? {
        let stored = Slot::stored_crc(&b);
        if Slot::expected_crc(&b, prev) == stored {
            let slot = Slot::decode(&b);
            if let Err(why) = slot.check_fields(header, expected_offset) {
                scan.bad_fields = Some((i as u32, why));
                break;
            }
            expected_offset = slot.offset + slot.len;
            scan.chain.push(ChainEntry {
                index: i as u32,
                slot,
                crc: stored,
                done: slot.done,
            });
            prev = stored;
            i += 1;
            continue;
        }
        // Damaged slot or the end of the chain: does the next slot chain on this one? Only a
        // slot of this generation counts: slots of older generations chain on each other, and
        // recovery zeroes every slot of the current generation past the end of the chain
        // (`recovery::clear_past_end`), so a current-generation successor that chains on a
        // failing slot means the slot was damaged in place (bit rot). A tear cannot do this:
        // a slot lies inside one sector, so it is either wholly as written (and then passes)
        // or wholly older content.
        let Some(next) = fetch(i + 1, &mut buf_start, &mut buf_len)? else {
            break;
        };
        let next_slot = Slot::decode(&next);
        if next_slot.generation != header.generation & format::SLOT_GENERATION_MASK
            || next_slot.offset < expected_offset
        {
            break;
        }
        let next_stored = Slot::stored_crc(&next);
        let recomputed = Slot::expected_crc(&b, prev);
        let resume = if Slot::expected_crc(&next, stored) == next_stored {
            stored
        } else if Slot::expected_crc(&next, recomputed) == next_stored {
            recomputed
        } else {
            break;
        };
        // The damaged slot's record ends where the next one starts.
        expected_offset = next_slot.offset;
        scan.damaged.push((i as u32, b[format::S_DONE]));
        prev = resume;
        i += 1;
    }
    scan.max_id = scan.chain.iter().map(|e| e.slot.id).max().unwrap_or(0);
    // Drop an incomplete final batch.
    let keep = scan
        .chain
        .iter()
        .rposition(|e| e.slot.flags & FLAG_BATCH_END != 0)
        .map_or(0, |p| p + 1);
    scan.incomplete_dropped = scan.chain.len() - keep;
    scan.chain.truncate(keep);
    let end = scan.chain.last().map_or(0, |e| e.index);
    scan.damaged.retain(|&(i, _)| i < end);
    // Q2: a chain ends with a batch-end flag (or is empty).
    debug_assert!(
        scan.chain
            .last()
            .is_none_or(|e| e.slot.flags & FLAG_BATCH_END != 0)
    );
    Ok(scan)
}

/// Whether status byte `now` can follow initial status `initial` (from the envelope): a
/// pending recipient may become delivered or moved; every other status is final.
pub(crate) fn status_legal(initial: u8, now: u8) -> bool {
    if initial == format::STATUS_PENDING {
        matches!(
            now,
            format::STATUS_PENDING | format::STATUS_DELIVERED | format::STATUS_MOVED
        )
    } else {
        now == initial
    }
}

/// Checks one record fully: slot match, CRC, envelope, and that every status byte is a legal
/// successor of the status the envelope started it with.
pub(crate) fn verify_record(bytes: &[u8], slot: &Slot) -> Result<(), String> {
    let view = format::check_record(bytes, slot)?;
    let env = format::decode_envelope(view.envelope)?;
    if env.recipients.len() != view.statuses.len() {
        return Err("envelope and record disagree on the recipient count".into());
    }
    for (r, &now) in env.recipients.iter().zip(view.statuses) {
        if !status_legal(format::status_code(r.status), now) {
            return Err(format!("status byte {now} cannot follow {:?}", r.status));
        }
    }
    Ok(())
}

/// The check of the last batch of the segment that was active last: reads its records with
/// one `pread` and returns the position in `scan.chain` of the first record that is not
/// intact, or `None`. The caller then drops the whole last batch (`scan.last_batch()`): a
/// torn record means the batch was never synced, so none of it was acknowledged, and cutting
/// at a batch boundary keeps "the chain ends with a batch-end flag" true for the next scan.
/// A batch with a done record is not checked: it was committed.
pub(crate) fn tail_check(file: &dyn File, scan: &Scan) -> io::Result<Option<(usize, String)>> {
    let range = scan.last_batch();
    let slots: Vec<(usize, Slot)> = range.clone().map(|p| (p, scan.chain[p].slot)).collect();
    // A done record means the batch was committed (done flags are written only after the
    // batch's sync): then a bad record is bit rot, reported when it is read, not a tear.
    if slots.iter().any(|(_, s)| s.done != 0) {
        return Ok(None);
    }
    let (Some(first), Some(last)) = (slots.first(), slots.last()) else {
        return Ok(None);
    };
    let start = u64::from(first.1.offset);
    let end = u64::from(last.1.offset) + u64::from(last.1.len);
    let mut buf = vec![0u8; (end - start) as usize];
    let n = read_upto(file, &mut buf, start)?;
    for &(pos, slot) in &slots {
        let a = (u64::from(slot.offset) - start) as usize;
        let b = a + slot.len as usize;
        if b > n {
            return Ok(Some((pos, "record lies past the end of the file".into())));
        }
        if let Err(why) = verify_record(&buf[a..b], &slot) {
            return Ok(Some((pos, why)));
        }
    }
    Ok(None)
}
