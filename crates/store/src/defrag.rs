//! Defragmentation: the thesis's two-fragments rule, after an expunge and store-wide.
//!
//! After an expunge commits, for each freed extent (in UID order): let R be the free run
//! containing it; let F1, F2, … be the folder's fragments after the freed UID. If R holds
//! F1 and F2 (at least two) within the move budget, move as many leading fragments as fit, in
//! order, to the start of R; else do nothing. The old place of the last moved fragment is
//! then a freed run too, and gets the same rule (a cascade, bounded by the same budget). A
//! move (one *round*):
//!
//! 1. takes the destination out of free space,
//! 2. reads each fragment in chunks, checks every message (never spreads damage), writes it
//!    to its new place,
//! 3. syncs the volume,
//! 4. commits one journal record of `Move` ops (the switch),
//! 5. frees the old extents (in `Store::commit`, so only after the switch is durable, S6).
//!
//! A failure before 4 gives the destination back; the index still names the old place, and
//! the copy is just free space. The writer lock is held for the round, so appends wait, but
//! readers never do: they find a moved message at its new place (see `read.rs`).
//!
//! Store-wide defrag first relocates every fragmented folder of at most 64 MiB whole into the
//! smallest free run that holds it (one round: one fragment), then applies the rule at every
//! fragment boundary: R is the free run that starts exactly where fragment Fi ends, and
//! F(i+1), F(i+2), … move to it.

use std::sync::Arc;

use crate::DefragReport;
use crate::StoreError;
use crate::commit::{Store, Writer, bump};
use crate::error::IoContext;
use crate::format::{MSG_HEADER_BYTES, UNIT};
use crate::index::{FolderCell, Fragment, Freed, count_fragments, fragments_from};
use crate::journal::Op;
use crate::read::verify;

/// The largest folder `mailstow store defrag` relocates whole, in one copy-sync-switch round
/// (the writer lock is held for the round, so this bounds how long appends wait).
const RELOCATE_BYTES_MAX: u64 = 64 << 20;

/// How many leading fragments fit in `room` units (and `budget` units); 0 unless at least two.
fn fitting(frags: &[Fragment], room: u64, budget: u64) -> (usize, u64) {
    let mut sum = 0;
    let mut k = 0;
    for f in frags {
        if sum + f.units > room || sum + f.units > budget {
            break;
        }
        sum += f.units;
        k += 1;
    }
    if k >= 2 { (k, sum) } else { (0, 0) }
}

impl Store {
    /// The rule after an expunge. Returns (messages moved, bytes moved).
    pub(crate) fn defrag_after_expunge(
        &self,
        w: &mut Writer,
        cell: &Arc<FolderCell>,
        freed: &[Freed],
    ) -> Result<(u64, u64), StoreError> {
        let mut budget = self.config.defrag_move_bytes_max / UNIT;
        let mut moved = (0, 0);
        let mut freed = freed.to_vec();
        freed.sort_unstable_by_key(|f| f.uid);
        let mut work: std::collections::VecDeque<Freed> = freed.into();
        while let Some(fr) = work.pop_front() {
            if budget < 2 {
                break;
            }
            let Some((rs, rl)) = w.alloc.free_run_containing(fr.start) else {
                continue;
            };
            let frags = {
                let f = cell.read();
                if f.deleted {
                    return Ok(moved);
                }
                fragments_from(&f.messages, fr.uid, rl.min(budget))
            };
            let (k, units) = fitting(&frags, rl, budget);
            if k == 0 {
                continue;
            }
            let (m, b) = self.move_fragments(w, cell, &frags[..k], rs)?;
            budget -= units;
            moved.0 += m;
            moved.1 += b;
            // The move freed the old places of F1..Fk; the last one, merged with the holes
            // around it, is a freed run like any other, with F(k+1), F(k+2) behind it. Applying
            // the rule there too lets one deletion pull a whole region of small fragments
            // together, within the same budget.
            if m > 0
                && let Some(&(uid, _)) = frags[k - 1].messages.last()
            {
                work.push_back(Freed {
                    uid,
                    start: frags[k - 1].start,
                    units: frags[k - 1].units,
                });
            }
        }
        Ok(moved)
    }

    /// One round: copy `frags` back to back from `dest`, sync, switch, release.
    pub(crate) fn move_fragments(
        &self,
        w: &mut Writer,
        cell: &Arc<FolderCell>,
        frags: &[Fragment],
        dest: u64,
    ) -> Result<(u64, u64), StoreError> {
        let total: u64 = frags.iter().map(|f| f.units).sum();
        if !w.alloc.take(dest, total) {
            return Ok((0, 0));
        }
        match self.copy_fragments(cell, frags, dest) {
            Ok(ops) => {
                let messages = ops.len() as u64;
                // The switch; `commit` frees the old extents once it is durable.
                self.commit(w, &ops)?;
                bump(&self.counters.defrag_messages, messages);
                bump(&self.counters.defrag_bytes, total * UNIT);
                Ok((messages, total * UNIT))
            }
            Err(e) => {
                w.alloc.free(dest, total);
                Err(e)
            }
        }
    }

    fn copy_fragments(
        &self,
        cell: &FolderCell,
        frags: &[Fragment],
        dest: u64,
    ) -> Result<Vec<Op>, StoreError> {
        let chunk_units = (self.config.read_chunk_bytes_max as u64 / UNIT).max(1);
        let mut ops = Vec::new();
        let mut at = dest;
        for frag in frags {
            let mut k = 0;
            while k < frag.messages.len() {
                // A chunk of whole messages (a bigger single message goes alone).
                let first = frag.messages[k].1.start;
                let mut j = k + 1;
                while j < frag.messages.len() && frag.messages[j].1.end() - first <= chunk_units {
                    j += 1;
                }
                let end = frag.messages[j - 1].1.end();
                let mut buf = vec![0u8; ((end - first) * UNIT) as usize];
                self.volume
                    .read_exact_at(&mut buf, first * UNIT)
                    .ctx(|| "defrag: reading volume.dat".into())?;
                for (uid, e) in &frag.messages[k..j] {
                    let off = ((e.start - first) * UNIT) as usize;
                    let rec = MSG_HEADER_BYTES + e.summary_len as usize + e.content_len as usize;
                    verify(&buf[off..off + rec], cell.id, *uid, e, true).map_err(|reason| {
                        StoreError::corrupt(format!(
                            "defrag: UID {uid} at unit {}: {reason}; not moved",
                            e.start
                        ))
                    })?;
                    ops.push(Op::Move {
                        folder: cell.id,
                        uid: *uid,
                        start: at + (e.start - frag.start),
                    });
                }
                let to = at + (first - frag.start);
                self.volume
                    .write_all_at(&buf, to * UNIT)
                    .ctx(|| "defrag: writing volume.dat".into())?;
                bump(&self.counters.data_bytes, buf.len() as u64);
                k = j;
            }
            at += frag.units;
        }
        self.volume
            .sync_data()
            .ctx(|| "defrag: syncing volume.dat".into())?;
        bump(&self.counters.data_syncs, 1);
        Ok(ops)
    }

    /// Applies the two-fragments rule at every fragment boundary of every folder, online.
    /// `progress(folders_done, folders_total)`.
    ///
    /// Store-wide: the rule at every fragment boundary of every folder. The writer lock is
    /// taken per round, so appends and expunges interleave with a long defrag.
    pub fn defrag(&self, progress: &mut dyn FnMut(u64, u64)) -> Result<DefragReport, StoreError> {
        let mut ids: Vec<u32> = self.catalog().folders.keys().copied().collect();
        ids.sort_unstable();
        let total = ids.len() as u64;
        let mut report = DefragReport {
            folders: total,
            ..DefragReport::default()
        };
        for (n, id) in ids.iter().enumerate() {
            progress(n as u64, total);
            let Some(cell) = self.catalog().folders.get(id).cloned() else {
                continue;
            };
            report.fragments_before += count_fragments(&cell.read().messages);
            // A folder small enough to copy in one round, with a free run that holds all of
            // it, becomes one fragment there. The boundary rule below cannot join a layout
            // whose holes are each smaller than two fragments (a folder that was delivered
            // interleaved with another that was then deleted).
            {
                let mut w = self.writer()?;
                let frags = {
                    let f = cell.read();
                    if f.deleted {
                        continue;
                    }
                    fragments_from(&f.messages, 0, u64::MAX)
                };
                let units: u64 = frags.iter().map(|f| f.units).sum();
                if frags.len() > 1
                    && units * UNIT <= RELOCATE_BYTES_MAX
                    && let Some(dest) = w.alloc.best_fit(units)
                {
                    let (m, b) = self.move_fragments(&mut w, &cell, &frags, dest)?;
                    if m > 0 {
                        report.rounds += 1;
                        report.messages_moved += m;
                        report.bytes_moved += b;
                    }
                }
            }
            let mut boundary = 0usize;
            loop {
                let mut w = self.writer()?;
                let frags = {
                    let f = cell.read();
                    if f.deleted {
                        break;
                    }
                    fragments_from(&f.messages, 0, u64::MAX)
                };
                let mut round = None;
                while boundary + 2 < frags.len() {
                    let end = frags[boundary].end();
                    if let Some((rs, rl)) = w.alloc.free_run_containing(end)
                        && rs == end
                    {
                        let (k, _) = fitting(&frags[boundary + 1..], rl, u64::MAX);
                        if k > 0 {
                            round = Some((boundary + 1, k, rs));
                            break;
                        }
                    }
                    boundary += 1;
                }
                let Some((from, k, dest)) = round else { break };
                let (m, b) = self.move_fragments(&mut w, &cell, &frags[from..from + k], dest)?;
                if m == 0 {
                    boundary += 1;
                    continue;
                }
                report.rounds += 1;
                report.messages_moved += m;
                report.bytes_moved += b;
            }
            report.fragments_after += count_fragments(&cell.read().messages);
        }
        progress(total, total);
        Ok(report)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frag(units: u64) -> Fragment {
        Fragment {
            start: 0,
            units,
            messages: Vec::new(),
        }
    }

    #[test]
    fn fitting_needs_two_fragments() {
        assert_eq!(fitting(&[frag(3), frag(2), frag(2)], 5, 100), (2, 5));
        assert_eq!(fitting(&[frag(3), frag(2), frag(2)], 7, 100), (3, 7));
        assert_eq!(fitting(&[frag(3), frag(2), frag(2)], 4, 100), (0, 0));
        assert_eq!(fitting(&[frag(3)], 100, 100), (0, 0));
        assert_eq!(fitting(&[frag(3), frag(2), frag(2)], 100, 4), (0, 0));
        assert_eq!(fitting(&[], 100, 100), (0, 0));
    }
}
