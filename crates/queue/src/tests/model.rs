//! Model-based crash test: random sequences of queue operations, crashes (losing, tearing or
//! keeping unsynced writes) and injected I/O failures, checked against an in-memory model of
//! what the queue acknowledged.
//!
//! After every crash and recovery:
//! - every acknowledged message is there (pending, deferred or bounce) unless a `finish` that
//!   returned Ok delivered all of its recipients (or a `finish_bounce` returned Ok);
//! - nothing unacknowledged is half-visible: an unknown message must be, byte for byte, one
//!   whose enqueue failed;
//! - a recipient whose delivery was acknowledged never comes back as pending;
//! - ids are unique, and every id handed out is new.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::mpsc;

use proptest::prelude::*;

use super::*;
use crate::{Outcome, QueuedMessage};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum St {
    Pending,
    Delivered,
    Failed,
}

#[derive(Clone)]
struct MMsg {
    envelope: Envelope,
    content: Vec<u8>,
    status: Vec<St>,
    deferred: bool,
    /// A `finish` failed: each recipient may be in its old or in this new state.
    uncertain: Option<Vec<St>>,
    /// A `finish_bounce` failed: the bounce may be gone.
    may_vanish: bool,
}

impl std::fmt::Debug for MMsg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MMsg")
            .field("sender", &self.envelope.sender)
            .field("content_len", &self.content.len())
            .field("status", &self.status)
            .field("deferred", &self.deferred)
            .field("uncertain", &self.uncertain)
            .field("may_vanish", &self.may_vanish)
            .finish()
    }
}

fn remaining(s: &[St]) -> bool {
    s.iter().any(|&x| x != St::Delivered)
}

#[derive(Default)]
struct Model {
    msgs: BTreeMap<u64, MMsg>,
    /// Enqueues that failed, by tag: they may show up whole.
    maybe: BTreeMap<u64, (Envelope, Vec<u8>)>,
    ids_seen: BTreeSet<u64>,
    leased: BTreeMap<u64, Vec<usize>>,
    now: u64,
    next_tag: u64,
}

#[derive(Clone, Debug)]
enum Op {
    Enqueue {
        n: usize,
        rcpts: usize,
        len: usize,
    },
    Lease {
        n: usize,
    },
    Finish {
        pick: usize,
        seed: u64,
    },
    Release {
        pick: usize,
    },
    Bounces,
    Advance {
        ms: u64,
    },
    Reopen,
    Crash {
        seed: u64,
        keep: u8,
    },
    FailThenCrash {
        fail_after: u64,
        finish: bool,
        seed: u64,
        keep: u8,
    },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (1usize..6, 1usize..4, 0usize..60_000).prop_map(|(n, rcpts, len)| Op::Enqueue { n, rcpts, len }),
        3 => (1usize..6).prop_map(|n| Op::Lease { n }),
        4 => (any::<usize>(), any::<u64>()).prop_map(|(pick, seed)| Op::Finish { pick, seed }),
        1 => any::<usize>().prop_map(|pick| Op::Release { pick }),
        1 => Just(Op::Bounces),
        1 => (1u64..200).prop_map(|ms| Op::Advance { ms }),
        1 => Just(Op::Reopen),
        2 => (any::<u64>(), 0u8..3).prop_map(|(seed, keep)| Op::Crash { seed, keep }),
        2 => (0u64..12, any::<bool>(), any::<u64>(), 0u8..3)
            .prop_map(|(fail_after, finish, seed, keep)| Op::FailThenCrash { fail_after, finish, seed, keep }),
    ]
}

fn keep(k: u8) -> f64 {
    [0.0, 0.5, 1.0][usize::from(k)]
}

fn tag_of(m: &QueuedMessage) -> Option<u64> {
    let text = String::from_utf8_lossy(&m.content[..60.min(m.content.len())]).into_owned();
    text.strip_prefix("Subject: message ")?
        .split('\r')
        .next()?
        .parse()
        .ok()
}

fn observed(m: &QueuedMessage) -> Vec<St> {
    m.envelope
        .recipients
        .iter()
        .map(|r| match r.status {
            RecipientStatus::Pending => St::Pending,
            RecipientStatus::Delivered => St::Delivered,
            RecipientStatus::Failed => St::Failed,
            RecipientStatus::Moved => panic!("message {} handed out with a moved recipient", m.id),
        })
        .collect()
}

struct Harness {
    sim: SimDisk,
    q: Option<Queue>,
    model: Model,
}

impl Harness {
    fn q(&self) -> &Queue {
        self.q.as_ref().unwrap()
    }

    fn config() -> QueueConfig {
        QueueConfig {
            free_segments_max: 1,
            batch_records_max: 8,
            ..small()
        }
    }

    fn enqueue(&mut self, n: usize, rcpts: usize, len: usize) {
        let (tx, rx) = mpsc::channel();
        let mut sent = Vec::new();
        for _ in 0..n {
            let tag = self.model.next_tag;
            self.model.next_tag += 1;
            let (e, c) = (envelope(rcpts, tag), content(tag, len));
            sent.push((tag, e.clone(), c.clone()));
            let tx = tx.clone();
            self.q()
                .enqueue_with(e, c, Box::new(move |r| tx.send((tag, r)).unwrap()));
        }
        for _ in 0..n {
            let (tag, r) = rx.recv().unwrap();
            let (_, e, c) = sent.iter().find(|s| s.0 == tag).unwrap().clone();
            match r {
                Ok(id) => {
                    assert!(self.model.ids_seen.insert(id), "id {id} handed out twice");
                    let status = vec![St::Pending; e.recipients.len()];
                    self.model.msgs.insert(
                        id,
                        MMsg {
                            envelope: e,
                            content: c,
                            status,
                            deferred: false,
                            uncertain: None,
                            may_vanish: false,
                        },
                    );
                }
                Err(_) => {
                    self.model.maybe.insert(tag, (e, c));
                }
            }
        }
    }

    fn check_message(&self, m: &QueuedMessage) {
        let mm = &self.model.msgs[&m.id];
        assert_eq!(m.content, mm.content, "message {} content", m.id);
        assert_eq!(m.envelope.sender, mm.envelope.sender);
        assert_eq!(m.envelope.arrival_ms, mm.envelope.arrival_ms);
        let addrs: Vec<_> = m.envelope.recipients.iter().map(|r| &r.address).collect();
        let want: Vec<_> = mm.envelope.recipients.iter().map(|r| &r.address).collect();
        assert_eq!(addrs, want);
    }

    fn lease(&mut self, n: usize) {
        let batch = self.q().next_batch(self.model.now, n, 200_000).unwrap();
        assert!(batch.len() <= n);
        for m in batch {
            assert!(
                !self.model.leased.contains_key(&m.id),
                "message {} leased twice",
                m.id
            );
            self.check_message(&m);
            let mm = &self.model.msgs[&m.id];
            assert_eq!(observed(&m), mm.status, "message {}", m.id);
            assert_eq!(m.deferred, mm.deferred);
            self.model.leased.insert(m.id, m.pending.clone());
        }
    }

    fn outcomes(pending: &[usize], now: u64, seed: u64) -> Vec<(usize, Outcome)> {
        pending
            .iter()
            .enumerate()
            .map(|(k, &i)| {
                let o = match (seed >> (2 * k)) % 4 {
                    0 | 1 => Outcome::Delivered,
                    2 => Outcome::Deferred {
                        retry_at_ms: now + 1 + (seed % 100),
                        reason: format!("451 {seed}"),
                    },
                    _ => Outcome::Failed {
                        reason: format!("550 {seed}"),
                    },
                };
                (i, o)
            })
            .collect()
    }

    fn apply(status: &[St], outcomes: &[(usize, Outcome)]) -> Vec<St> {
        let mut s = status.to_vec();
        for (i, o) in outcomes {
            s[*i] = match o {
                Outcome::Delivered => St::Delivered,
                Outcome::Deferred { .. } => St::Pending,
                Outcome::Failed { .. } => St::Failed,
            };
        }
        s
    }

    /// Returns false if there was nothing leased.
    fn finish(&mut self, pick: usize, seed: u64) -> bool {
        if self.model.leased.is_empty() {
            return false;
        }
        let id = *self
            .model
            .leased
            .keys()
            .nth(pick % self.model.leased.len())
            .unwrap();
        let pending = self.model.leased.remove(&id).unwrap();
        let outcomes = Self::outcomes(&pending, self.model.now, seed);
        let r = self.q().finish(id, &outcomes);
        let mm = self.model.msgs.get_mut(&id).unwrap();
        let new = Self::apply(&mm.status, &outcomes);
        match r {
            Ok(()) => {
                if outcomes.iter().any(|(_, o)| *o != Outcome::Delivered) {
                    mm.deferred = true;
                }
                mm.status = new;
                if !remaining(&mm.status) {
                    self.model.msgs.remove(&id);
                }
            }
            Err(_) => mm.uncertain = Some(new),
        }
        true
    }

    fn bounces(&mut self) {
        let b = self.q().take_bounces(4).unwrap();
        for m in b {
            self.check_message(&m);
            let mm = &self.model.msgs[&m.id];
            assert!(
                !mm.status.contains(&St::Pending) && mm.status.contains(&St::Failed),
                "{m:?}"
            );
            let failed: Vec<usize> = (0..mm.status.len())
                .filter(|&i| mm.status[i] == St::Failed)
                .collect();
            assert_eq!(m.pending, failed);
            self.q().finish_bounce(m.id).unwrap();
            self.model.msgs.remove(&m.id);
        }
    }

    fn crash_and_verify(&mut self, seed: u64, keep_p: f64) {
        self.sim.crash(seed, keep_p);
        self.reopen_and_verify();
    }

    fn reopen_and_verify(&mut self) {
        drop(self.q.take());
        let (q, report) = open(&self.sim, Self::config());
        assert!(
            report.unreadable_segments.is_empty() && report.problems.is_empty(),
            "{report:?}"
        );
        self.q = Some(q);
        self.model.leased.clear();
        self.verify();
    }

    /// Compares everything the queue holds with the model, then resolves the model's
    /// uncertainty from what was found.
    fn verify(&mut self) {
        let q = self.q.clone().unwrap();
        let ready = q.next_batch(u64::MAX, usize::MAX, usize::MAX).unwrap();
        let bounces = q.take_bounces(usize::MAX).unwrap();
        assert!(q.quarantined().is_empty(), "{:?}", q.quarantined());
        let mut found: BTreeMap<u64, (QueuedMessage, bool)> = BTreeMap::new();
        for (m, bounce) in ready
            .into_iter()
            .map(|m| (m, false))
            .chain(bounces.into_iter().map(|m| (m, true)))
        {
            let id = m.id;
            assert!(
                found.insert(id, (m, bounce)).is_none(),
                "message {id} handed out twice"
            );
        }
        // Unknown messages: must be whole copies of a failed enqueue.
        for (id, (m, _)) in &found {
            if self.model.msgs.contains_key(id) {
                continue;
            }
            let tag =
                tag_of(m).unwrap_or_else(|| panic!("unknown message {id} with foreign content"));
            let (e, c) = self.model.maybe.remove(&tag).unwrap_or_else(|| {
                panic!(
                    "message {id} (tag {tag}) was never enqueued, or came back after being finished"
                )
            });
            assert_eq!(
                &m.content, &c,
                "unacknowledged message {id} came back damaged"
            );
            assert_eq!(
                m.envelope, e,
                "unacknowledged message {id} came back damaged"
            );
            assert_eq!(m.attempts, 0);
            assert!(self.model.ids_seen.insert(*id), "id {id} reused");
            let status = vec![St::Pending; e.recipients.len()];
            self.model.msgs.insert(
                *id,
                MMsg {
                    envelope: e,
                    content: c,
                    status,
                    deferred: false,
                    uncertain: None,
                    may_vanish: false,
                },
            );
        }
        let ids: Vec<u64> = self.model.msgs.keys().copied().collect();
        for id in ids {
            let mm = self.model.msgs[&id].clone();
            let new = mm.uncertain.clone().unwrap_or_else(|| mm.status.clone());
            match found.get(&id) {
                None => {
                    assert!(
                        mm.may_vanish || (mm.uncertain.is_some() && !remaining(&new)),
                        "acknowledged message {id} lost: {mm:?}"
                    );
                    self.model.msgs.remove(&id);
                }
                Some((m, bounce)) => {
                    self.check_message(m);
                    let obs = observed(m);
                    for (i, o) in obs.iter().enumerate() {
                        assert!(
                            *o == mm.status[i] || *o == new[i],
                            "message {id} recipient {i}: {o:?}, model {:?} / {:?}",
                            mm.status[i],
                            new[i]
                        );
                    }
                    assert_eq!(*bounce, !obs.contains(&St::Pending));
                    let want = if *bounce { St::Failed } else { St::Pending };
                    let idx: Vec<usize> = (0..obs.len()).filter(|&i| obs[i] == want).collect();
                    assert_eq!(m.pending, idx);
                    if mm.uncertain.is_none() {
                        assert_eq!(m.deferred, mm.deferred, "message {id}");
                    }
                    let e = self.model.msgs.get_mut(&id).unwrap();
                    e.status = obs;
                    e.deferred = m.deferred;
                    e.uncertain = None;
                    e.may_vanish = false;
                }
            }
        }
        for id in found.keys() {
            q.release(*id);
        }
        let stats = q.stats();
        assert_eq!(stats.leased, 0);
        assert_eq!(
            stats.pending_messages + stats.deferred_messages + stats.bounces,
            self.model.msgs.len()
        );
    }

    fn run(&mut self, op: Op) {
        if std::env::var_os("QUEUE_MODEL_TRACE").is_some() {
            eprintln!(
                "op {op:?}; model {:?}; leased {:?}",
                self.model.msgs, self.model.leased
            );
        }
        match op {
            Op::Enqueue { n, rcpts, len } => self.enqueue(n, rcpts, len),
            Op::Lease { n } => self.lease(n),
            Op::Finish { pick, seed } => {
                self.finish(pick, seed);
            }
            Op::Release { pick } => {
                if !self.model.leased.is_empty() {
                    let id = *self
                        .model
                        .leased
                        .keys()
                        .nth(pick % self.model.leased.len())
                        .unwrap();
                    self.model.leased.remove(&id);
                    self.q().release(id);
                }
            }
            Op::Bounces => self.bounces(),
            Op::Advance { ms } => self.model.now += ms,
            Op::Reopen => {
                self.q.take().unwrap().close().unwrap();
                self.reopen_and_verify();
            }
            Op::Crash { seed, keep: k } => self.crash_and_verify(seed, keep(k)),
            Op::FailThenCrash {
                fail_after,
                finish,
                seed,
                keep: k,
            } => {
                self.sim.fail_after(fail_after);
                if !(finish && self.finish(seed as usize, seed)) {
                    self.enqueue(3, 2, 5000);
                }
                self.crash_and_verify(seed, keep(k));
            }
        }
        // Between crashes the live counts match the model exactly.
        let s = self.q().stats();
        assert_eq!(
            s.pending_messages + s.deferred_messages + s.bounces,
            self.model.msgs.len(),
            "{s:?}"
        );
        let bounces = self
            .model
            .msgs
            .values()
            .filter(|m| !m.status.contains(&St::Pending) && m.status.contains(&St::Failed))
            .count();
        assert_eq!(s.bounces, bounces, "{s:?}");
        assert_eq!(s.leased, self.model.leased.len());
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(64), max_shrink_iters: 2000, ..ProptestConfig::default() })]

    #[test]
    fn queue_matches_model_across_crashes(ops in proptest::collection::vec(op(), 1..45)) {
        let sim = SimDisk::new();
        let (q, _) = open(&sim, Harness::config());
        let mut h = Harness { sim, q: Some(q), model: Model::default() };
        for op in ops {
            h.run(op);
        }
        h.crash_and_verify(12345, 0.5);
    }
}

/// Replays op sequences that once failed.
fn replay(ops: Vec<Op>) {
    let sim = SimDisk::new();
    let (q, _) = open(&sim, Harness::config());
    let mut h = Harness {
        sim,
        q: Some(q),
        model: Model::default(),
    };
    for op in ops {
        h.run(op);
    }
    h.crash_and_verify(12345, 0.5);
}

#[test]
fn regression_bounce_lost() {
    use Op::*;
    replay(vec![
        Finish {
            pick: 13560709840427014236,
            seed: 17173922262483223403,
        },
        Enqueue {
            n: 1,
            rcpts: 2,
            len: 32854,
        },
        Finish {
            pick: 5624110177314103641,
            seed: 15465306683771694329,
        },
        Finish {
            pick: 2414975036051385006,
            seed: 13517796701043470499,
        },
        Finish {
            pick: 12826208008687918314,
            seed: 8819858420986066621,
        },
        Crash {
            seed: 10510557715548365261,
            keep: 0,
        },
        Finish {
            pick: 15262024206466509576,
            seed: 13197872472690562474,
        },
        Lease { n: 3 },
        Finish {
            pick: 5618137171415585749,
            seed: 258338029374273262,
        },
        Bounces,
        Advance { ms: 161 },
        FailThenCrash {
            fail_after: 6,
            finish: false,
            seed: 2780855450705425709,
            keep: 2,
        },
        Advance { ms: 75 },
        Enqueue {
            n: 2,
            rcpts: 2,
            len: 41284,
        },
        Bounces,
        Lease { n: 1 },
        Finish {
            pick: 12411399048623788811,
            seed: 13750242682276876639,
        },
        Lease { n: 3 },
        FailThenCrash {
            fail_after: 10,
            finish: true,
            seed: 3251102158023584501,
            keep: 1,
        },
        Crash {
            seed: 14469748924583185937,
            keep: 0,
        },
        Finish {
            pick: 12188313234399064547,
            seed: 455015608994342476,
        },
        Lease { n: 4 },
        Finish {
            pick: 3586980869686917391,
            seed: 629566445765077002,
        },
        Enqueue {
            n: 4,
            rcpts: 1,
            len: 37361,
        },
        Finish {
            pick: 6791024887500487208,
            seed: 10662645869828180712,
        },
        Finish {
            pick: 15228084749216930411,
            seed: 18186813395865935686,
        },
        Enqueue {
            n: 1,
            rcpts: 1,
            len: 18833,
        },
        Enqueue {
            n: 3,
            rcpts: 2,
            len: 16980,
        },
        Finish {
            pick: 9624768195652141875,
            seed: 13046355034220043934,
        },
        Enqueue {
            n: 4,
            rcpts: 3,
            len: 59807,
        },
        FailThenCrash {
            fail_after: 5,
            finish: true,
            seed: 1357187682705994483,
            keep: 2,
        },
        Finish {
            pick: 13477883843852428925,
            seed: 16699145270505579120,
        },
        Crash {
            seed: 15025527733821936499,
            keep: 0,
        },
        Crash {
            seed: 16004092033569464600,
            keep: 0,
        },
        FailThenCrash {
            fail_after: 7,
            finish: true,
            seed: 14214724540799667639,
            keep: 2,
        },
        Crash {
            seed: 932574949375562279,
            keep: 0,
        },
        Advance { ms: 55 },
        Lease { n: 4 },
    ]);
}

/// Found by the model test: stale slots of an older generation in a recycled segment once
/// looked like a damaged slot followed by more chain.
#[test]
fn regression_stale_generation_is_not_resumed() {
    use Op::*;
    replay(vec![
        Advance { ms: 180 },
        Lease { n: 1 },
        Finish {
            pick: 8740636054632215982,
            seed: 4129044615969862879,
        },
        Finish {
            pick: 12585838274519177891,
            seed: 5232336094829735581,
        },
        Reopen,
        Lease { n: 4 },
        Finish {
            pick: 15766581168714982829,
            seed: 13385852036077644006,
        },
        Crash {
            seed: 7184108049554020071,
            keep: 2,
        },
        Lease { n: 4 },
        Finish {
            pick: 12948988271827211597,
            seed: 16186485934276640538,
        },
        FailThenCrash {
            fail_after: 8,
            finish: true,
            seed: 1686148185021055669,
            keep: 1,
        },
        Crash {
            seed: 8644002553061006078,
            keep: 1,
        },
        FailThenCrash {
            fail_after: 4,
            finish: false,
            seed: 18258594908393399275,
            keep: 2,
        },
        Finish {
            pick: 7548580300800518994,
            seed: 16559343996295436568,
        },
        FailThenCrash {
            fail_after: 11,
            finish: true,
            seed: 12532345417653629367,
            keep: 0,
        },
        Lease { n: 3 },
        Reopen,
    ]);
}
