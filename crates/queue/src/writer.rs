//! The writer thread: group commit (the paper's Lazy Write, without a timer).
//!
//! One thread owns the active main and deferred segments. Each round it takes every request
//! waiting (up to the batch limits), appends new records and deferred copies with one record
//! `pwrite` and one slot `pwrite` per segment, writes the in-place marks (status bytes, done
//! flags), and calls `fdatasync` once per touched segment. Only then does it update the index
//! and complete the requests' tickets (Q1). A round runs in phases, each ending by asserting
//! what it established (docs/storage.md, "Phases of a queue writer round"): `sort_requests`,
//! `new_records`, `round_marks`, `write_round`, `apply_round`, `Round::answer`.
//!
//! Marks that must wait for another write to be durable (a moved mark waits for its deferred
//! copy, Q4) are kept for the next round, which runs at once if nothing else is waiting; a
//! crash in between leaves two copies of the message, which recovery resolves.
//!
//! Any I/O failure poisons the queue: the batch's tickets and every later call fail, and the
//! caller reopens the queue so recovery can establish what is durable. After a failed
//! `fdatasync` the page cache may no longer match the disk, so nothing in memory is trusted.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::thread::JoinHandle;

use disk::{Disk, File};

use crate::error::QueueError;
use crate::format::{self, FLAG_BATCH_END, Header, Kind, Slot};
use crate::index::{Class, Entry};
use crate::queue::{Core, State};
use crate::request::{FinishRequest, Request, Ticket};
use crate::segment::{SegState, SegmentInfo};
use crate::{MessageId, QueueConfig};

/// An in-place write: status bytes, or a slot's done flag and status hint.
#[derive(Clone, Debug)]
pub(crate) struct Mark {
    pub(crate) seg: u64,
    pub(crate) offset: u64,
    pub(crate) bytes: Vec<u8>,
}

impl Mark {
    /// The status bytes of the record in `slot`.
    pub(crate) fn statuses(seg: u64, slot: &Slot, statuses: Vec<u8>) -> Mark {
        Mark {
            seg,
            offset: u64::from(slot.offset) + format::RECORD_HEADER_BYTES as u64,
            bytes: statuses,
        }
    }

    /// The done flag and status hint of slot `index`.
    pub(crate) fn done(seg: u64, index: u32) -> Mark {
        Mark {
            seg,
            offset: format::slot_offset(index) + format::S_DONE as u64,
            bytes: vec![1, 1],
        }
    }

    /// Only the status hint of slot `index` (its status bytes are about to be non-zero).
    pub(crate) fn hint(seg: u64, index: u32) -> Mark {
        Mark {
            seg,
            offset: format::slot_offset(index) + format::S_HINT as u64,
            bytes: vec![1],
        }
    }
}

/// Where the writer appends in the active segment of one kind.
pub(crate) struct Cursor {
    pub(crate) seq: u64,
    pub(crate) file: Arc<dyn File>,
    pub(crate) path: PathBuf,
    pub(crate) header: Header,
    pub(crate) next_slot: u32,
    pub(crate) next_data: u32,
    /// CRC the next slot chains on.
    pub(crate) chain: u32,
}

impl Cursor {
    fn fits(&self, len: u64) -> bool {
        self.next_slot < self.header.slot_count
            && u64::from(self.next_data) + len <= self.header.segment_bytes
    }
}

/// The writer's own state, built by recovery.
pub(crate) struct Writer {
    pub(crate) core: Arc<Core>,
    pub(crate) active: [Option<Cursor>; 2],
    /// Free segments per kind, oldest first.
    pub(crate) free: [VecDeque<u64>; 2],
    pub(crate) next_id: MessageId,
    pub(crate) max_generation: u64,
    pub(crate) next_seq: u64,
    /// Marks for the next round.
    pub(crate) lazy: Vec<Mark>,
    /// Segments losing one live slot each when `lazy` is durable.
    pub(crate) lazy_done: Vec<u64>,
    /// The next new main segment, being zero-filled by a helper thread (see `Spare`).
    pub(crate) spare: Option<Spare>,
    /// Segments acquired ahead of the rollovers that will use them, per kind, in the order
    /// `activate` takes them (`Writer::acquire_segments`).
    pub(crate) ready: [VecDeque<Ready>; 2],
}

/// A segment acquired for a coming rollover: a free one, the spare, or a new one created under
/// its temporary name and preallocated. Nothing is written in it until `activate` gives it its
/// header, so one that is never used costs nothing but its space (a `.tmp` one is removed at
/// the next open).
pub(crate) struct Ready {
    seq: u64,
    file: Arc<dyn File>,
    /// The segment's name, or for a new one its temporary name (renamed by `activate`).
    path: PathBuf,
    segment_bytes: u64,
    created: bool,
}

impl Ready {
    /// The largest record it can hold.
    fn capacity(&self) -> u64 {
        format::record_capacity(self.segment_bytes)
    }
}

/// A main segment prepared ahead of need while the queue grows: created under its temporary
/// name, preallocated, zero-filled (past the page cache: `File::write_zeros`) and synced by a
/// helper thread, so the writer never stalls on zero-filling 64 MiB at a rollover. It becomes
/// a segment only when the writer writes its header and renames it; a crash before that leaves
/// a `.tmp` file that recovery removes.
pub(crate) struct Spare {
    seq: u64,
    tmp: PathBuf,
    segment_bytes: u64,
    job: JoinHandle<std::io::Result<Arc<dyn File>>>,
}

impl Drop for Writer {
    fn drop(&mut self) {
        // Wait for a spare in preparation so no helper thread outlives the queue; its file
        // stays a `.tmp` that the next open removes.
        if let Some(spare) = self.spare.take() {
            let _ = spare.job.join();
        }
    }
}

impl Spare {
    fn start(core: &Arc<Core>, seq: u64, bytes: u64) -> Option<Spare> {
        let tmp = format::temp_path(&core.dir.join(format::segment_name(Kind::Main, seq)));
        let core = core.clone();
        let path = tmp.clone();
        let job = std::thread::Builder::new()
            .name("queue-spare".into())
            .spawn(move || {
                let file = core.disk.open(&path, true)?;
                file.allocate(bytes)?;
                file.write_zeros(0, bytes)?;
                file.sync_data()?;
                core.fdatasyncs.fetch_add(1, Ordering::Relaxed);
                Ok(file)
            })
            .ok()?;
        Some(Spare {
            seq,
            tmp,
            segment_bytes: bytes,
            job,
        })
    }

    /// The prepared segment, once the helper is done; `None` if it failed (a full disk: its
    /// file is removed, and the writer creates segments itself).
    fn finish(self, disk: &dyn Disk) -> Option<Ready> {
        match self.job.join() {
            Ok(Ok(file)) => Some(Ready {
                seq: self.seq,
                file,
                path: self.tmp,
                segment_bytes: self.segment_bytes,
                created: true,
            }),
            _ => {
                let _ = disk.remove(&self.tmp);
                None
            }
        }
    }
}

/// A round's requests, sorted by what they do (`Writer::sort_requests`).
#[derive(Default)]
struct Round {
    /// `Request::Enqueue` only.
    enqueues: Vec<Request>,
    /// (segment, slot index, slot) of the original, and the finish.
    finishes: Vec<(u64, u32, Slot, FinishRequest)>,
    /// (id, segment, slot index, ticket).
    bounces: Vec<(MessageId, u64, u32, Ticket<()>)>,
    /// (segment, slot index).
    resolves: Vec<(u64, u32)>,
    /// (segment, slot index, ticket).
    removes: Vec<(u64, u32, Ticket<()>)>,
}

impl Round {
    /// Record sizes of the deferred copies, in the order `new_records` lists them.
    fn copy_lens(&self) -> Vec<u64> {
        self.finishes
            .iter()
            .filter_map(|(_, _, _, f)| f.copy.as_ref())
            .map(|c| format::record_len(c.statuses.len(), c.envelope.len(), c.content.len()))
            .collect()
    }

    /// Record sizes of the new mail, in order.
    fn enqueue_lens(&self) -> Vec<u64> {
        self.enqueues.iter().map(Request::record_len).collect()
    }

    fn len(&self) -> usize {
        self.enqueues.len()
            + self.finishes.len()
            + self.bounces.len()
            + self.resolves.len()
            + self.removes.len()
    }

    /// Fails every ticket of the round with `e` (nothing of it is known to be durable).
    fn fail(self, e: &QueueError) {
        for r in self.enqueues {
            r.fail(e.duplicate());
        }
        for (_, _, _, f) in self.finishes {
            (f.done)(Err(e.duplicate()));
        }
        for (_, _, _, done) in self.bounces {
            done(Err(e.duplicate()));
        }
        for (_, _, done) in self.removes {
            done(Err(e.duplicate()));
        }
    }

    /// Phase 6: completes every ticket (new mail gets its id, from `ids` in order).
    fn answer(self, mut ids: std::ops::Range<MessageId>) {
        for r in self.enqueues {
            if let Request::Enqueue { done, content, .. } = r {
                // Freed before the answer: the producer's share of the memory budget ends
                // with it (the SMTP session holds its reservation until the reply).
                drop(content);
                done(Ok(ids.next().expect("one id per enqueue")));
            }
        }
        for (_, _, _, f) in self.finishes {
            (f.done)(Ok(()));
        }
        for (_, _, _, done) in self.bounces {
            done(Ok(()));
        }
        for (_, _, done) in self.removes {
            done(Ok(()));
        }
        assert!(ids.next().is_none(), "every new id was answered");
    }
}

/// Q3: an in-place mark touches only a slot's done flag and status hint, or a record's status
/// bytes.
fn mark_in_place(st: &State, m: &Mark) -> bool {
    st.segments.get(&m.seg).is_some_and(|info| {
        let h = &info.header;
        if m.offset < u64::from(h.data_offset) {
            let in_slot = (m.offset - format::HEADER_BYTES) % format::SLOT_BYTES;
            in_slot >= format::S_DONE as u64
                && in_slot + m.bytes.len() as u64 <= format::S_HINT as u64 + 1
        } else {
            m.bytes.len() <= format::RECIPIENTS_LIMIT
        }
    })
}

/// A record placed in a segment by `append`.
struct Placed {
    seg: u64,
    slot_index: u32,
    slot: Slot,
}

/// A record's content at least this large is written from the producer's buffer instead of
/// being copied into the batch's: a large message is not held twice while it is written.
const CONTENT_IN_PLACE_BYTES: usize = 1 << 20;

/// A record to append.
struct NewRecord<'a> {
    id: MessageId,
    statuses: &'a [u8],
    envelope: &'a [u8],
    content: &'a [u8],
    attempts: u16,
    arrival_ms: u64,
    next_attempt_ms: u64,
}

impl NewRecord<'_> {
    fn len(&self) -> u64 {
        format::record_len(self.statuses.len(), self.envelope.len(), self.content.len())
    }
}

pub(crate) fn spawn(
    core: Arc<Core>,
    writer: Writer,
) -> Result<JoinHandle<Result<(), QueueError>>, QueueError> {
    debug_assert!(Arc::ptr_eq(&core, &writer.core));
    std::thread::Builder::new()
        .name("queue-writer".into())
        .spawn(move || writer.run())
        .map_err(|e| QueueError::io("start the writer thread for", core.dir.clone(), e))
}

impl Writer {
    fn run(mut self) -> Result<(), QueueError> {
        loop {
            let requests = {
                let mut st = self.core.lock();
                loop {
                    if !st.requests.is_empty() || !self.lazy.is_empty() {
                        break;
                    }
                    if st.shutdown {
                        return Ok(());
                    }
                    st = self.core.wake.wait(st).unwrap_or_else(|p| p.into_inner());
                }
                // Announced producers are about to submit: hold the round for them, briefly,
                // so they share this sync. Nobody announced means nobody waits.
                let wait_max = self.core.config.commit_wait_max;
                if !wait_max.is_zero() && !st.shutdown {
                    let deadline = std::time::Instant::now() + wait_max;
                    while self.core.incoming.load(Ordering::SeqCst) > 0
                        && st.requests.len() < self.core.config.batch_records_max
                    {
                        let now = std::time::Instant::now();
                        if now >= deadline || st.shutdown {
                            break;
                        }
                        st = self
                            .core
                            .wake
                            .wait_timeout(st, deadline - now)
                            .map(|(g, _)| g)
                            .unwrap_or_else(|p| p.into_inner().0);
                    }
                }
                // Step 2 of the group commit: everything waiting, up to the limits.
                let mut taken = Vec::new();
                let mut bytes = 0usize;
                while let Some(r) = st.requests.front() {
                    let b = r.bytes();
                    if !taken.is_empty()
                        && (taken.len() >= self.core.config.batch_records_max
                            || bytes + b > self.core.config.batch_bytes_max)
                    {
                        break;
                    }
                    bytes += b;
                    taken.extend(st.requests.pop_front());
                }
                taken
            };
            if let Err(e) = self.round(requests) {
                let why = e.to_string();
                let rest: Vec<Request> = {
                    let mut st = self.core.lock();
                    st.poisoned = Some(why.clone());
                    st.requests.drain(..).collect()
                };
                for r in rest {
                    r.fail(QueueError::Poisoned(why.clone()));
                }
                return Err(e);
            }
        }
    }

    fn sync(&self, file: &dyn File, path: &std::path::Path) -> Result<(), QueueError> {
        file.sync_data()
            .map_err(|e| QueueError::io("fdatasync", path, e))?;
        self.core.fdatasyncs.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// One group-commit round, in the phases of docs/storage.md, "Phases of a queue writer
    /// round". On error every ticket of the round has been failed.
    fn round(&mut self, requests: Vec<Request>) -> Result<(), QueueError> {
        let mut round = self.sort_requests(requests);
        self.acquire_segments(&mut round);
        let (new_copies, new_main) = self.new_records(&round);
        let (marks, done_before) = self.round_marks(&round);
        let io = self.write_round(&new_copies, &new_main, &marks);
        drop(new_main);
        drop(new_copies);
        let (copies, mains) = match io {
            Ok(placed) => placed,
            Err(e) => {
                round.fail(&e);
                return Err(e);
            }
        };
        let committed = (copies.len() + mains.len()) as u64;
        self.apply_round(&round, done_before, copies, mains);
        self.core
            .records_committed
            .fetch_add(committed, Ordering::Relaxed);
        self.core.batches_committed.fetch_add(1, Ordering::Relaxed);
        let ids = (self.next_id - round.enqueues.len() as u64)..self.next_id;
        round.answer(ids);
        Ok(())
    }

    /// Phase 1: sorts the requests by what they do, checking each finish against the index
    /// (its lease must still be the one the caller held); refused ones are answered at once.
    fn sort_requests(&self, requests: Vec<Request>) -> Round {
        let count = requests.len();
        let mut round = Round::default();
        let mut rejected: Vec<(Ticket<()>, QueueError)> = Vec::new();
        {
            let st = self.core.lock();
            for r in requests {
                match r {
                    Request::Enqueue { .. } => round.enqueues.push(r),
                    Request::Resolve { seg, index } => round.resolves.push((seg, index)),
                    Request::Remove { seg, index, done } => round.removes.push((seg, index, done)),
                    Request::Finish(f) => match st.index.get(f.id) {
                        None => rejected.push((f.done, QueueError::UnknownMessage(f.id))),
                        Some(e)
                            if e.lease.as_ref().map(|l| l.token) != Some(f.token)
                                || e.class != Class::Ready =>
                        {
                            rejected.push((f.done, QueueError::NotLeased(f.id)))
                        }
                        Some(e) => round.finishes.push((e.seg, e.slot_index, e.slot, f)),
                    },
                    Request::FinishBounce { id, token, done } => match st.index.get(id) {
                        None => rejected.push((done, QueueError::UnknownMessage(id))),
                        Some(e)
                            if e.lease.as_ref().map(|l| l.token) != Some(token)
                                || e.class != Class::Bounce =>
                        {
                            rejected.push((done, QueueError::NotLeased(id)))
                        }
                        Some(e) => round.bounces.push((id, e.seg, e.slot_index, done)),
                    },
                }
            }
        }
        let refused = rejected.len();
        for (done, e) in rejected {
            done(Err(e));
        }
        // Every request is in the round or refused, once.
        assert_eq!(round.len() + refused, count);
        round
    }

    /// Phase 2: the records to append: deferred copies, and new mail with new ids, ascending
    /// in commit order.
    fn new_records<'a>(&mut self, round: &'a Round) -> (Vec<NewRecord<'a>>, Vec<NewRecord<'a>>) {
        let mut new_main = Vec::with_capacity(round.enqueues.len());
        for r in &round.enqueues {
            if let Request::Enqueue {
                envelope,
                statuses,
                content,
                arrival_ms,
                ..
            } = r
            {
                new_main.push(NewRecord {
                    id: self.next_id,
                    statuses,
                    envelope,
                    content,
                    attempts: 0,
                    arrival_ms: *arrival_ms,
                    next_attempt_ms: 0,
                });
                self.next_id += 1;
            }
        }
        let new_copies: Vec<NewRecord> = round
            .finishes
            .iter()
            .filter_map(|(_, _, _, f)| {
                f.copy.as_ref().map(|c| NewRecord {
                    id: f.id,
                    statuses: &c.statuses,
                    envelope: &c.envelope,
                    content: &c.content,
                    attempts: c.attempts,
                    arrival_ms: c.arrival_ms,
                    next_attempt_ms: c.next_attempt_ms,
                })
            })
            .collect();
        // One new id per enqueue, the last one just below the next id to give.
        assert_eq!(new_main.len(), round.enqueues.len());
        assert!(new_main.last().is_none_or(|r| r.id + 1 == self.next_id));
        (new_copies, new_main)
    }

    /// Phase 3: the in-place marks: the previous round's deferred ones, then this round's
    /// status bytes, done flags and status hints. Returns them and the segments that lose a
    /// live slot once the previous round's marks are durable.
    fn round_marks(&mut self, round: &Round) -> (Vec<Mark>, Vec<u64>) {
        let mut marks = std::mem::take(&mut self.lazy);
        let done_before = std::mem::take(&mut self.lazy_done);
        let carried = marks.len();
        for (seg, index, slot, f) in &round.finishes {
            if f.now.iter().any(|&s| s != 0) {
                marks.push(Mark::statuses(*seg, slot, f.now.clone()));
            }
            if f.copy.is_none() && !becomes_bounce(f) {
                marks.push(Mark::done(*seg, *index));
            } else if f.now.iter().any(|&s| s != 0) {
                marks.push(Mark::hint(*seg, *index));
            }
        }
        for (_, seg, index, _) in &round.bounces {
            marks.push(Mark::done(*seg, *index));
        }
        for (seg, index) in &round.resolves {
            marks.push(Mark::done(*seg, *index));
        }
        for (seg, index, _) in &round.removes {
            marks.push(Mark::done(*seg, *index));
        }
        // Nothing carried over is lost: it is all in this round's marks.
        assert!(self.lazy.is_empty() && self.lazy_done.is_empty());
        let settled = round.bounces.len() + round.resolves.len() + round.removes.len();
        assert!(marks.len() >= carried + settled);
        (marks, done_before)
    }

    /// Phase 4: appends the deferred copies (deferred segment) and new mail (main segment),
    /// writes the marks, then syncs every segment written (Q1: before any ticket completes).
    /// Returns where the copies and the new mail went.
    fn write_round(
        &mut self,
        new_copies: &[NewRecord],
        new_main: &[NewRecord],
        marks: &[Mark],
    ) -> Result<(Vec<Placed>, Vec<Placed>), QueueError> {
        let mut touched = BTreeSet::new();
        let copies = self.append(Kind::Deferred, new_copies, &mut touched)?;
        let mains = self.append(Kind::Main, new_main, &mut touched)?;
        let mut files: BTreeMap<u64, (Arc<dyn File>, PathBuf)> = BTreeMap::new();
        {
            let st = self.core.lock();
            for seg in marks.iter().map(|m| m.seg).chain(touched.iter().copied()) {
                if let Some(info) = st.segments.get(&seg) {
                    files
                        .entry(seg)
                        .or_insert_with(|| (info.file.clone(), info.path.clone()));
                }
            }
            // Q3: in-place writes touch only status bytes, done flags and status hints.
            debug_assert!(marks.iter().all(|m| mark_in_place(&st, m)));
        }
        for m in marks {
            let (file, path) = files.get(&m.seg).ok_or_else(|| {
                QueueError::Poisoned(format!("mark for unknown segment {}", m.seg))
            })?;
            file.write_all_at(&m.bytes, m.offset)
                .map_err(|e| QueueError::io("write status to", path, e))?;
            touched.insert(m.seg);
        }
        for seg in &touched {
            let (file, path) = files
                .get(seg)
                .ok_or_else(|| QueueError::Poisoned(format!("write to unknown segment {seg}")))?;
            self.sync(&**file, path)?;
        }
        // Every record placed once, in the order given.
        let ids = |placed: &[Placed]| placed.iter().map(|p| p.slot.id).collect::<Vec<_>>();
        let wanted = |records: &[NewRecord]| records.iter().map(|r| r.id).collect::<Vec<_>>();
        assert_eq!(ids(&copies), wanted(new_copies));
        assert_eq!(ids(&mains), wanted(new_main));
        Ok((copies, mains))
    }

    /// Phase 5: the round is durable: the index learns of it (new mail, copies, finished and
    /// removed records), live counts drop, and the moved marks and done flags of originals
    /// whose copies are now durable become the next round's marks (Q4).
    fn apply_round(
        &mut self,
        round: &Round,
        done_before: Vec<u64>,
        copies: Vec<Placed>,
        mains: Vec<Placed>,
    ) {
        let core = self.core.clone();
        let mut st = core.lock();
        for seg in done_before
            .into_iter()
            .chain(round.resolves.iter().map(|r| r.0))
            .chain(round.removes.iter().map(|r| r.0))
        {
            live_sub(&mut st.segments, seg);
        }
        let mut copies = copies.into_iter();
        for (seg, index, slot, f) in &round.finishes {
            if f.copy.is_none() && becomes_bounce(f) {
                // Everything delivered except recipients that had failed before: the record
                // itself is now a bounce.
                st.index.reclassify(f.id, Class::Bounce);
                continue;
            }
            st.index.remove(f.id);
            match &f.copy {
                None => live_sub(&mut st.segments, *seg),
                Some(c) => {
                    let placed = copies.next().expect("one placement per copy");
                    debug_assert_eq!(placed.slot.id, f.id);
                    // Q4: the copy is durable now, so the moved marks may be written. Every
                    // recipient still pending here got a deferral or a failure: the copy
                    // carries it on.
                    let mut moved = f.now.clone();
                    for m in moved.iter_mut() {
                        if *m == format::STATUS_PENDING {
                            *m = format::STATUS_MOVED;
                        }
                    }
                    self.lazy.push(Mark::statuses(*seg, slot, moved));
                    self.lazy.push(Mark::done(*seg, *index));
                    self.lazy_done.push(*seg);
                    let class = if c.statuses.contains(&format::STATUS_PENDING) {
                        Class::Ready
                    } else {
                        Class::Bounce
                    };
                    insert(&mut st, placed, Kind::Deferred, class);
                }
            }
        }
        for (id, seg, _, _) in &round.bounces {
            st.index.remove(*id);
            live_sub(&mut st.segments, *seg);
        }
        let new_mail = (
            mains.first().map(|p| p.slot.id),
            mains.last().map(|p| p.slot.id),
        );
        for placed in mains {
            insert(&mut st, placed, Kind::Main, Class::Ready);
        }
        Self::recycle(&core, &mut self.free, &mut st);
        // Every copy was placed; each original with a copy waits on exactly two marks.
        assert!(copies.next().is_none());
        assert_eq!(self.lazy.len(), 2 * self.lazy_done.len());
        assert!(
            [new_mail.0, new_mail.1]
                .iter()
                .flatten()
                .all(|&id| st.index.get(id).is_some())
        );
    }

    /// Appends `records` to the active segment of `kind`, splitting across segments when one
    /// fills: the part that fits is written and synced there, the segment is sealed and the
    /// rest goes to a free or new segment. The last part is left for the round's sync.
    fn append(
        &mut self,
        kind: Kind,
        records: &[NewRecord],
        touched: &mut BTreeSet<u64>,
    ) -> Result<Vec<Placed>, QueueError> {
        let mut placed = Vec::with_capacity(records.len());
        let mut i = 0;
        while i < records.len() {
            if !self.active[kind.index()]
                .as_ref()
                .is_some_and(|c| c.fits(records[i].len()))
            {
                if let Some(c) = &self.active[kind.index()]
                    && touched.remove(&c.seq)
                {
                    self.sync(&*c.file, &c.path)?;
                }
                self.activate(kind, records[i].len())?;
            }
            let cur = self.active[kind.index()].as_mut().expect("activated");
            let mut j = i;
            let mut data = u64::from(cur.next_data);
            let mut slot_index = cur.next_slot;
            while j < records.len()
                && slot_index < cur.header.slot_count
                && data + records[j].len() <= cur.header.segment_bytes
            {
                data += records[j].len();
                slot_index += 1;
                j += 1;
            }
            debug_assert!(j > i, "an empty segment always fits one record");
            // The records go out back to back in one buffer, except that a large content is
            // written from the producer's buffer: the buffer is written up to it (with the
            // record's head), then the content, and the buffer starts again at its padding.
            let buffered: u64 = records[i..j]
                .iter()
                .map(|r| {
                    if r.content.len() >= CONTENT_IN_PLACE_BYTES {
                        r.len() - r.content.len() as u64
                    } else {
                        r.len()
                    }
                })
                .sum();
            let mut rec_buf = Vec::with_capacity(buffered as usize);
            // Where `rec_buf` goes in the segment, and where the next record starts.
            let mut buf_at = u64::from(cur.next_data);
            let mut at = buf_at;
            let mut slot_buf = Vec::with_capacity((j - i) * format::SLOT_BYTES as usize);
            let mut chain = cur.chain;
            for (k, r) in records[i..j].iter().enumerate() {
                let offset = at as u32;
                let record_crc = if r.content.len() >= CONTENT_IN_PLACE_BYTES {
                    let crc = format::encode_record_head(
                        &mut rec_buf,
                        r.id,
                        r.statuses,
                        r.envelope,
                        r.content,
                    );
                    cur.file
                        .write_all_at(&rec_buf, buf_at)
                        .map_err(|e| QueueError::io("write records to", &cur.path, e))?;
                    let content_at = buf_at + rec_buf.len() as u64;
                    cur.file
                        .write_all_at(r.content, content_at)
                        .map_err(|e| QueueError::io("write records to", &cur.path, e))?;
                    buf_at = content_at + r.content.len() as u64;
                    rec_buf.clear();
                    rec_buf.resize((at + r.len() - buf_at) as usize, 0);
                    crc
                } else {
                    format::encode_record_into(
                        &mut rec_buf,
                        r.id,
                        r.statuses,
                        r.envelope,
                        r.content,
                    )
                };
                at += r.len();
                let slot = Slot {
                    id: r.id,
                    offset,
                    len: r.len() as u32,
                    env_len: r.envelope.len() as u32,
                    content_len: r.content.len() as u32,
                    recipients: r.statuses.len() as u16,
                    attempts: r.attempts,
                    arrival_ms: r.arrival_ms,
                    next_attempt_ms: r.next_attempt_ms,
                    record_crc,
                    flags: if i + k + 1 == j { FLAG_BATCH_END } else { 0 },
                    generation: cur.header.generation,
                    done: 0,
                    hint: u8::from(r.statuses.iter().any(|&s| s != 0)),
                };
                let (bytes, crc) = slot.encode(chain);
                chain = crc;
                slot_buf.extend_from_slice(&bytes);
                placed.push(Placed {
                    seg: cur.seq,
                    slot_index: cur.next_slot + k as u32,
                    slot,
                });
            }
            debug_assert_eq!(at, data);
            if !rec_buf.is_empty() {
                cur.file
                    .write_all_at(&rec_buf, buf_at)
                    .map_err(|e| QueueError::io("write records to", &cur.path, e))?;
            }
            cur.file
                .write_all_at(&slot_buf, format::slot_offset(cur.next_slot))
                .map_err(|e| QueueError::io("write slots to", &cur.path, e))?;
            cur.next_data = data as u32;
            cur.next_slot = slot_index;
            cur.chain = chain;
            touched.insert(cur.seq);
            // Count the new slots as live at once (not after the sync): the segment may be
            // sealed later in this round and must not look empty to `recycle` meanwhile.
            if let Some(info) = self.core.lock().segments.get_mut(&cur.seq) {
                info.live += j - i;
            }
            i = j;
        }
        Ok(placed)
    }

    /// Seals the active segment of `kind` and makes the first segment acquired for it that
    /// can hold a record of `need` bytes active (`acquire_segments` acquired it for this
    /// rollover). Its header, with a new generation (which orphans every slot of the old one)
    /// and the current id floor, is synced before any record is written there: slots of the
    /// new generation must never outlive their header.
    fn activate(&mut self, kind: Kind, need: u64) -> Result<(), QueueError> {
        let k = kind.index();
        if let Some(old) = self.active[k].take() {
            let core = self.core.clone();
            let mut st = core.lock();
            if let Some(info) = st.segments.get_mut(&old.seq) {
                info.state = SegState::Sealed;
            }
            Self::recycle(&core, &mut self.free, &mut st);
        }
        let pos = self.ready[k].iter().position(|r| r.capacity() >= need);
        let Ready {
            seq,
            file,
            path,
            segment_bytes,
            created,
        } = pos
            .and_then(|p| self.ready[k].remove(p))
            .expect("acquire_segments acquired a segment for every rollover of the round");
        self.max_generation += 1;
        let generation = self.max_generation;
        let header = Header::new(kind, seq, generation, segment_bytes, self.next_id);
        file.write_all_at(&header.encode(), 0)
            .map_err(|e| QueueError::io("write header of", &path, e))?;
        self.sync(&*file, &path)?;
        let path = if created {
            let name = self.core.dir.join(format::segment_name(kind, seq));
            self.core
                .disk
                .rename(&path, &name)
                .map_err(|e| QueueError::io("rename", &path, e))?;
            self.core
                .disk
                .sync_dir(&self.core.dir)
                .map_err(|e| QueueError::io("sync directory", &self.core.dir, e))?;
            name
        } else {
            path
        };
        {
            let mut st = self.core.lock();
            match st.segments.get_mut(&seq) {
                Some(info) => {
                    // Q5: only a segment with no live slot is reused.
                    assert!(
                        info.live == 0 && info.state == SegState::Free,
                        "reusing a live segment"
                    );
                    info.header = header;
                    info.state = SegState::Active;
                }
                None => {
                    st.segments.insert(
                        seq,
                        SegmentInfo {
                            path: path.clone(),
                            file: file.clone(),
                            header,
                            live: 0,
                            state: SegState::Active,
                        },
                    );
                }
            }
        }
        self.active[k] = Some(Cursor {
            seq,
            file,
            path,
            header,
            next_slot: 0,
            next_data: header.data_offset,
            chain: format::chain_seed(generation),
        });
        Ok(())
    }

    /// Phase 2: acquires, before any id is given or any byte written, every segment the
    /// round's new records will roll over into (the same packing `append` does), so that a
    /// full file system refuses only the requests that need room, with
    /// [`QueueError::NoSpace`], and the queue goes on: nothing was written, nothing is
    /// poisoned, and the next round tries again. Deferred copies are refused with their
    /// finish (the message stays where it was, to be tried again); marks need no room.
    fn acquire_segments(&mut self, round: &mut Round) {
        if let Err(e) = self.acquire_for(Kind::Deferred, &round.copy_lens()) {
            let (refused, kept) = std::mem::take(&mut round.finishes)
                .into_iter()
                .partition(|(_, _, _, f)| f.copy.is_some());
            round.finishes = kept;
            for (_, _, _, f) in refused {
                (f.done)(Err(e.duplicate()));
            }
        }
        if let Err(e) = self.acquire_for(Kind::Main, &round.enqueue_lens()) {
            for r in std::mem::take(&mut round.enqueues) {
                r.fail(e.duplicate());
            }
        }
        // Every rollover `append` will make has its segment: a second packing pass over the
        // round, so checked in debug builds (`--profile ci` included) and not on every
        // release round; `activate` asserts it per rollover anyway.
        debug_assert!(
            self.uncovered_rollover(Kind::Deferred, &round.copy_lens())
                .is_none()
        );
        debug_assert!(
            self.uncovered_rollover(Kind::Main, &round.enqueue_lens())
                .is_none()
        );
    }

    /// Acquires what records of `lens` (in order) need past the active segment of `kind`.
    fn acquire_for(&mut self, kind: Kind, lens: &[u64]) -> Result<(), QueueError> {
        while let Some(need) = self.uncovered_rollover(kind, lens) {
            self.acquire(kind, need)?;
        }
        Ok(())
    }

    /// Packs `lens` as `append` will (the active segment, then the acquired ones, each taking
    /// the first that holds the record starting it) and returns the record size of the first
    /// rollover no acquired segment can take.
    fn uncovered_rollover(&self, kind: Kind, lens: &[u64]) -> Option<u64> {
        let k = kind.index();
        let (mut data, mut slot, mut bytes, mut slots) = match &self.active[k] {
            Some(c) => (
                u64::from(c.next_data),
                c.next_slot,
                c.header.segment_bytes,
                c.header.slot_count,
            ),
            None => (0, 0, 0, 0),
        };
        let mut claimed = vec![false; self.ready[k].len()];
        for &len in lens {
            if !(slot < slots && data + len <= bytes) {
                let Some(pos) = self.ready[k]
                    .iter()
                    .enumerate()
                    .position(|(i, r)| !claimed[i] && r.capacity() >= len)
                else {
                    return Some(len);
                };
                claimed[pos] = true;
                bytes = self.ready[k][pos].segment_bytes;
                slots = format::slot_count(bytes);
                data = u64::from(format::data_offset(slots));
                slot = 0;
            }
            data += len;
            slot += 1;
        }
        None
    }
    /// Adds a segment that holds a record of `need` bytes to the acquired ones of `kind`:
    /// the first free one that does, else (main) the spare, else a new one, created under its
    /// temporary name and preallocated. A failure writes nothing: the partial file is removed
    /// and the error is `NoSpace` when the file system is full.
    fn acquire(&mut self, kind: Kind, need: u64) -> Result<(), QueueError> {
        let k = kind.index();
        if let Some(free) = self.take_free(kind, need) {
            self.ready[k].push_back(free);
            return Ok(());
        }
        if kind == Kind::Main
            && let Some(spare) = self.spare.take()
            && let Some(ready) = spare.finish(&*self.core.disk)
        {
            let fits = ready.capacity() >= need;
            self.ready[k].push_back(ready);
            self.start_spare();
            if fits {
                return Ok(());
            }
        }
        let bytes = self.new_segment_bytes(kind, need);
        let seq = self.next_seq;
        self.next_seq += 1;
        let tmp = format::temp_path(&self.core.dir.join(format::segment_name(kind, seq)));
        let made = self
            .core
            .disk
            .open(&tmp, true)
            .and_then(|file| file.allocate(bytes).map(|()| file));
        let file = match made {
            Ok(file) => file,
            Err(e) => {
                let _ = self.core.disk.remove(&tmp);
                return Err(QueueError::creating_segment(&tmp, e));
            }
        };
        self.ready[k].push_back(Ready {
            seq,
            file,
            path: tmp,
            segment_bytes: bytes,
            created: true,
        });
        if kind == Kind::Main {
            self.start_spare();
        }
        Ok(())
    }

    /// The first free segment of `kind` that holds a record of `need` bytes, off the free
    /// list.
    fn take_free(&mut self, kind: Kind, need: u64) -> Option<Ready> {
        let k = kind.index();
        let st = self.core.lock();
        let pos = self.free[k].iter().position(|seq| {
            st.segments
                .get(seq)
                .is_some_and(|s| format::record_capacity(s.header.segment_bytes) >= need)
        })?;
        let seq = self.free[k].remove(pos)?;
        st.segments.get(&seq).map(|s| Ready {
            seq,
            file: s.file.clone(),
            path: s.path.clone(),
            segment_bytes: s.header.segment_bytes,
            created: false,
        })
    }

    /// The queue is growing: have the next main segment ready before it is needed.
    /// fallocate leaves blocks "unwritten", and the first write to each makes fdatasync
    /// commit an extent conversion to the file system's journal; a spare is zero-filled off
    /// the commit path, so batches in it are plain overwrites (measured here: 256 KiB write +
    /// fdatasync 353 us -> 247 us). Recycled segments keep their written blocks.
    fn start_spare(&mut self) {
        if self.spare.is_some() {
            return;
        }
        let bytes = self.new_segment_bytes(Kind::Main, 0);
        let seq = self.next_seq;
        self.next_seq += 1;
        self.spare = Spare::start(&self.core, seq, bytes);
    }

    /// The size of a new segment of `kind`: as many bytes as the kind's segments hold now,
    /// so the queue's files double while it grows and a small queue stays small (docs/storage.md,
    /// "Sizes"), between `segment_bytes_min` and `segment_bytes`, no more than leaves
    /// `disk_reserve_bytes` free, and at least what a record of `need` bytes takes.
    fn new_segment_bytes(&self, kind: Kind, need: u64) -> u64 {
        let config = &self.core.config;
        let held: u64 = {
            let st = self.core.lock();
            st.segments
                .values()
                .filter(|s| s.header.kind == kind)
                .map(|s| s.header.segment_bytes)
                .sum()
        };
        let acquired: u64 = self.ready[kind.index()]
            .iter()
            .filter(|r| r.created)
            .map(|r| r.segment_bytes)
            .sum();
        let spare = match (kind, &self.spare) {
            (Kind::Main, Some(spare)) => spare.segment_bytes,
            _ => 0,
        };
        let mut grown = (held + acquired + spare)
            .next_multiple_of(4096)
            .clamp(config.segment_bytes_min, config.segment_bytes);
        if let Ok(available) = self.core.disk.available_bytes(&self.core.dir) {
            let room = available.saturating_sub(config.disk_reserve_bytes) & !4095;
            grown = grown.min(room).max(config.segment_bytes_min);
        }
        // `enqueue` refuses records larger than a segment of `segment_bytes` holds.
        format::segment_bytes_for(need, grown).unwrap_or(config.segment_bytes)
    }

    /// Moves sealed segments without live slots to the free list (Q5) and unlinks free
    /// segments beyond `free_segments_max` per kind.
    fn recycle(core: &Core, free: &mut [VecDeque<u64>; 2], st: &mut State) {
        for (&seq, info) in st.segments.iter_mut() {
            if info.state == SegState::Sealed && info.live == 0 {
                info.state = SegState::Free;
                free[info.header.kind.index()].push_back(seq);
            }
        }
        unlink_extra_free(&*core.disk, &core.config, free, &mut st.segments);
    }
}

/// Unlinks free segments beyond `free_segments_max` per kind, oldest first: they hold
/// nothing. One that cannot be removed leaves the free list and stays in the table, free.
pub(crate) fn unlink_extra_free(
    disk: &dyn Disk,
    config: &QueueConfig,
    free: &mut [VecDeque<u64>; 2],
    segments: &mut BTreeMap<u64, SegmentInfo>,
) {
    for list in free.iter_mut() {
        while list.len() > config.free_segments_max {
            let Some(seq) = list.pop_front() else { break };
            if let Some(info) = segments.get(&seq)
                && disk.remove(&info.path).is_ok()
            {
                segments.remove(&seq);
            }
        }
    }
    assert!(
        free.iter()
            .all(|list| list.len() <= config.free_segments_max)
    );
}

/// A finish without a copy (everything pending was delivered) that leaves failed recipients
/// from an earlier attempt: the record becomes a bounce instead of being done.
fn becomes_bounce(f: &FinishRequest) -> bool {
    f.copy.is_none() && f.now.contains(&format::STATUS_FAILED)
}

fn live_sub(segments: &mut BTreeMap<u64, SegmentInfo>, seg: u64) {
    if let Some(info) = segments.get_mut(&seg) {
        debug_assert!(
            info.live > 0,
            "segment {seg}: more done slots than live ones"
        );
        info.live = info.live.saturating_sub(1);
    }
}

/// Indexes a committed record (its segment already counts it as live).
fn insert(st: &mut State, placed: Placed, kind: Kind, class: Class) {
    st.index.insert(
        placed.slot.id,
        Entry {
            seg: placed.seg,
            slot_index: placed.slot_index,
            slot: placed.slot,
            kind,
            class,
            lease: None,
        },
    );
}
