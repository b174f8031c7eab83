//! The mail file system's striping (docs/mailfs.md; the EMFS thesis's chapter 4 sweeps):
//! one program writes or reads a file whose blocks are spread round-robin over `accounts`
//! IMAP accounts, each with `connections` sessions running one command at a time.
//!
//! Every message costs the client CPU (the mount: hashing, sealing, base64, FUSE), the
//! client's link and a latency each way, and the server CPU (per command and per wire
//! byte). The client and the servers either share one machine's cores (the loopback runs
//! of `mailstow sim validate`) or each have their own (accounts elsewhere).
//!
//! A write is the mount's (docs/mailfs.md 5): the create (a directory message to every
//! account), the blocks uploaded behind the writer in batches of one per connection, then
//! at fsync the dirty entry (every account), the blocks not yet sent, the clean entry. A
//! read is a fresh mount's with empty caches: each read fetches the blocks it needs and
//! read-ahead keeps `readahead_blocks` more in flight.

use std::collections::{BTreeSet, VecDeque};

use des::{Latencies, Nanos, Scheduler, Station};
use sim_models::Op;

use crate::error::SimError;
use crate::report::Run;
use crate::scenario::Workload;
pub use crate::scenario::mailfs_params::{ACCOUNTS_MAX, CONNECTIONS_MAX, CORES_MAX, MailfsParams};

/// Blocks in one run (a 16 TiB file of 16 MiB blocks is 1 Mi).
pub const BLOCKS_MAX: u64 = 4 << 20;
/// A command or an acknowledgement on the wire.
const CONTROL_BYTES: u64 = 128;
/// The RFC 5322 header around every envelope.
const MESSAGE_HEADER_BYTES: u64 = 400;
/// What the mount's write-behind sends at once, at least and at most (`upload_batch`).
const BATCH_MIN: u64 = 4;
const BATCH_MAX: u64 = 64;
/// Bytes of background uploads one file may have in flight (`UPLOAD_BYTES_IN_FLIGHT_MAX`).
const UPLOAD_BYTES_IN_FLIGHT_MAX: u64 = 128 << 20;

impl MailfsParams {
    /// Time for `bytes` at `mb_s` (0: no limit).
    fn wire_ns(mb_s: f64, bytes: u64) -> Nanos {
        if mb_s == 0.0 {
            return 0;
        }
        (bytes as f64 / (mb_s * 1e6) * 1e9).round() as Nanos
    }

    fn on_wire(&self, envelope: u64) -> u64 {
        (envelope as f64 * self.wire_ratio).round() as u64 + MESSAGE_HEADER_BYTES
    }
}

/// Cores as a queueing station: jobs wait first come, first served.
struct Cores {
    station: Station,
    waiting: VecDeque<(Nanos, Ev)>,
}

impl Cores {
    fn new(name: &str, n: u32) -> Cores {
        Cores {
            station: Station::new(name, n),
            waiting: VecDeque::new(),
        }
    }

    /// A free core takes the job at the head of the line now: `ns` of work, then `then`.
    fn start(&mut self, sched: &mut Scheduler<Ev>, pool: usize, ns: Nanos, then: Ev) {
        let now = sched.now();
        self.station.dequeue(now);
        self.station.start(now);
        sched.at(
            now + ns,
            Ev::CpuDone {
                pool,
                then: Box::new(then),
            },
        );
    }
}

const CLIENT: usize = 0;
const SERVER: usize = 1;

#[derive(Debug)]
enum Ev {
    /// A core finished `ns` of work; `then` follows.
    CpuDone { pool: usize, then: Box<Ev> },
    /// Message `id` reached its next stage.
    Msg { id: usize, stage: Stage },
    /// The program finished its part of record `record`.
    Program { record: u64 },
    /// The file is open (or created, but for its directory messages).
    Opened,
    /// Message `id`'s session has made its login round trips: the server's work follows.
    Connected { id: usize, pool: usize, ns: Nanos },
}

#[derive(Debug, Clone, Copy)]
enum Stage {
    /// The client's CPU for it is done: on to the link.
    Prepared,
    /// At the server.
    Arrived,
    /// The server's CPU for it is done: the reply goes back.
    Served,
    /// The reply is at the client.
    Replied,
    /// The client's CPU after the reply is done; the session is free.
    Done,
}

#[derive(Debug, Clone, Copy)]
enum Direction {
    /// Client to server.
    Up,
    Down,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Purpose {
    Metadata,
    Upload { batch: usize },
    Fetch { block: u64 },
}

struct Message {
    account: usize,
    /// Its session logs in first (server CPU and round trips before the command).
    connecting: bool,
    up_bytes: u64,
    down_bytes: u64,
    client_before_ns: Nanos,
    server_ns: Nanos,
    client_after_ns: Nanos,
    purpose: Purpose,
}

impl Message {
    /// An APPEND of an envelope of `len` bytes; `client_extra_ns` on top of a block's
    /// client cost (a directory's encoding).
    fn append(
        p: &MailfsParams,
        account: usize,
        len: u64,
        client_extra_ns: f64,
        purpose: Purpose,
    ) -> Message {
        let up = p.on_wire(len);
        Message {
            account,
            connecting: false,
            up_bytes: up,
            down_bytes: CONTROL_BYTES,
            client_before_ns: ns(p.client_write_message_ns
                + client_extra_ns
                + p.client_write_ns_per_byte * len as f64),
            server_ns: ns(p.server_append_ns + p.server_append_ns_per_byte * up as f64),
            client_after_ns: 0,
            purpose,
        }
    }

    /// A FETCH of block `block`, whose envelope is `len` bytes.
    fn fetch(p: &MailfsParams, account: usize, len: u64, block: u64) -> Message {
        let down = p.on_wire(len);
        Message {
            account,
            connecting: false,
            up_bytes: CONTROL_BYTES,
            down_bytes: down,
            client_before_ns: 0,
            server_ns: ns(p.server_fetch_ns + p.server_fetch_ns_per_byte * down as f64),
            client_after_ns: ns(p.client_read_message_ns + p.client_read_ns_per_byte * len as f64),
            purpose: Purpose::Fetch { block },
        }
    }
}

fn ns(x: f64) -> Nanos {
    x.round().max(0.0) as Nanos
}

/// What a write is waiting for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Create,
    Writing,
    /// fsync: the batches in flight land.
    Settling,
    Dirty,
    Tail,
    Clean,
    Finished,
}

struct Sim<'a> {
    p: &'a MailfsParams,
    w: &'a Workload,
    sched: Scheduler<Ev>,
    pools: Vec<Cores>,
    messages: Vec<Message>,
    /// Per account: idle sessions, sessions not yet logged in, messages waiting for one.
    idle: Vec<u32>,
    unopened: Vec<u32>,
    queued: Vec<VecDeque<usize>>,
    up_free_at: Nanos,
    down_free_at: Nanos,
    /// Per account: when its own link is free, each way.
    account_up_free_at: Vec<Nanos>,
    account_down_free_at: Vec<Nanos>,
    /// Messages of the current phase (metadata, tail) still out.
    phase_left: usize,
    phase: Phase,
    /// Write: blocks written whole and not yet sent; messages left per batch.
    ready: Vec<u64>,
    batches: Vec<usize>,
    batches_in_flight: usize,
    waiting_for_batch: Option<u64>,
    /// Read: blocks asked for, blocks arrived, the record waiting for its blocks.
    asked: BTreeSet<u64>,
    arrived: BTreeSet<u64>,
    reading: Option<u64>,
    record_started: Nanos,
    latencies: Latencies,
    records: u64,
    blocks: u64,
    /// Write: blocks handed to uploads so far (they go in order).
    sent: u64,
}

/// How long the workload takes under `p`, in seconds (for `mailstow sim validate`).
pub fn seconds(p: &MailfsParams, w: &Workload) -> Result<f64, SimError> {
    run(p, w).map(|r| r.seconds)
}

pub(crate) fn run(p: &MailfsParams, w: &Workload) -> Result<Run, SimError> {
    p.check().map_err(SimError::Scenario)?;
    let blocks = w.bytes.div_ceil(p.block_bytes);
    if blocks > BLOCKS_MAX {
        return Err(SimError::Scenario(format!(
            "{}: more than {BLOCKS_MAX} blocks",
            w.name
        )));
    }
    let accounts = p.accounts as usize;
    let mut pools = vec![Cores::new("client CPU", p.client_cores)];
    if !p.shared_cores {
        pools.push(Cores::new("server CPU", p.server_cores));
    }
    let mut s = Sim {
        p,
        w,
        sched: Scheduler::new(),
        pools,
        messages: Vec::new(),
        idle: vec![p.sessions_open.min(p.connections); accounts],
        unopened: vec![p.connections - p.sessions_open.min(p.connections); accounts],
        queued: vec![VecDeque::new(); accounts],
        up_free_at: 0,
        down_free_at: 0,
        account_up_free_at: vec![0; accounts],
        account_down_free_at: vec![0; accounts],
        phase_left: 0,
        phase: Phase::Create,
        ready: Vec::new(),
        batches: Vec::new(),
        batches_in_flight: 0,
        waiting_for_batch: None,
        asked: BTreeSet::new(),
        arrived: BTreeSet::new(),
        reading: None,
        record_started: 0,
        latencies: Latencies::new(),
        records: w.bytes.div_ceil(w.record_bytes),
        blocks,
        sent: 0,
    };
    let opened = ns(match w.op {
        Op::Write => p.file_write_ns,
        Op::Read => p.file_read_ns,
    });
    s.sched.at(opened, Ev::Opened);
    while let Some(ev) = s.sched.pop() {
        s.handle(ev);
    }
    if w.op == Op::Write && s.phase != Phase::Finished {
        return Err(SimError::Model(format!(
            "{}: the write did not finish",
            w.name
        )));
    }
    let end = s.sched.now();
    let reports: Vec<_> = s.pools.iter_mut().map(|c| c.station.report(end)).collect();
    let busiest = reports
        .iter()
        .max_by(|a, b| a.utilisation.total_cmp(&b.utilisation))
        .cloned()
        .ok_or_else(|| SimError::Model(format!("{}: no cores", w.name)))?;
    let mut run = Run {
        seconds: end as f64 / 1e9,
        bytes: w.bytes,
        requests: s.records,
        latencies: s.latencies,
        utilisation: busiest.utilisation,
        mean_queue: busiest.mean_queue,
        merges: 0,
        hit_ratio: 0.0,
        bottleneck: None,
    };
    run.bottleneck = Some(if busiest.utilisation >= 0.9 {
        format!(
            "{} ({:.0} % busy)",
            busiest.name,
            busiest.utilisation * 100.0
        )
    } else {
        format!(
            "round trips: {} ({:.0} % busy) is not saturated; more connections or read-ahead would overlap more",
            busiest.name,
            busiest.utilisation * 100.0
        )
    });
    Ok(run)
}

impl Sim<'_> {
    fn server_pool(&self) -> usize {
        if self.p.shared_cores { CLIENT } else { SERVER }
    }

    /// Runs `ns` of work on `pool`, then `then`.
    fn cpu(&mut self, pool: usize, ns: Nanos, then: Ev) {
        let now = self.sched.now();
        let cores = &mut self.pools[pool];
        cores.station.enqueue(now);
        if cores.station.idle_server() {
            cores.start(&mut self.sched, pool, ns, then);
        } else {
            cores.waiting.push_back((ns, then));
        }
    }

    fn send(&mut self, m: Message) {
        let id = self.messages.len();
        let account = m.account;
        self.messages.push(m);
        if self.idle[account] > 0 {
            self.idle[account] -= 1;
            self.start(id);
        } else if self.unopened[account] > 0 {
            self.unopened[account] -= 1;
            self.messages[id].connecting = true;
            self.start(id);
        } else {
            self.queued[account].push_back(id);
        }
    }

    fn start(&mut self, id: usize) {
        let ns = self.messages[id].client_before_ns;
        self.cpu(
            CLIENT,
            ns,
            Ev::Msg {
                id,
                stage: Stage::Prepared,
            },
        );
    }

    /// A directory message to every account (the create, the dirty and the clean entry).
    fn metadata_round(&mut self) {
        self.phase_left = self.p.accounts as usize;
        for a in 0..self.p.accounts as usize {
            let m = Message::append(
                self.p,
                a,
                self.p.metadata_bytes,
                self.p.client_metadata_ns,
                Purpose::Metadata,
            );
            self.send(m);
        }
    }

    fn block_len(&self, block: u64) -> u64 {
        (self.w.bytes - block * self.p.block_bytes).min(self.p.block_bytes)
    }

    fn upload(&mut self, blocks: Vec<u64>, batch: usize) {
        let p = self.p;
        for b in blocks {
            let account = (b % u64::from(p.accounts)) as usize;
            let m = Message::append(
                p,
                account,
                self.block_len(b),
                0.0,
                Purpose::Upload { batch },
            );
            self.send(m);
        }
    }

    fn fetch(&mut self, block: u64) {
        if block >= self.blocks || !self.asked.insert(block) {
            return;
        }
        let account = (block % u64::from(self.p.accounts)) as usize;
        let m = Message::fetch(self.p, account, self.block_len(block), block);
        self.send(m);
    }

    fn batch_size(&self) -> u64 {
        (u64::from(self.p.accounts) * u64::from(self.p.connections)).clamp(BATCH_MIN, BATCH_MAX)
    }

    fn batches_max(&self) -> usize {
        (UPLOAD_BYTES_IN_FLIGHT_MAX / (self.batch_size() * self.p.block_bytes)).clamp(2, 32)
            as usize
    }

    fn record_len(&self, record: u64) -> u64 {
        (self.w.bytes - record * self.w.record_bytes).min(self.w.record_bytes)
    }

    /// The program writes record `record` (its system call, then the blocks it filled
    /// wait for write-behind).
    fn write_record(&mut self, record: u64) {
        self.record_started = self.sched.now();
        let ns = ns(self.p.program_write_ns_per_byte * self.record_len(record) as f64);
        self.cpu(CLIENT, ns, Ev::Program { record });
    }

    fn written(&mut self, record: u64) {
        let now = self.sched.now();
        self.latencies.record(now - self.record_started);
        let end = record * self.w.record_bytes + self.record_len(record);
        // Blocks now written whole.
        let full = end / self.p.block_bytes;
        let have = self.ready.last().map_or(0, |b| b + 1).max(self.sent);
        for b in have..full {
            self.ready.push(b);
        }
        let batch = self.batch_size() as usize;
        while self.ready.len() >= batch {
            let blocks: Vec<u64> = self.ready.drain(..batch).collect();
            self.start_batch(blocks);
        }
        if record + 1 < self.records {
            if self.batches_in_flight > self.batches_max() {
                self.waiting_for_batch = Some(record + 1);
            } else {
                self.write_record(record + 1);
            }
        } else {
            self.phase = Phase::Settling;
            self.after_settling();
        }
    }

    fn start_batch(&mut self, blocks: Vec<u64>) {
        let id = self.batches.len();
        self.sent = self.sent.max(blocks.last().map_or(0, |b| b + 1));
        self.batches.push(blocks.len());
        self.batches_in_flight += 1;
        self.upload(blocks, id);
    }

    fn after_settling(&mut self) {
        if self.phase == Phase::Settling && self.batches_in_flight == 0 {
            self.phase = Phase::Dirty;
            self.metadata_round();
        }
    }

    fn read_record(&mut self, record: u64) {
        self.record_started = self.sched.now();
        self.reading = Some(record);
        let o = record * self.w.record_bytes;
        let first = o / self.p.block_bytes;
        let last = (o + self.record_len(record) - 1) / self.p.block_bytes;
        for b in first..=last {
            self.fetch(b);
        }
        for b in last + 1..=last + u64::from(self.p.readahead_blocks) {
            self.fetch(b);
        }
        self.maybe_reply();
    }

    /// The record being read has all its blocks: the program copies it.
    fn maybe_reply(&mut self) {
        let Some(record) = self.reading else { return };
        let o = record * self.w.record_bytes;
        let first = o / self.p.block_bytes;
        let last = (o + self.record_len(record) - 1) / self.p.block_bytes;
        if (first..=last).all(|b| self.arrived.contains(&b)) {
            self.reading = None;
            let ns = ns(self.p.program_read_ns_per_byte * self.record_len(record) as f64);
            self.cpu(CLIENT, ns, Ev::Program { record });
        }
    }

    fn handle(&mut self, ev: Ev) {
        let now = self.sched.now();
        match ev {
            Ev::CpuDone { pool, then } => {
                let cores = &mut self.pools[pool];
                cores.station.finish(now);
                if let Some((ns, next)) = cores.waiting.pop_front() {
                    cores.start(&mut self.sched, pool, ns, next);
                }
                self.handle(*then);
            }
            Ev::Msg { id, stage } => self.stage(id, stage),
            Ev::Connected { id, pool, ns } => self.cpu(
                pool,
                ns,
                Ev::Msg {
                    id,
                    stage: Stage::Served,
                },
            ),
            Ev::Opened => match self.w.op {
                Op::Write => self.metadata_round(),
                Op::Read => self.read_record(0),
            },
            Ev::Program { record } => match self.w.op {
                Op::Write => self.written(record),
                Op::Read => {
                    self.latencies.record(now - self.record_started);
                    if record + 1 < self.records {
                        self.read_record(record + 1);
                    }
                }
            },
        }
    }

    /// Message `id` crosses the client's link and its account's, each a FIFO at its
    /// bandwidth, one way; when it has left both.
    fn transfer(&mut self, id: usize, way: Direction) -> Nanos {
        let now = self.sched.now();
        let m = &self.messages[id];
        let (bytes, a) = match way {
            Direction::Up => (m.up_bytes, m.account),
            Direction::Down => (m.down_bytes, m.account),
        };
        let (client, account) = match way {
            Direction::Up => (&mut self.up_free_at, &mut self.account_up_free_at[a]),
            Direction::Down => (&mut self.down_free_at, &mut self.account_down_free_at[a]),
        };
        *client = (*client).max(now) + MailfsParams::wire_ns(self.p.link_mb_s, bytes);
        *account = (*account).max(now) + MailfsParams::wire_ns(self.p.account_mb_s, bytes);
        (*client).max(*account)
    }

    fn stage(&mut self, id: usize, stage: Stage) {
        let now = self.sched.now();
        let latency = ns(self.p.latency_us * 1e3);
        match stage {
            Stage::Prepared => {
                let sent = self.transfer(id, Direction::Up);
                self.sched.at(
                    sent + latency,
                    Ev::Msg {
                        id,
                        stage: Stage::Arrived,
                    },
                );
            }
            Stage::Arrived => {
                let m = &mut self.messages[id];
                let mut work = m.server_ns;
                if m.connecting {
                    // The login's round trips before the command's own.
                    m.connecting = false;
                    work += ns(self.p.connect_ns);
                    let trips = 2 * latency * Nanos::from(self.p.connect_round_trips);
                    let pool = self.server_pool();
                    self.sched
                        .at(now + trips, Ev::Connected { id, pool, ns: work });
                    return;
                }
                let pool = self.server_pool();
                self.cpu(
                    pool,
                    work,
                    Ev::Msg {
                        id,
                        stage: Stage::Served,
                    },
                );
            }
            Stage::Served => {
                let sent = self.transfer(id, Direction::Down);
                self.sched.at(
                    sent + latency,
                    Ev::Msg {
                        id,
                        stage: Stage::Replied,
                    },
                );
            }
            Stage::Replied => {
                // The reply is decoded on the session's thread, which holds the session.
                let ns = self.messages[id].client_after_ns;
                self.cpu(
                    CLIENT,
                    ns,
                    Ev::Msg {
                        id,
                        stage: Stage::Done,
                    },
                );
            }
            Stage::Done => {
                let account = self.messages[id].account;
                match self.queued[account].pop_front() {
                    Some(next) => self.start(next),
                    None => self.idle[account] += 1,
                }
                self.done(id);
            }
        }
    }

    fn done(&mut self, id: usize) {
        match self.messages[id].purpose {
            Purpose::Fetch { block } => {
                self.arrived.insert(block);
                self.maybe_reply();
            }
            Purpose::Upload { batch } => {
                self.batches[batch] -= 1;
                if self.batches[batch] == 0 {
                    if self.phase == Phase::Tail {
                        self.phase = Phase::Clean;
                        self.metadata_round();
                        return;
                    }
                    self.batches_in_flight -= 1;
                    if let Some(next) = self.waiting_for_batch
                        && self.batches_in_flight <= self.batches_max()
                    {
                        self.waiting_for_batch = None;
                        self.write_record(next);
                    }
                    self.after_settling();
                }
            }
            Purpose::Metadata => {
                self.phase_left -= 1;
                if self.phase_left > 0 {
                    return;
                }
                match self.phase {
                    Phase::Create => {
                        self.phase = Phase::Writing;
                        self.write_record(0);
                    }
                    Phase::Dirty => {
                        // The blocks not sent behind the writer: the last batch, unfilled,
                        // and the last block if partial.
                        let mut tail = std::mem::take(&mut self.ready);
                        let end = self.blocks;
                        let from = tail.last().map_or(self.sent, |b| b + 1);
                        tail.extend(from..end);
                        if tail.is_empty() {
                            self.phase = Phase::Clean;
                            self.metadata_round();
                        } else {
                            self.phase = Phase::Tail;
                            let id = self.batches.len();
                            self.batches.push(tail.len());
                            self.upload(tail, id);
                        }
                    }
                    Phase::Clean => self.phase = Phase::Finished,
                    _ => {}
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::WorkloadKind;

    /// Costs, latency and link all zero: each test turns on what it checks.
    fn free() -> MailfsParams {
        MailfsParams {
            latency_us: 0.0,
            program_write_ns_per_byte: 0.0,
            program_read_ns_per_byte: 0.0,
            file_write_ns: 0.0,
            file_read_ns: 0.0,
            connect_ns: 0.0,
            client_write_message_ns: 0.0,
            client_write_ns_per_byte: 0.0,
            client_read_message_ns: 0.0,
            client_read_ns_per_byte: 0.0,
            client_metadata_ns: 0.0,
            server_append_ns: 0.0,
            server_append_ns_per_byte: 0.0,
            server_fetch_ns: 0.0,
            server_fetch_ns_per_byte: 0.0,
            ..MailfsParams::default()
        }
    }

    fn workload(op: Op, bytes: u64) -> Workload {
        Workload {
            op,
            bytes,
            record_bytes: bytes.min(1 << 20),
            ..Workload::new("t", WorkloadKind::Mailfs)
        }
    }

    fn secs(p: &MailfsParams, op: Op, bytes: u64) -> f64 {
        seconds(p, &workload(op, bytes)).unwrap()
    }

    #[test]
    fn a_small_write_is_four_round_trips_and_a_small_read_one() {
        // Create, dirty entry, the block, clean entry; reading is one FETCH.
        let p = MailfsParams {
            latency_us: 100.0,
            ..free()
        };
        assert!((secs(&p, Op::Write, 32 << 10) - 8.0 * 100e-6).abs() < 1e-9);
        assert!((secs(&p, Op::Read, 32 << 10) - 2.0 * 100e-6).abs() < 1e-9);
    }

    #[test]
    fn round_trips_overlap_over_connections_and_accounts() {
        let p = MailfsParams {
            latency_us: 100.0,
            accounts: 1,
            connections: 1,
            readahead_blocks: 8,
            ..free()
        };
        // 32 blocks over one session: one after another.
        let one = secs(&p, Op::Read, 32 << 20);
        assert!((one - 32.0 * 200e-6).abs() < 1e-6, "{one}");
        let two = secs(
            &MailfsParams {
                connections: 2,
                ..p.clone()
            },
            Op::Read,
            32 << 20,
        );
        let four = secs(
            &MailfsParams {
                accounts: 4,
                connections: 2,
                ..p
            },
            Op::Read,
            32 << 20,
        );
        assert!(two < one * 0.6 && four < two * 0.6, "{one} {two} {four}");
    }

    #[test]
    fn with_every_cost_on_the_cores_a_large_file_takes_its_cpu_over_the_cores() {
        let p = MailfsParams {
            client_write_ns_per_byte: 1.0,
            server_append_ns_per_byte: 1.0,
            client_read_ns_per_byte: 1.0,
            server_fetch_ns_per_byte: 1.0,
            connections: 8,
            client_cores: 2,
            ..free()
        };
        let bytes = 256u64 << 20;
        let wire = p.on_wire(1 << 20) as f64 / (1 << 20) as f64;
        let cpu = bytes as f64 * (1.0 + wire) * 1e-9;
        for op in [Op::Write, Op::Read] {
            let t = secs(&p, op, bytes);
            assert!(
                (t - cpu / 2.0).abs() / (cpu / 2.0) < 0.05,
                "{op:?}: {t} against {}",
                cpu / 2.0
            );
        }
        // Servers of their own take their share off the client's cores.
        let apart = MailfsParams {
            shared_cores: false,
            server_cores: 2,
            ..p
        };
        assert!(secs(&apart, Op::Write, bytes) < cpu / 2.0 * 0.6);
    }

    #[test]
    fn a_slow_link_bounds_large_files() {
        let p = MailfsParams {
            link_mb_s: 10.0,
            ..free()
        };
        let bytes = 32u64 << 20;
        let on_wire = (bytes / p.block_bytes) as f64 * p.on_wire(p.block_bytes) as f64;
        let t = secs(&p, Op::Write, bytes);
        assert!((t - on_wire / 10e6).abs() / (on_wire / 10e6) < 0.01, "{t}");
    }

    #[test]
    fn slow_accounts_are_what_striping_is_for() {
        // Each account 2 MB/s, the client's link 10: wider stripes go faster until the
        // client's link is full.
        let p = MailfsParams {
            account_mb_s: 2.0,
            link_mb_s: 10.0,
            ..free()
        };
        let t = |accounts| {
            secs(
                &MailfsParams {
                    accounts,
                    ..p.clone()
                },
                Op::Read,
                32 << 20,
            )
        };
        let (one, two, four, eight) = (t(1), t(2), t(4), t(8));
        assert!(
            (one / two - 2.0).abs() < 0.1 && (two / four - 2.0).abs() < 0.15,
            "{one} {two} {four}"
        );
        let link_bound = 32.0 * p.on_wire(1 << 20) as f64 / 10e6;
        assert!(
            (eight - link_bound).abs() / link_bound < 0.05,
            "{eight} against {link_bound}"
        );
    }

    #[test]
    fn limits_are_checked() {
        for bad in [
            MailfsParams {
                accounts: 0,
                ..free()
            },
            MailfsParams {
                connections: 65,
                ..free()
            },
            MailfsParams {
                block_bytes: 3000,
                ..free()
            },
            MailfsParams {
                latency_us: f64::NAN,
                ..free()
            },
            MailfsParams {
                server_append_ns: 1e300,
                ..free()
            },
            MailfsParams {
                link_mb_s: 1e-300,
                ..free()
            },
            MailfsParams {
                wire_ratio: 0.5,
                ..free()
            },
        ] {
            assert!(seconds(&bad, &workload(Op::Read, 1 << 20)).is_err());
        }
    }
}
