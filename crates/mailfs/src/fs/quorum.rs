//! Writing messages to the members of their groups (docs/mailfs.md 7, "Write quorum" and
//! "Hedged writes"): each message goes at once to as many live members as its quorum asks,
//! those that answered fastest of late; a member that fails is replaced by the next live
//! one, and a member that has taken nothing for the hedge delay is joined by the next one.
//! The write is acknowledged when every message has its quorum; a member still silent then
//! is owed what it did not take through its durable backlog (M6), and its command finishes
//! on its own thread (a late copy is a duplicate readers and reclaim already allow for).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::AtomicUsize;
use std::sync::mpsc;
use std::time::Instant;

use super::*;

/// One message of a quorum write.
#[derive(Clone)]
pub(super) struct Outgoing {
    pub(super) name: MessageName,
    pub(super) payload: Arc<Vec<u8>>,
    /// The accounts that may hold it: its group's members, or every target of a metadata
    /// write.
    pub(super) members: Arc<[usize]>,
    /// Copies it needs before the write is acknowledged.
    pub(super) need: usize,
    /// The block whose plain content `payload` is, for the written-block cache.
    pub(super) cache_as: Option<BlockId>,
}

/// How a quorum write hands messages to members.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Order {
    /// Any order, over each account's streams (blocks and chunks).
    Any,
    /// In order on one stream, each account asked once and given every message from the
    /// first one short of its quorum on: what an account holds is a contiguous range, and
    /// what some account holds is a prefix of the messages (log pages and directories,
    /// whose order is their meaning).
    InOrder,
}

/// What a stream reports to the write that launched it.
enum Report {
    /// These messages are on the account now, with their envelopes when kept for the cache.
    Took {
        launch: usize,
        msgs: Vec<(usize, Vec<u8>)>,
    },
    /// The stream stopped: its list is done, the write returned, or the account failed.
    Ended {
        launch: usize,
        error: Option<String>,
    },
}

/// One account's part of a write.
struct Launch {
    account: usize,
    /// Messages it was given and has not taken yet.
    pending: BTreeSet<usize>,
    /// Its streams still running.
    streams: usize,
    /// When it last took something, or started.
    progress: Instant,
    /// It took nothing for the hedge delay: it no longer counts towards any quorum, and the
    /// messages it holds up went to the next members.
    silent: bool,
}

/// Which members hold each message when a write stops waiting, and why members failed.
pub(super) struct Delivered {
    pub(super) holders: Vec<Vec<usize>>,
    pub(super) failed: Vec<(usize, String)>,
}

impl Fs {
    /// Writes one message to `targets` (docs/mailfs.md 7): acknowledged when the write
    /// quorum of each group it touches has it (strong: every live member, fast: one),
    /// sent first to the members that answered fastest of late. A member that fails or
    /// stays silent past `member_deadline_ms` is marked down and the next live one is
    /// tried, and one silent for the hedge delay is joined by the next; members that do
    /// not take it are owed it through their durable backlogs. Fails only when no member
    /// took it, and then owes nothing, so a failed write never appears later.
    pub(crate) fn put(
        &self,
        targets: &[usize],
        name: MessageName,
        payload: &[u8],
        sealing: &Sealing,
    ) -> Result<(), FsError> {
        self.put_many(targets, &[(name, payload)], sealing)
    }

    /// Writes `msgs` to `targets` as [`Fs::put`] writes each, in that order on every
    /// account, in MULTIAPPENDs of [`APPEND_BATCH_MAX`] (a checkpoint of a thousand
    /// directories is some sixty commands per account, not a thousand). An account that
    /// fails stops there, and what it lacks is owed to it. Fails when a message reached no
    /// member; then it and the messages after it are owed to nobody, and those before it
    /// are owed as `put` would have left them.
    pub(crate) fn put_many(
        &self,
        targets: &[usize],
        msgs: &[(MessageName, &[u8])],
        sealing: &Sealing,
    ) -> Result<(), FsError> {
        if msgs.is_empty() {
            return Ok(());
        }
        let members: Arc<[usize]> = targets.into();
        let need = self.replicas.quorum_of(targets).max(1);
        let outgoing = msgs
            .iter()
            .map(|(name, payload)| Outgoing {
                name: *name,
                payload: Arc::new(payload.to_vec()),
                members: members.clone(),
                need,
                cache_as: None,
            })
            .collect();
        let d = self.put_quorum(outgoing, Order::InOrder, sealing, false);
        let reached = d
            .holders
            .iter()
            .position(|h| h.is_empty())
            .unwrap_or(msgs.len());
        for &t in targets {
            for (m, (name, payload)) in msgs.iter().enumerate().take(reached) {
                if !d.holders[m].contains(&t) {
                    self.replicas.accounts[t]
                        .owe(name, &seal_with(sealing, name, t as u8, payload)?)?;
                }
            }
        }
        if reached == msgs.len() {
            return Ok(());
        }
        let why = d
            .failed
            .iter()
            .map(|(t, e)| format!("{}: {e}", self.replicas.accounts[*t].remote.describe()))
            .collect::<Vec<_>>()
            .join("; ");
        Err(FsError::Unavailable(if why.is_empty() {
            "no replica is up".into()
        } else {
            why
        }))
    }

    /// A message for the members of `group`, with its quorum.
    pub(super) fn outgoing(
        &self,
        name: MessageName,
        group: u8,
        payload: Arc<Vec<u8>>,
        cache_as: Option<BlockId>,
    ) -> Outgoing {
        Outgoing {
            name,
            payload,
            members: self.replicas.groups[group as usize].as_slice().into(),
            need: self.replicas.quorum[group as usize],
            cache_as,
        }
    }

    /// Sends messages to the write quorum of their groups (strong: every member, fast: the
    /// fastest live one), `connections` streams per account, batched into MULTIAPPENDs; a
    /// message short of its quorum (a member failed, or stayed silent for the hedge delay
    /// or past `member_deadline_ms`) goes to the next live members, batched as well, so a
    /// hung member costs one hedge delay (one deadline with `strong`, which waits for every
    /// live member), not one per message. Members that do not get a message are owed it
    /// (M6). Fails when a message reached no member of its group.
    pub(super) fn put_messages(&self, jobs: &[Outgoing]) -> Result<(), FsError> {
        if jobs.is_empty() {
            return Ok(());
        }
        let d = self.put_quorum(jobs.to_vec(), Order::Any, &self.sealing, self.keep_written);
        let mut holders = d.holders;
        let mut written = 0u64;
        for (j, job) in jobs.iter().enumerate() {
            if holders[j].is_empty() {
                // Refused everywhere (not down): each live member once more, alone.
                for &m in job.members.iter() {
                    if !self.replicas.accounts[m].is_up() {
                        continue;
                    }
                    let env = seal_with(&self.sealing, &job.name, m as u8, &job.payload)?;
                    if self.replicas.accounts[m]
                        .append_now(&[(job.name, env)])
                        .is_ok()
                    {
                        holders[j].push(m);
                        break;
                    }
                }
                if holders[j].is_empty() {
                    return Err(FsError::Unavailable(format!(
                        "no member of {:?} took {}",
                        job.members,
                        job.name.render()
                    )));
                }
            }
            for &m in job.members.iter() {
                if !holders[j].contains(&m) {
                    let env = seal_with(&self.sealing, &job.name, m as u8, &job.payload)?;
                    self.replicas.accounts[m].owe(&job.name, &env)?;
                }
            }
            written += job.payload.len() as u64;
            if job.name.kind == MsgKind::Chunk {
                self.stats.chunks_written.fetch_add(1, Ordering::Relaxed);
            }
        }
        self.stats
            .bytes_written
            .fetch_add(written, Ordering::Relaxed);
        Ok(())
    }

    /// Sends `msgs` until each has its quorum, or no live member is left to ask for it
    /// and none is still answering; returns who holds what. Streams still running then
    /// (members that went silent) finish on their own and take nothing new.
    fn put_quorum(
        &self,
        msgs: Vec<Outgoing>,
        order: Order,
        sealing: &Sealing,
        keep_envelopes: bool,
    ) -> Delivered {
        let n = msgs.len();
        let msgs: Arc<[Outgoing]> = msgs.into();
        let (tx, rx) = mpsc::channel::<Report>();
        let stop = Arc::new(AtomicBool::new(false));
        let mut holders: Vec<Vec<usize>> = vec![Vec::new(); n];
        // The launches each message is in flight on.
        let mut inflight: Vec<Vec<usize>> = vec![Vec::new(); n];
        // Members each message was given (any order), or members asked at all (in order):
        // none is asked twice.
        let mut tried: Vec<Vec<usize>> = vec![Vec::new(); if order == Order::Any { n } else { 1 }];
        let mut launches: Vec<Launch> = Vec::new();
        let mut failed: Vec<(usize, String)> = Vec::new();
        loop {
            let plan = self.plan(&msgs, order, &holders, &inflight, &launches, &mut tried);
            for (account, list) in plan {
                let id = launches.len();
                for &m in &list {
                    if inflight[m].iter().any(|&l| launches[l].silent) {
                        self.stats.hedged_writes.fetch_add(1, Ordering::Relaxed);
                    }
                    inflight[m].push(id);
                }
                let streams = match order {
                    Order::Any => self.replicas.connections[account].max(1).min(list.len()),
                    Order::InOrder => 1,
                };
                launches.push(Launch {
                    account,
                    pending: list.iter().copied().collect(),
                    streams,
                    progress: Instant::now(),
                    silent: false,
                });
                let shared = Stream {
                    launch: id,
                    acct: self.replicas.accounts[account].clone(),
                    raid: account as u8,
                    msgs: msgs.clone(),
                    list: list.into(),
                    next: Arc::new(AtomicUsize::new(0)),
                    sealing: sealing.clone(),
                    keep_envelopes,
                    stop: stop.clone(),
                    tx: tx.clone(),
                };
                for _ in 0..streams {
                    shared.clone().spawn();
                }
            }
            // Settled: the quorum has it, or nothing is in flight for it (had a live member
            // been left to ask, the plan would have asked it).
            let settled =
                (0..n).all(|m| holders[m].len() >= msgs[m].need || inflight[m].is_empty());
            if settled || launches.iter().all(|l| l.streams == 0) {
                break;
            }
            // The next launch to go silent: one still holding up a message short of its
            // quorum, with hedging on.
            let hedge_at = launches
                .iter()
                .filter(|l| l.streams > 0 && !l.silent)
                .filter(|l| l.pending.iter().any(|&m| holders[m].len() < msgs[m].need))
                .filter_map(|l| {
                    let delay = self
                        .replicas
                        .hedge_delay(&self.replicas.accounts[l.account])?;
                    Some(l.progress + delay)
                })
                .min();
            let report = match hedge_at {
                Some(at) => match rx.recv_timeout(at.saturating_duration_since(Instant::now())) {
                    Ok(r) => Some(r),
                    Err(mpsc::RecvTimeoutError::Timeout) => None,
                    Err(mpsc::RecvTimeoutError::Disconnected) => unreachable!("tx is held"),
                },
                None => Some(rx.recv().expect("tx is held")),
            };
            match report {
                Some(Report::Took { launch, msgs: took }) => {
                    let l = &mut launches[launch];
                    l.progress = Instant::now();
                    for (m, env) in took {
                        l.pending.remove(&m);
                        inflight[m].retain(|&x| x != launch);
                        if holders[m].is_empty()
                            && keep_envelopes
                            && let Some(id) = msgs[m].cache_as
                        {
                            // Memory gets it from `emit_blocks`.
                            self.blocks.cache.put_disk_sealed(id, l.account as u8, env);
                        }
                        holders[m].push(l.account);
                    }
                }
                Some(Report::Ended { launch, error }) => {
                    let l = &mut launches[launch];
                    l.streams -= 1;
                    if let Some(e) = error {
                        failed.push((l.account, e));
                    }
                    if l.streams == 0 {
                        for m in std::mem::take(&mut l.pending) {
                            inflight[m].retain(|&x| x != launch);
                        }
                    }
                }
                None => {
                    let now = Instant::now();
                    for l in launches.iter_mut().filter(|l| l.streams > 0 && !l.silent) {
                        let acct = &self.replicas.accounts[l.account];
                        if self
                            .replicas
                            .hedge_delay(acct)
                            .is_some_and(|d| l.progress + d <= now)
                        {
                            // Its silence so far is what it costs at least: the next reads
                            // and writes prefer the members that answer.
                            l.silent = true;
                            acct.note_slow(now - l.progress);
                        }
                    }
                }
            }
        }
        stop.store(true, Ordering::SeqCst);
        Delivered { holders, failed }
    }

    /// The members to ask now and what each gets: for each message short of its quorum
    /// (counting copies in flight on members not silent), as many live members it was not
    /// given to as it lacks, the fastest of late first and those on a server with a silent
    /// member last (accounts on one server hang together).
    fn plan(
        &self,
        msgs: &[Outgoing],
        order: Order,
        holders: &[Vec<usize>],
        inflight: &[Vec<usize>],
        launches: &[Launch],
        tried: &mut [Vec<usize>],
    ) -> BTreeMap<usize, Vec<usize>> {
        let silent_servers: BTreeSet<String> = launches
            .iter()
            .filter(|l| l.silent && l.streams > 0)
            .map(|l| super::hedge::server_of(&self.replicas.accounts[l.account]))
            .collect();
        let accounts = &self.replicas.accounts;
        let candidates = |m: usize, tried: &[usize]| {
            let mut live: Vec<usize> = msgs[m]
                .members
                .iter()
                .copied()
                .filter(|&a| accounts[a].is_up() && !tried.contains(&a))
                .collect();
            live.sort_by_cached_key(|&a| {
                let on_silent = silent_servers.contains(&super::hedge::server_of(&accounts[a]));
                (on_silent, accounts[a].latency_us())
            });
            live
        };
        let mut plan: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
        // Copies of each message this plan adds (a count, not a search of the plan: a
        // large write is thousands of blocks).
        let mut planned = vec![0usize; msgs.len()];
        let lacking = |m: usize, planned: &[usize]| {
            let covering =
                inflight[m].iter().filter(|&&l| !launches[l].silent).count() + planned[m];
            msgs[m].need.saturating_sub(holders[m].len() + covering)
        };
        match order {
            Order::Any => {
                for (m, given) in tried.iter_mut().enumerate() {
                    let short = lacking(m, &planned);
                    if short == 0 {
                        continue;
                    }
                    for a in candidates(m, given).into_iter().take(short) {
                        plan.entry(a).or_default().push(m);
                        planned[m] += 1;
                        given.push(a);
                    }
                }
            }
            Order::InOrder => {
                // Messages before `from` are not short: the search goes on from there.
                let mut from = 0;
                while let Some(short_at) = (from..msgs.len()).find(|&m| lacking(m, &planned) > 0) {
                    from = short_at;
                    let short = lacking(from, &planned);
                    let asked = candidates(from, &tried[0]);
                    if asked.is_empty() {
                        break;
                    }
                    for a in asked.into_iter().take(short) {
                        plan.insert(a, (from..msgs.len()).collect());
                        for p in &mut planned[from..] {
                            *p += 1;
                        }
                        tried[0].push(a);
                    }
                }
            }
        }
        plan
    }
}

/// One stream of a launch: takes batches of consecutive messages of its list (shared with
/// the launch's other streams) and appends each to its account, until the list is done,
/// the write returned, or the account fails.
#[derive(Clone)]
struct Stream {
    launch: usize,
    acct: Arc<Account>,
    raid: u8,
    msgs: Arc<[Outgoing]>,
    list: Arc<[usize]>,
    next: Arc<AtomicUsize>,
    sealing: Sealing,
    keep_envelopes: bool,
    stop: Arc<AtomicBool>,
    tx: mpsc::Sender<Report>,
}

impl Stream {
    fn spawn(self) {
        let (tx, launch) = (self.tx.clone(), self.launch);
        let spawned = std::thread::Builder::new()
            .name("mailfs-append".into())
            .spawn(move || {
                let error = self.run();
                // The write may have returned already (this member was silent).
                let _ = self.tx.send(Report::Ended {
                    launch: self.launch,
                    error,
                });
            });
        if let Err(e) = spawned {
            // Out of threads: this stream fails as a member that did not answer would.
            let _ = tx.send(Report::Ended {
                launch,
                error: Some(format!("no thread for an append: {e}")),
            });
        }
    }

    fn run(&self) -> Option<String> {
        while !self.stop.load(Ordering::SeqCst) {
            let start = self.next.fetch_add(1, Ordering::SeqCst);
            if start >= self.list.len() {
                return None;
            }
            let mut batch = vec![self.list[start]];
            let mut bytes = self.msgs[self.list[start]].payload.len();
            while batch.len() < APPEND_BATCH_MAX {
                // In order: the next message only when the stream is alone (one per
                // in-order launch), so a batch is consecutive.
                let i = self.next.load(Ordering::SeqCst);
                let Some(&m) = self.list.get(i) else {
                    break;
                };
                if bytes + self.msgs[m].payload.len() > APPEND_BATCH_BYTES_MAX
                    || self
                        .next
                        .compare_exchange(i, i + 1, Ordering::SeqCst, Ordering::SeqCst)
                        .is_err()
                {
                    break;
                }
                bytes += self.msgs[m].payload.len();
                batch.push(m);
            }
            let mut sealed = Vec::with_capacity(batch.len());
            for &m in &batch {
                let msg = &self.msgs[m];
                match seal_with(&self.sealing, &msg.name, self.raid, &msg.payload) {
                    Ok(env) => sealed.push((msg.name, env)),
                    Err(e) => return Some(e.to_string()),
                }
            }
            if let Err(e) = self.acct.append_now(&sealed) {
                return Some(e.to_string());
            }
            let took = batch
                .into_iter()
                .zip(sealed)
                .map(|(m, (_, env))| (m, if self.keep_envelopes { env } else { Vec::new() }))
                .collect();
            if self
                .tx
                .send(Report::Took {
                    launch: self.launch,
                    msgs: took,
                })
                .is_err()
            {
                return None;
            }
        }
        None
    }
}
