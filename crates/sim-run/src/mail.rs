//! mailstow's own storage as workloads on the block layer (docs/simulator.md 5b): accepting
//! mail (FlashQ's group commit against a file per message) and deleting it (a one-page mark
//! against rewriting an mbox's tail). Device writes complete durably (no write cache).

use std::collections::VecDeque;

use des::{Latencies, Nanos, Scheduler};
use sim_models::block::BlockLayer;
use sim_models::{Op, Request, SECTOR_BYTES};

use crate::SimError;
use crate::direct::{Run, block_layer};
use crate::scenario::{MailMode, Scenario, Workload};

const PAGE: u64 = 4096;
/// Largest group commit: messages per write.
const BATCH_MAX: usize = 256;
/// The journal's area (file-per-message): its first 128 MiB.
const JOURNAL_BYTES: u64 = 128 << 20;
/// Where mail data starts on the device.
const DATA_START: u64 = 1 << 30;

fn pages(bytes: u64) -> u64 {
    bytes.div_ceil(PAGE) * PAGE
}

/// Submits a write or read of `bytes` at byte `at` as request `id`.
fn submit(
    bl: &mut BlockLayer,
    sim: &mut Scheduler<Request>,
    now: Nanos,
    id: u64,
    op: Op,
    at: u64,
    bytes: u64,
) -> Result<(), SimError> {
    let req = Request::new(
        id,
        op,
        at / SECTOR_BYTES,
        bytes.div_ceil(SECTOR_BYTES).max(1),
        now,
    );
    for d in bl.submit(now, req).map_err(SimError::Model)? {
        sim.at(d.at, d.req);
    }
    Ok(())
}

/// `sessions` writers each deliver a message as soon as the last one was accepted, until
/// `messages` are in.
pub(crate) fn queue(s: &Scenario, w: &Workload, seed: u64) -> Result<Run, SimError> {
    let mut bl = block_layer(s, seed, 1)?;
    let mut sim: Scheduler<Request> = Scheduler::new();
    let mut latencies = Latencies::new();
    let total = w.messages;
    let mut started = 0u64;
    let mut accepted = 0u64;
    // Arrival time of each waiting message (group commit) or of each session's message.
    let mut waiting: VecDeque<Nanos> = VecDeque::new();
    let first = u64::from(w.sessions).min(total);
    started += first;
    let mut next_id = 0u64;
    match w.mode {
        Some(MailMode::GroupCommit) => {
            // The segment's head: batches are appended one after another.
            let mut head = DATA_START;
            let mut in_flight: Option<Vec<Nanos>> = None;
            waiting.extend(std::iter::repeat_n(0, first as usize));
            let mut flush = |now: Nanos,
                             waiting: &mut VecDeque<Nanos>,
                             in_flight: &mut Option<Vec<Nanos>>,
                             bl: &mut BlockLayer,
                             sim: &mut Scheduler<Request>|
             -> Result<(), SimError> {
                if in_flight.is_some() || waiting.is_empty() {
                    return Ok(());
                }
                let n = waiting.len().min(BATCH_MAX);
                let batch: Vec<Nanos> = waiting.drain(..n).collect();
                let bytes = pages(w.message_bytes * n as u64);
                submit(bl, sim, now, next_id, Op::Write, head, bytes)?;
                next_id += 1;
                head += bytes;
                *in_flight = Some(batch);
                Ok(())
            };
            flush(0, &mut waiting, &mut in_flight, &mut bl, &mut sim)?;
            while let Some(done) = sim.pop() {
                let now = sim.now();
                for d in bl.complete(now, &done) {
                    sim.at(d.at, d.req);
                }
                for arrived in in_flight.take().unwrap_or_default() {
                    latencies.record(now - arrived);
                    accepted += 1;
                    // That session's next message.
                    if started < total {
                        started += 1;
                        waiting.push_back(now);
                    }
                }
                flush(now, &mut waiting, &mut in_flight, &mut bl, &mut sim)?;
            }
        }
        _ => {
            // A file per message: its data where the allocator puts it (one after another);
            // once on the device, the file's fsync and then the directory's, each a journal
            // commit. The journal commits one transaction at a time, every fsync waiting at
            // that moment joining it (jbd2's batching): 3 blocks per file, 2 per directory
            // update, plus a descriptor and a commit block.
            let mut alloc = DATA_START;
            let mut journal_head = 0u64;
            // Data writes in flight: request id -> arrival.
            let mut data: std::collections::HashMap<u64, Nanos> = Default::default();
            // Waiting for a commit: (arrival, commits still needed).
            let mut fsyncs: Vec<(Nanos, u8)> = Vec::new();
            let mut committing: Option<(u64, Vec<(Nanos, u8)>)> = None;
            for _ in 0..first {
                let bytes = pages(w.message_bytes);
                submit(&mut bl, &mut sim, 0, next_id, Op::Write, alloc, bytes)?;
                data.insert(next_id, 0);
                next_id += 1;
                alloc += bytes;
            }
            while let Some(done) = sim.pop() {
                let now = sim.now();
                for d in bl.complete(now, &done) {
                    sim.at(d.at, d.req);
                }
                for id in &done.ids {
                    if let Some(arrived) = data.remove(id) {
                        fsyncs.push((arrived, 2));
                        continue;
                    }
                    let Some((_, members)) = committing.take_if(|(c, _)| c == id) else {
                        continue;
                    };
                    for (arrived, left) in members {
                        if left > 1 {
                            fsyncs.push((arrived, left - 1));
                            continue;
                        }
                        latencies.record(now - arrived);
                        accepted += 1;
                        if started < total {
                            started += 1;
                            let bytes = pages(w.message_bytes);
                            submit(&mut bl, &mut sim, now, next_id, Op::Write, alloc, bytes)?;
                            data.insert(next_id, now);
                            next_id += 1;
                            alloc += bytes;
                        }
                    }
                }
                if committing.is_none() && !fsyncs.is_empty() {
                    let members = std::mem::take(&mut fsyncs);
                    let blocks: u64 = 2 + members
                        .iter()
                        .map(|&(_, left)| if left == 2 { 3 } else { 2 })
                        .sum::<u64>();
                    let bytes = (blocks * PAGE).min(JOURNAL_BYTES);
                    if journal_head + bytes > JOURNAL_BYTES {
                        journal_head = 0;
                    }
                    submit(
                        &mut bl,
                        &mut sim,
                        now,
                        next_id,
                        Op::Write,
                        journal_head,
                        bytes,
                    )?;
                    journal_head += bytes;
                    committing = Some((next_id, members));
                    next_id += 1;
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
    let end = sim.now();
    Ok(Run::ended(
        &mut bl,
        end,
        total * w.message_bytes,
        total,
        latencies,
        0.0,
    ))
}

/// Deletes the message `distance` messages from the end of a mailbox of `messages`.
pub(crate) fn delete(s: &Scenario, w: &Workload, seed: u64) -> Result<Run, SimError> {
    let mut bl = block_layer(s, seed, 1)?;
    let mut sim: Scheduler<Request> = Scheduler::new();
    let size = w.message_bytes;
    let victim = DATA_START + (w.messages - 1 - w.distance) * size;
    // The steps, one after another: (read or write, byte, bytes).
    let mut steps: VecDeque<(Op, u64, u64)> = VecDeque::new();
    match w.mode {
        Some(MailMode::Mbox) => {
            // Every message behind the victim moves up by one message: read a chunk, write
            // it `size` earlier; then the truncation's journal commit.
            let tail = w.distance * size;
            let mut done = 0;
            while done < tail {
                let n = (tail - done).min(1 << 20);
                let from = victim + size + done;
                steps.push_back((Op::Read, from, n));
                steps.push_back((Op::Write, from - size, n));
                done += n;
            }
            steps.push_back((Op::Write, 0, 3 * PAGE));
        }
        _ => {
            // mailstow: the message's mark, one page, wherever the message is.
            steps.push_back((Op::Write, victim - victim % PAGE, PAGE));
        }
    }
    let count = steps.len() as u64;
    let mut moved = 0u64;
    let mut id = 0u64;
    if let Some((op, at, n)) = steps.pop_front() {
        submit(&mut bl, &mut sim, 0, id, op, at, n)?;
        moved += n;
    }
    while let Some(done) = sim.pop() {
        let now = sim.now();
        for d in bl.complete(now, &done) {
            sim.at(d.at, d.req);
        }
        if let Some((op, at, n)) = steps.pop_front() {
            id += 1;
            submit(&mut bl, &mut sim, now, id, op, at, n)?;
            moved += n;
        }
    }
    let end = sim.now();
    let mut latencies = Latencies::new();
    latencies.record(end);
    Ok(Run::ended(&mut bl, end, moved, count, latencies, 0.0))
}
