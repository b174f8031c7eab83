//! Reading one message from the members that hold it, hedged (docs/mailfs.md 7): the member
//! with the lowest recent latency first, the next one too when the first has not answered
//! within the hedge delay; the first copy that authenticates and is what the reader expects
//! wins.

use std::sync::mpsc;
use std::time::{Duration, Instant};

use super::*;

/// The hedge delay is at least this many times the preferred member's smoothed latency: a
/// member that is slow for every read (a loaded server) is not asked twice for each.
const HEDGE_LATENCY_MULTIPLE: u32 = 4;

/// A copy as a read takes it: (payload, RAID index, envelope when kept).
type Copy = (Vec<u8>, u8, Vec<u8>);

/// Says whether an opened copy is the content the reader expects (a block's hash).
type Accept = Arc<dyn Fn(&[u8]) -> bool + Send + Sync>;

/// One member's part of a read, owning all it needs: the loser of a hedge finishes on its
/// own thread after the read has returned.
struct Attempt {
    acct: Arc<Account>,
    raid: u8,
    id: NameId,
    /// The message's name without its time: a SEARCH for copies the index lacks.
    prefix: String,
    expected: mailfs_format::Header,
}

/// What an attempt found: a copy, or why not; and how many copies it rejected.
type Outcome = (Result<Copy, String>, u64);

impl Attempt {
    fn run(&self, sealing: &Sealing, keep_envelope: bool, accept: &Accept) -> Outcome {
        let acct = &self.acct;
        let mut rejected = 0;
        let mut uids = acct.uids(&self.id);
        if uids.is_empty() {
            // Perhaps another mount wrote it after our index was loaded.
            uids = acct.remote.find(&self.prefix).unwrap_or_default();
        }
        if uids.is_empty() {
            let why = format!("{} lacks {:?}", acct.remote.describe(), self.id);
            return (Err(why), rejected);
        }
        let mut why = String::new();
        for uid in uids {
            let opened = |bytes: Vec<u8>| {
                if keep_envelope {
                    open(sealing, &self.expected, &bytes).map(|p| (p, bytes))
                } else {
                    open_owned(sealing, &self.expected, bytes).map(|p| (p, Vec::new()))
                }
            };
            match acct.fetch(uid) {
                Ok(Some(bytes)) => match opened(bytes) {
                    Ok((p, bytes)) if accept(&p) => return (Ok((p, self.raid, bytes)), rejected),
                    Ok(_) => {
                        rejected += 1;
                        why = format!(
                            "{}: uid {uid}: not the expected content",
                            acct.remote.describe()
                        );
                    }
                    Err(e) => {
                        rejected += 1;
                        tracing::warn!(account = %acct.remote.describe(), uid, "rejected: {e}");
                        why = format!("{}: uid {uid}: {e}", acct.remote.describe());
                    }
                },
                Ok(None) => why = format!("{}: uid {uid} is gone", acct.remote.describe()),
                Err(e) => {
                    why = format!("{}: {e}", acct.remote.describe());
                    break;
                }
            }
        }
        (Err(why), rejected)
    }
}

/// The server an account is on: what its description names after the user
/// (`user@host:port`), or all of it.
pub(super) fn server_of(acct: &Account) -> String {
    let who = acct.remote.describe();
    match who.rsplit_once('@') {
        Some((_, server)) => server.to_string(),
        None => who,
    }
}

impl Replicas {
    /// How long a read waits for `preferred` before it asks the next member too; None:
    /// reads are not hedged (`hedge_delay_ms = 0`).
    pub(super) fn hedge_delay(&self, preferred: &Account) -> Option<Duration> {
        let floor = self.hedge_delay?;
        let by_latency = Duration::from_micros(preferred.latency_us()) * HEDGE_LATENCY_MULTIPLE;
        // Past the deadline the member is down and the read fails over anyway.
        Some(floor.max(by_latency).min(self.member_deadline / 2))
    }
}

impl Fs {
    /// Like [`Fs::get`], taking only a copy `accept` agrees with (a block's hash): a name
    /// can have several copies, and a crash orphan or a planted message that authenticates
    /// but is not the expected content is skipped, not served. Also returns the RAID index
    /// and, with `keep_envelope`, the envelope as the account held it (for the disk cache;
    /// otherwise it is opened in place and comes back empty).
    ///
    /// Live members are asked in order of their recent latency, the next when one fails;
    /// and once per read, when one has not answered within the hedge delay, the next one
    /// is asked as well (docs/mailfs.md 7, "Hedged reads").
    pub(crate) fn get_sealed_where(
        &self,
        targets: &[usize],
        id: NameId,
        sealing: &Sealing,
        keep_envelope: bool,
        accept: impl Fn(&[u8]) -> bool + Send + Sync + 'static,
    ) -> Result<Copy, FsError> {
        let mut order: Vec<usize> = targets
            .iter()
            .copied()
            .filter(|&t| self.replicas.accounts[t].is_up())
            .collect();
        order.sort_by_key(|&t| self.replicas.accounts[t].latency_us());
        let name = self.message_name(id.kind, id.object, id.index, id.version);
        let rendered = name.render();
        let prefix = rendered[..rendered.rfind(" t").unwrap_or(rendered.len())].to_string();
        let attempts: Vec<Attempt> = order
            .iter()
            .map(|&t| Attempt {
                acct: self.replicas.accounts[t].clone(),
                raid: t as u8,
                id,
                prefix: prefix.clone(),
                expected: MessageName { time: 0, ..name }.header(t as u8),
            })
            .collect();
        let accept: Accept = Arc::new(accept);
        let delay = attempts
            .first()
            .and_then(|a| self.replicas.hedge_delay(&a.acct));
        match delay {
            Some(delay) if attempts.len() > 1 => {
                self.hedged(attempts, delay, sealing, keep_envelope, accept)
            }
            _ => {
                let mut why = String::from("no replica is up");
                for a in attempts {
                    let (r, rejected) = a.run(sealing, keep_envelope, &accept);
                    self.count_rejected(rejected);
                    match r {
                        Ok(copy) => return Ok(copy),
                        Err(w) => why = w,
                    }
                }
                Err(FsError::Integrity(why))
            }
        }
    }

    /// The attempts in order, each on a thread of its own: the next starts when one fails,
    /// and once, when the one running has not answered within `delay` (the hedge). The
    /// first copy wins; a later one is dropped with its thread.
    fn hedged(
        &self,
        attempts: Vec<Attempt>,
        delay: Duration,
        sealing: &Sealing,
        keep_envelope: bool,
        accept: Accept,
    ) -> Result<Copy, FsError> {
        let (tx, rx) = mpsc::channel::<(usize, Outcome)>();
        // (account, its server, when its attempt started) by attempt.
        let mut launched: Vec<(Arc<Account>, String, Instant)> = Vec::new();
        let mut waiting: std::collections::VecDeque<Attempt> = attempts.into();
        let launch = |a: Attempt, launched: &mut Vec<(Arc<Account>, String, Instant)>| {
            let i = launched.len();
            launched.push((a.acct.clone(), server_of(&a.acct), Instant::now()));
            let (tx, sealing, accept) = (tx.clone(), sealing.clone(), accept.clone());
            let failed = tx.clone();
            let spawned = std::thread::Builder::new()
                .name("mailfs-read".into())
                .spawn(move || {
                    // The read may have returned already (this was the hedge's loser).
                    let _ = tx.send((i, a.run(&sealing, keep_envelope, &accept)));
                });
            if let Err(e) = spawned {
                // Out of threads: this attempt fails as a member that did not answer would,
                // and the read goes on with the others (or fails) instead of panicking.
                let _ = failed.send((i, (Err(format!("no thread for a read: {e}")), 0)));
            }
        };
        launch(waiting.pop_front().expect("two attempts"), &mut launched);
        let mut running = 1;
        let mut hedge: Option<usize> = None;
        loop {
            let got = if hedge.is_none() && !waiting.is_empty() {
                let since = launched.last().expect("launched").2.elapsed();
                match rx.recv_timeout(delay.saturating_sub(since)) {
                    Ok(got) => Some(got),
                    Err(mpsc::RecvTimeoutError::Timeout) => None,
                    Err(mpsc::RecvTimeoutError::Disconnected) => unreachable!("tx is held"),
                }
            } else {
                Some(rx.recv().expect("tx is held"))
            };
            match got {
                None => {
                    // Accounts on one server hang together (a metadata read has a copy on
                    // each): the hedge goes to the next member on another server, if any.
                    let silent = &launched.last().expect("launched").1;
                    let at = waiting
                        .iter()
                        .position(|a| server_of(&a.acct) != *silent)
                        .unwrap_or(0);
                    let next = waiting.remove(at).expect("a member left");
                    hedge = Some(launched.len());
                    self.stats.hedged_reads.fetch_add(1, Ordering::Relaxed);
                    launch(next, &mut launched);
                    running += 1;
                }
                Some((i, (Ok(copy), rejected))) => {
                    self.count_rejected(rejected);
                    if Some(i) == hedge {
                        self.stats.hedge_wins.fetch_add(1, Ordering::Relaxed);
                        // The member the hedge beat was the one running when it started:
                        // its silence so far is what it costs at least, so the next reads
                        // prefer the member that answered.
                        let (beaten, _, since) = &launched[i - 1];
                        beaten.note_slow(since.elapsed());
                    }
                    return Ok(copy);
                }
                Some((_, (Err(w), rejected))) => {
                    self.count_rejected(rejected);
                    running -= 1;
                    if let Some(next) = waiting.pop_front() {
                        launch(next, &mut launched);
                        running += 1;
                    } else if running == 0 {
                        return Err(FsError::Integrity(w));
                    }
                }
            }
        }
    }

    fn count_rejected(&self, rejected: u64) {
        if rejected > 0 {
            self.stats
                .integrity_errors
                .fetch_add(rejected, Ordering::Relaxed);
        }
    }
}
