//! mailstow's own storage as workloads on the block layer (docs/simulator.md 6b): accepting
//! mail (FlashQ's group commit against a file per message) and deleting it (an appended mark
//! against rewriting an mbox's tail). Every durable point ends with a cache flush: free on a
//! device without a volatile cache (the disk model), `flush_latency_us` on the SSD model.
//!
//! CPU: `message_cpu_ns` per message is what the implementation spends besides the device
//! (system calls, copies, waking the session), on `cpus` cores. `sim validate` measures it
//! by running the real implementation on tmpfs, where the device costs nothing.

use std::collections::{HashMap, VecDeque};

use des::{Latencies, Nanos, Scheduler};
use sim_models::block::{BlockLayer, Dispatch};
use sim_models::localfs::JournalMode;
use sim_models::{Op, Request, SECTOR_BYTES};

use crate::direct::block_layer;
use crate::error::SimError;
use crate::report::Run;

mod unjournaled;
use crate::scenario::{MailMode, Scenario, Workload};

const PAGE: u64 = 4096;
/// Largest group commit: messages per write.
const BATCH_MAX: usize = 256;
/// The journal's area: the device's first 128 MiB.
const JOURNAL_BYTES: u64 = 128 << 20;
/// Where mail data starts on the device.
const DATA_START: u64 = 1 << 30;
/// Journal blocks a new file adds to a commit (inode, block bitmap, directory block); a
/// truncation adds as many (inode, block bitmap, group descriptor).
const FILE_JOURNAL_BLOCKS: u64 = 3;
/// The mbox move's unit: a read, then the same bytes written `message_bytes` earlier.
const MOVE_CHUNK: u64 = 1 << 20;
/// The mbox's truncation is done (an `Event::Cpu` tag no chunk index reaches).
const TRUNCATED: u64 = u64::MAX;

fn pages(bytes: u64) -> u64 {
    bytes.div_ceil(PAGE) * PAGE
}

enum Event {
    Io(Request),
    /// A CPU step of the workload's own ends, tagged by the workload.
    Cpu(u64),
}

/// The block layer and the event list: requests and CPU steps on one clock.
struct Sim {
    bl: BlockLayer,
    events: Scheduler<Event>,
    next_id: u64,
    requests: u64,
    /// The journal's head; it wraps inside `JOURNAL_BYTES`.
    journal_head: u64,
    /// Whether the file system has a journal (`writeback.journal` is not `none`).
    journaled: bool,
}

impl Sim {
    fn new(s: &Scenario, seed: u64) -> Result<Sim, SimError> {
        Ok(Sim {
            bl: block_layer(s, seed, 1)?,
            events: Scheduler::new(),
            next_id: 0,
            requests: 0,
            journal_head: 0,
            journaled: s.writeback.journal != JournalMode::NoJournal,
        })
    }

    fn now(&self) -> Nanos {
        self.events.now()
    }

    fn dispatch(&mut self, out: Vec<Dispatch>) {
        for d in out {
            self.events.at(d.at, Event::Io(d.req));
        }
    }

    fn send(&mut self, req: Request) -> Result<u64, SimError> {
        let id = req.ids[0];
        self.next_id += 1;
        self.requests += 1;
        let out = self.bl.submit(self.now(), req).map_err(SimError::Model)?;
        self.dispatch(out);
        Ok(id)
    }

    /// A read or write of `bytes` at byte `at`; returns its id.
    fn io(&mut self, op: Op, at: u64, bytes: u64) -> Result<u64, SimError> {
        let sectors = bytes.div_ceil(SECTOR_BYTES).max(1);
        let req = Request::new(self.next_id, op, at / SECTOR_BYTES, sectors, self.now());
        self.send(req)
    }

    fn flush(&mut self) -> Result<u64, SimError> {
        self.send(Request::cache_flush(self.next_id, self.now()))
    }

    /// `blocks` journal blocks at the journal's head.
    fn journal(&mut self, blocks: u64) -> Result<u64, SimError> {
        let bytes = (blocks * PAGE).min(JOURNAL_BYTES);
        if self.journal_head + bytes > JOURNAL_BYTES {
            self.journal_head = 0;
        }
        let at = self.journal_head;
        self.journal_head += bytes;
        self.io(Op::Write, at, bytes)
    }

    /// The next event; a finished request has already let the block layer dispatch what
    /// waited behind it.
    fn next(&mut self) -> Option<Event> {
        let e = self.events.pop()?;
        if let Event::Io(done) = &e {
            let out = self.bl.complete(self.now(), done);
            self.dispatch(out);
        }
        Some(e)
    }

    /// The run's figures; `requests` are messages for a queue, device requests for a delete.
    fn ended(mut self, bytes: u64, requests: u64, latencies: Latencies) -> Run {
        let end = self.now();
        Run::ended(&mut self.bl, end, bytes, requests, latencies, 0.0)
    }
}

/// Where a jbd2 commit is (docs/simulator.md 6, as the local model's `SyncStage`): its
/// body, a flush, the commit block, a flush.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Commit {
    Body,
    PreFlush,
    Block,
    Flush,
}

impl Commit {
    /// A commit of `blocks` journal blocks and a descriptor: its first request. Without a
    /// journal the blocks are written in place (the inode table, at the device's start)
    /// and a flush follows.
    fn start(sim: &mut Sim, blocks: u64) -> Result<(Commit, u64), SimError> {
        if !sim.journaled {
            return Ok((Commit::Block, sim.io(Op::Write, 0, blocks * PAGE)?));
        }
        Ok((Commit::Body, sim.journal(1 + blocks)?))
    }

    /// Issues the step after this one; `None` once the commit is durable.
    fn advance(self, sim: &mut Sim) -> Result<Option<(Commit, u64)>, SimError> {
        Ok(match self {
            Commit::Body => Some((Commit::PreFlush, sim.flush()?)),
            Commit::PreFlush => Some((Commit::Block, sim.journal(1)?)),
            Commit::Block => Some((Commit::Flush, sim.flush()?)),
            Commit::Flush => None,
        })
    }
}

/// The group committer (FlashQ): writing a batch, flushing it, or on the CPU waking its
/// sessions.
enum Committer {
    Idle,
    Writing(u64),
    Flushing(u64),
    Waking,
}

/// A CPU tag: the committer is done waking its batch.
const COMMITTER_DONE: u64 = u64::MAX;

/// `sessions` writers each deliver a message as soon as the last one was accepted, until
/// `messages` are in.
pub(crate) fn queue(s: &Scenario, w: &Workload, seed: u64) -> Result<Run, SimError> {
    let mut sim = Sim::new(s, seed)?;
    let mut latencies = Latencies::new();
    let cpu_ns = w.message_cpu_ns as Nanos;
    let total = w.messages;
    let first = u64::from(w.sessions).min(total);
    let mut started = first;
    let mut accepted = 0u64;
    match w.mode {
        Some(MailMode::GroupCommit) => {
            // Every message waiting when the committer is free goes out in one write at
            // the segment's head, then `fdatasync`: a flush (the segment is preallocated and
            // zero-filled: no metadata to commit). The committer then wakes the batch's
            // sessions one after another, `message_cpu_ns` each; each session hands in its
            // next message as it wakes. A CPU tag is the message's arrival.
            let mut head = DATA_START;
            let mut waiting: VecDeque<Nanos> = std::iter::repeat_n(0, first as usize).collect();
            let mut batch: Vec<Nanos> = Vec::new();
            let mut committer = Committer::Idle;
            loop {
                if matches!(committer, Committer::Idle) && !waiting.is_empty() {
                    let n = waiting.len().min(BATCH_MAX);
                    batch.extend(waiting.drain(..n));
                    let bytes = pages(w.message_bytes * n as u64);
                    committer = Committer::Writing(sim.io(Op::Write, head, bytes)?);
                    head += bytes;
                }
                let Some(e) = sim.next() else { break };
                match (e, &committer) {
                    (Event::Io(done), Committer::Writing(id)) if done.ids.contains(id) => {
                        committer = Committer::Flushing(sim.flush()?);
                    }
                    (Event::Io(done), Committer::Flushing(id)) if done.ids.contains(id) => {
                        let now = sim.now();
                        let n = batch.len() as u64;
                        for (i, arrived) in batch.drain(..).enumerate() {
                            let woken = now + (i as u64 + 1) * cpu_ns;
                            latencies.record(woken - arrived);
                            accepted += 1;
                            if started < total {
                                started += 1;
                                if woken == now {
                                    waiting.push_back(now);
                                } else {
                                    sim.events.at(woken, Event::Cpu(woken));
                                }
                            }
                        }
                        committer = if cpu_ns == 0 {
                            Committer::Idle
                        } else {
                            // After the sessions it woke: they were scheduled first.
                            sim.events.at(now + n * cpu_ns, Event::Cpu(COMMITTER_DONE));
                            Committer::Waking
                        };
                    }
                    (Event::Cpu(COMMITTER_DONE), _) => committer = Committer::Idle,
                    (Event::Cpu(arrived), _) => waiting.push_back(arrived),
                    (Event::Io(_), _) => {}
                }
            }
        }
        _ => {
            // A file per message: create and write it (`message_cpu_ns` on one of `cpus`
            // cores), its data where the allocator puts it, one after another; then its
            // fsync, which ext4 serves with a journal commit carrying the new file. The
            // journal commits one transaction at a time, every fsync waiting at that moment
            // joining it (jbd2's batching). Without a journal each fsync writes the shared
            // metadata blocks itself (`unjournaled`). A CPU tag is the message's arrival.
            let mut cpu_free: Vec<Nanos> = vec![0; w.cpus.max(1) as usize];
            let mut on_cpu = |sim: &mut Sim, arrived: Nanos| {
                let (slot, free) = cpu_free
                    .iter_mut()
                    .enumerate()
                    .min_by_key(|(_, f)| **f)
                    .map(|(i, f)| (i, *f))
                    .unwrap_or((0, 0));
                let end = free.max(sim.now()) + cpu_ns;
                cpu_free[slot] = end;
                sim.events.at(end, Event::Cpu(arrived));
            };
            for _ in 0..first {
                on_cpu(&mut sim, 0);
            }
            let mut alloc = DATA_START;
            // Data writes in flight: request id -> arrival.
            let mut data: HashMap<u64, Nanos> = HashMap::new();
            let mut fsyncs: Vec<Nanos> = Vec::new();
            // The journal's commit in flight, with the fsyncs it carries.
            let mut commits: Vec<(Commit, u64, Vec<Nanos>)> = Vec::new();
            let mut unjournaled = unjournaled::Unjournaled::default();
            while let Some(e) = sim.next() {
                match e {
                    Event::Cpu(arrived) => {
                        let bytes = pages(w.message_bytes);
                        if sim.journaled {
                            data.insert(sim.io(Op::Write, alloc, bytes)?, arrived);
                        } else {
                            unjournaled.create(&mut sim, arrived, alloc, bytes)?;
                        }
                        alloc += bytes;
                    }
                    Event::Io(done) if !sim.journaled => {
                        let now = sim.now();
                        for arrived in unjournaled.done(&mut sim, &done)? {
                            latencies.record(now - arrived);
                            accepted += 1;
                            if started < total {
                                started += 1;
                                on_cpu(&mut sim, now);
                            }
                        }
                    }
                    Event::Io(done) => {
                        for id in &done.ids {
                            if let Some(arrived) = data.remove(id) {
                                fsyncs.push(arrived);
                            }
                        }
                        let mut i = 0;
                        while i < commits.len() {
                            let (stage, id, _) = commits[i];
                            if !done.ids.contains(&id) {
                                i += 1;
                            } else if let Some((stage, id)) = stage.advance(&mut sim)? {
                                (commits[i].0, commits[i].1) = (stage, id);
                                i += 1;
                            } else {
                                let now = sim.now();
                                for arrived in commits.swap_remove(i).2 {
                                    latencies.record(now - arrived);
                                    accepted += 1;
                                    if started < total {
                                        started += 1;
                                        on_cpu(&mut sim, now);
                                    }
                                }
                            }
                        }
                    }
                }
                if commits.is_empty() && !fsyncs.is_empty() {
                    let members = std::mem::take(&mut fsyncs);
                    let blocks = FILE_JOURNAL_BLOCKS * members.len() as u64;
                    let (stage, id) = Commit::start(&mut sim, blocks)?;
                    commits.push((stage, id, members));
                }
            }
        }
    }
    if accepted != total {
        return Err(SimError::Model(format!(
            "{}: {accepted} of {total} messages accepted",
            w.name
        )));
    }
    Ok(sim.ended(total * w.message_bytes, total, latencies))
}

/// Deletes the message `distance` messages from the end of a mailbox of `messages`.
pub(crate) fn delete(s: &Scenario, w: &Workload, seed: u64) -> Result<Run, SimError> {
    let mut sim = Sim::new(s, seed)?;
    let size = w.message_bytes;
    let victim = DATA_START + (w.messages - 1 - w.distance) * size;
    let mut moved = 0u64;
    let mut commit: Option<(Commit, u64)> = None;
    match w.mode {
        Some(MailMode::Mbox) => {
            // Every message behind the victim moves up by one. The tail is read from the
            // device through read-ahead (a window of chunks ahead of the reader), copied to
            // user space and back into the page cache, `message_bytes` earlier; `fsync`
            // then writes it all and commits the truncation.
            let tail = w.distance * size;
            let chunks: Vec<(u64, u64)> = (0..tail.div_ceil(MOVE_CHUNK))
                .map(|i| {
                    let done = i * MOVE_CHUNK;
                    (victim + size + done, (tail - done).min(MOVE_CHUNK))
                })
                .collect();
            let window = (s.readahead.max_pages * PAGE).div_ceil(MOVE_CHUNK).max(1);
            let cpu = &s.cpu;
            let copy_ns = |bytes: u64| {
                let p = bytes.div_ceil(PAGE) as f64;
                let per_page =
                    2.0 * (cpu.memory_ns_per_page + cpu.page_lookup_ns) + cpu.write_page_ns;
                (2.0 * cpu.syscall_ns + p * per_page) as Nanos
            };
            let mut reads: HashMap<u64, usize> = HashMap::new();
            let mut next_read = 0usize;
            let mut copied = 0usize;
            let mut cpu_free: Nanos = 0;
            let mut writes = 0usize;
            while next_read < chunks.len() && (next_read as u64) < window {
                let (at, n) = chunks[next_read];
                reads.insert(sim.io(Op::Read, at, n)?, next_read);
                next_read += 1;
            }
            // The truncation frees the mbox's last message and costs its caller (the
            // discard it waits for, on a file system without a journal mounted with
            // online discard); `fsync` follows it.
            let truncate_ns = s.writeback.truncate_ns(size);
            if chunks.is_empty() {
                sim.events
                    .at(sim.now() + truncate_ns, Event::Cpu(TRUNCATED));
            }
            while let Some(e) = sim.next() {
                match e {
                    Event::Io(done) => {
                        // Merged neighbours complete together.
                        let read: Vec<usize> =
                            done.ids.iter().filter_map(|id| reads.remove(id)).collect();
                        if !read.is_empty() {
                            for chunk in read {
                                let n = chunks[chunk].1;
                                moved += n;
                                cpu_free = cpu_free.max(sim.now()) + copy_ns(n);
                                sim.events.at(cpu_free, Event::Cpu(chunk as u64));
                            }
                            continue;
                        }
                        if let Some((stage, id)) = commit
                            && done.ids.contains(&id)
                        {
                            commit = stage.advance(&mut sim)?;
                            continue;
                        }
                        // Writes of the moved tail.
                        writes -= done.ids.len();
                        if writes == 0 && copied == chunks.len() {
                            commit = Some(Commit::start(&mut sim, FILE_JOURNAL_BLOCKS)?);
                        }
                    }
                    Event::Cpu(TRUNCATED) => {
                        // `fsync`: the moved tail's dirty pages, then the commit.
                        for &(at, n) in &chunks {
                            sim.io(Op::Write, at - size, n)?;
                            moved += n;
                            writes += 1;
                        }
                        if chunks.is_empty() {
                            commit = Some(Commit::start(&mut sim, FILE_JOURNAL_BLOCKS)?);
                        }
                    }
                    Event::Cpu(_) => {
                        // The reader moved on: read-ahead keeps its window ahead of it.
                        copied += 1;
                        if next_read < chunks.len() {
                            let (at, n) = chunks[next_read];
                            reads.insert(sim.io(Op::Read, at, n)?, next_read);
                            next_read += 1;
                        }
                        if copied == chunks.len() {
                            sim.events
                                .at(sim.now() + truncate_ns, Event::Cpu(TRUNCATED));
                        }
                    }
                }
            }
        }
        _ => {
            // mailstow: the message's mark appended to the folder's log, then `fdatasync`:
            // the page, and a commit for the log's new size.
            let mark = sim.io(Op::Write, victim - victim % PAGE, PAGE)?;
            moved += PAGE;
            while let Some(e) = sim.next() {
                let Event::Io(done) = e else { continue };
                if done.ids.contains(&mark) {
                    commit = Some(Commit::start(&mut sim, 1)?);
                } else if let Some((stage, id)) = commit
                    && done.ids.contains(&id)
                {
                    commit = stage.advance(&mut sim)?;
                }
            }
        }
    }
    let mut latencies = Latencies::new();
    latencies.record(sim.now());
    let requests = sim.requests;
    Ok(sim.ended(moved, requests, latencies))
}
