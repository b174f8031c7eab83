//! The owner's side of a hand-over: a copy another node hands over over LMTP (`XORIGIN`,
//! `XEPOCH`) goes straight into the store, one reply per recipient (the seed's version 2: no
//! second queue on the way).
//!
//! A recipient is taken only if this node owns it at the epoch the origin routed with
//! ([`HandOver::owns`]); a copy this node already stored for the same origin message is
//! acknowledged without storing it again ([`HandOver::already_stored`], `record.rs`: the
//! store keeps each copy's key in the copy's own journal record).
//!
//! Each LMTP transaction carries one message, and a node hands a batch over on several
//! connections at once. The sessions give their copies to one committer thread, which takes
//! everything waiting and deposits it with one call through the one road for new mail
//! (`mailboxes::Deposit`, which checks holds under the gate, commits through the store's
//! group commit and logs each `delivered` line), as a delivery thread deposits a queue
//! batch. A session never blocks a thread of its own: it waits for its answer
//! asynchronously, so a busy owner spends no thread hand-off per copy (with a blocking task
//! per session the owner's CPU per copy was 35 % higher, docs/benchmarks.md). A commit waits
//! up to [`COMMIT_WAIT_MAX`] for copies that sessions announced ([`HandOver::incoming`]: a
//! recipient accepted, the content on its way), as the queue's writer does. Order within a
//! commit: the store commit (the copies with their keys, one record), the keys of copies
//! the user's rules settled without storing (a record of their own), then the replies. The
//! SMTP replies themselves are the server's.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use mailboxes::{Copy, Deposit, Deposited, Origin};
use store::AppendRequest;

use crate::record;

/// How long a commit waits for announced hand-overs ([`HandOver::incoming`]) to join it: the
/// queue's `commit_wait_max`. A sending node hands a batch over on several connections at
/// once; their transactions arrive within a fraction of a millisecond of each other, and each
/// one that joins saves a store commit. Nobody announced means nobody waits.
pub const COMMIT_WAIT_MAX: Duration = Duration::from_millis(2);

/// Copies in one commit at most (a session's copies are never split).
const BATCH_COPIES_MAX: usize = 512;

/// What an owner node needs to take hand-overs.
pub struct HandOver {
    node: String,
    directory: directory::Directory,
    /// Where the copies and their keys go.
    store: Arc<store::Store>,
    committer: Arc<Committer>,
}

/// What the sessions and the committer thread share.
struct Committer {
    pending: Mutex<Pending>,
    wake: Condvar,
    /// Hand-overs announced (a recipient accepted) and not yet given or abandoned.
    incoming: AtomicUsize,
    /// [`COMMIT_WAIT_MAX`], longer in tests.
    wait_max: Duration,
}

struct Pending {
    requests: VecDeque<Request>,
    /// Set when the [`HandOver`] drops: the thread ends once the requests are answered.
    stopped: bool,
}

/// One session's copies, each with its record key, and where its outcomes go.
struct Request {
    copies: Vec<Copy>,
    keys: Vec<record::Key>,
    reply: tokio::sync::oneshot::Sender<Vec<Deposited>>,
}

impl Committer {
    fn pending(&self) -> MutexGuard<'_, Pending> {
        // Poisoned: a panic between two statements below left the queue whole.
        self.pending.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Copies on their way (see [`HandOver::incoming`]).
pub struct Incoming {
    committer: Arc<Committer>,
}

impl Drop for Incoming {
    fn drop(&mut self) {
        self.committer.incoming.fetch_sub(1, Ordering::SeqCst);
        // Taking the lock orders this with the committer's check-then-wait, so the wake-up
        // is never lost between the two.
        drop(self.committer.pending());
        self.committer.wake.notify_all();
    }
}

impl Drop for HandOver {
    fn drop(&mut self) {
        self.committer.pending().stopped = true;
        self.committer.wake.notify_all();
    }
}

impl HandOver {
    /// Starts the committer thread, which ends once this is dropped and every copy given
    /// is answered.
    pub fn new(
        node: String,
        directory: directory::Directory,
        deposit: Arc<Deposit>,
    ) -> std::io::Result<HandOver> {
        Self::waiting(node, directory, deposit, COMMIT_WAIT_MAX)
    }

    fn waiting(
        node: String,
        directory: directory::Directory,
        deposit: Arc<Deposit>,
        wait_max: Duration,
    ) -> std::io::Result<HandOver> {
        let store = deposit.store().clone();
        let committer = Arc::new(Committer {
            pending: Mutex::new(Pending {
                requests: VecDeque::new(),
                stopped: false,
            }),
            wake: Condvar::new(),
            incoming: AtomicUsize::new(0),
            wait_max,
        });
        let shared = committer.clone();
        std::thread::Builder::new()
            .name("handover-commit".into())
            .spawn(move || {
                while let Some(batch) = next_batch(&shared) {
                    commit(&deposit, batch);
                }
            })?;
        Ok(HandOver {
            node,
            directory,
            store,
            committer,
        })
    }

    /// Whether this node owns `user` (canonical) at `routed_epoch`, the epoch the origin
    /// routed with (`None`: any). `Err` gives this node's view of the epoch, for the refusal
    /// (logged `stale_route`).
    pub fn owns(&self, origin: &str, user: &str, routed_epoch: Option<u64>) -> Result<(), i64> {
        let owner = self.directory.cache().owner(user);
        let ours = owner.as_ref().is_some_and(|o| {
            o.node.as_deref() == Some(self.node.as_str())
                && !o.frozen
                && routed_epoch.is_none_or(|e| u64::try_from(o.epoch).is_ok_and(|ours| ours == e))
        });
        if ours {
            return Ok(());
        }
        let epoch = owner.map_or(0, |o| o.epoch);
        tracing::info!(
            event = "stale_route",
            origin = %telemetry::shown(origin),
            to = %telemetry::shown(user),
            routed_epoch = routed_epoch.unwrap_or(0),
            epoch
        );
        Err(epoch)
    }

    /// Whether this node stored `user`'s copy of the `origin` message already (then the
    /// origin's retry is acknowledged without storing; logged `duplicate`).
    pub fn already_stored(&self, origin: &str, user: &str) -> bool {
        let stored = self.store.already_delivered(&record::key(origin, user));
        if stored {
            tracing::info!(
                event = "duplicate",
                origin = %telemetry::shown(origin),
                to = %telemetry::shown(user)
            );
        }
        stored
    }

    /// Announces copies on their way (an LMTP session accepted a recipient): the next commit
    /// may wait up to [`COMMIT_WAIT_MAX`] for them. Pass it to [`HandOver::store`], or drop it
    /// when none will come.
    pub fn incoming(&self) -> Incoming {
        self.committer.incoming.fetch_add(1, Ordering::SeqCst);
        Incoming {
            committer: self.committer.clone(),
        }
    }

    /// Stores the `origin` message's copies in the committer's next commit, with every other
    /// session's, records the stored ones, then returns each copy's outcome (in order). The
    /// copies are given before the first await, so an announcement dropped after this call
    /// was made is never waited for in vain.
    pub fn store(
        &self,
        origin: &str,
        appends: Vec<(AppendRequest, Option<mailboxes::rules::Envelope>)>,
        announced: Option<Incoming>,
    ) -> impl std::future::Future<Output = Vec<Deposited>> + use<> {
        let count = appends.len();
        let keys: Vec<record::Key> = appends
            .iter()
            .map(|(a, _)| record::key(origin, &a.user))
            .collect();
        let copies = appends
            .into_iter()
            .zip(&keys)
            .map(|((append, rules), key)| Copy {
                append,
                origin: Origin::HandedOver {
                    origin: origin.to_string(),
                    key: Some(*key),
                },
                rules,
            })
            .collect();
        let (reply, answer) = tokio::sync::oneshot::channel();
        self.committer.pending().requests.push_back(Request {
            copies,
            keys,
            reply,
        });
        drop(announced);
        self.committer.wake.notify_all();
        async move {
            answer.await.unwrap_or_else(|_| {
                vec![
                    Deposited::Failed(store::StoreError::Failed(
                        "the hand-over committer stopped".into()
                    ));
                    count
                ]
            })
        }
    }
}

/// The next commit's requests: everything waiting, after holding the round open briefly for
/// announced hand-overs. `None` when stopped with nothing left.
fn next_batch(shared: &Committer) -> Option<Vec<Request>> {
    let mut pending = shared.pending();
    while pending.requests.is_empty() {
        if pending.stopped {
            return None;
        }
        pending = shared.wake.wait(pending).unwrap_or_else(|p| p.into_inner());
    }
    let deadline = Instant::now() + shared.wait_max;
    while shared.incoming.load(Ordering::SeqCst) > 0
        && copies(&pending.requests) < BATCH_COPIES_MAX
        && !pending.stopped
    {
        let now = Instant::now();
        if now >= deadline {
            break;
        }
        pending = shared
            .wake
            .wait_timeout(pending, deadline - now)
            .map(|(g, _)| g)
            .unwrap_or_else(|p| p.into_inner().0);
    }
    let mut batch = Vec::new();
    let mut taken = 0;
    while let Some(next) = pending.requests.front() {
        if !batch.is_empty() && taken + next.copies.len() > BATCH_COPIES_MAX {
            break;
        }
        taken += next.copies.len();
        batch.extend(pending.requests.pop_front());
    }
    assert!(!batch.is_empty(), "a commit of no hand-over");
    Some(batch)
}

fn copies(requests: &VecDeque<Request>) -> usize {
    requests.iter().map(|r| r.copies.len()).sum()
}

/// Deposits every copy of `batch` with one call under the gate (the stored ones with their
/// keys, in their record), journals the keys of copies the user's rules settled without
/// storing, then answers each session.
fn commit(deposit: &Deposit, batch: Vec<Request>) {
    let mut copies = Vec::new();
    let mut keys = Vec::new();
    let mut replies = Vec::with_capacity(batch.len());
    for request in batch {
        replies.push((request.copies.len(), request.reply));
        copies.extend(request.copies);
        keys.extend(request.keys);
    }
    let gate = deposit.gate().clone();
    let shared = gate.shared();
    let outcomes = deposit.deposit(&shared, copies);
    drop(shared);
    assert_eq!(outcomes.len(), keys.len(), "one outcome per copy");
    // Disposed or rejected by the user's rules counts as done too: a retry would run the
    // rules (and send their mail) again. Stored copies carry their keys already.
    let settled: Vec<record::Key> = keys
        .iter()
        .zip(&outcomes)
        .filter(|(_, outcome)| matches!(outcome, Deposited::Disposed | Deposited::Rejected(_)))
        .map(|(key, _)| *key)
        .collect();
    if let Err(e) = deposit.store().record_delivered(&settled) {
        tracing::error!(
            event = "cluster_delivered_error",
            error = %e,
            msg = "a retry of these copies would run their rules again"
        );
    }
    let mut outcomes = outcomes.into_iter();
    for (count, reply) in replies {
        // A session that went away wants no answer; its copies are stored and recorded.
        let _ = reply.send(outcomes.by_ref().take(count).collect());
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicU64;

    use store::NewMessage;

    use super::*;

    /// Long enough that a loaded machine's scheduling never outlasts it.
    const WAIT: Duration = Duration::from_millis(500);

    struct Owner {
        handover: HandOver,
        store: Arc<store::Store>,
        runtime: tokio::runtime::Runtime,
        _dir: tempfile::TempDir,
    }

    /// An owner node's hand-over on a fresh store and record, waiting `WAIT` for announced
    /// copies.
    fn owner() -> Owner {
        let dir = tempfile::tempdir().unwrap();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let directory = runtime
            .block_on(directory::Directory::open(&dir.path().join("directory.db")))
            .unwrap();
        let disk: Arc<dyn disk::Disk> = Arc::new(disk::RealDisk);
        let (store, _) = store::Store::open(
            disk.clone(),
            &dir.path().join("store"),
            store::StoreConfig {
                volume_grow_bytes: 256 << 10,
                journal_checkpoint_bytes: 256 << 10,
                reservation_bytes: 0,
                ..store::StoreConfig::default()
            },
        )
        .unwrap();
        let deposit = Arc::new(Deposit::new(
            store.clone(),
            Arc::new(mailboxes::Gate::single()),
            telemetry::Telemetry::new(),
            Arc::new(AtomicU64::new(0)),
        ));
        let handover = HandOver::waiting("n2".into(), directory, deposit, WAIT).unwrap();
        Owner {
            handover,
            store,
            runtime,
            _dir: dir,
        }
    }

    fn copy(user: &str) -> (AppendRequest, Option<mailboxes::rules::Envelope>) {
        let append = AppendRequest {
            user: user.into(),
            folder: "INBOX".into(),
            message: NewMessage {
                content: b"Subject: handed over\r\n\r\nbody\r\n".to_vec(),
                ..NewMessage::default()
            },
        };
        (append, None)
    }

    /// A copy given while another session's copy is announced waits for it: both in one
    /// store commit, both recorded, and a retry of either is known as already stored.
    #[test]
    fn an_announced_hand_over_shares_the_commit_and_both_are_recorded() {
        let owner = owner();
        let before = owner.store.stats().data_syncs;
        let announced = owner.handover.incoming();
        let first = owner.handover.store("n1:1", vec![copy("a@x.test")], None);
        // The committer now holds the round open for the announced copy.
        std::thread::sleep(WAIT / 10);
        let second = owner
            .handover
            .store("n1:2", vec![copy("b@x.test")], Some(announced));
        let (first, second) = owner
            .runtime
            .block_on(async { (first.await, second.await) });
        assert!(
            matches!(first.as_slice(), [Deposited::Stored(_)]),
            "{first:?}"
        );
        assert!(
            matches!(second.as_slice(), [Deposited::Stored(_)]),
            "{second:?}"
        );
        assert_eq!(
            owner.store.stats().data_syncs - before,
            1,
            "one commit for both"
        );
        assert!(owner.handover.already_stored("n1:1", "a@x.test"));
        assert!(owner.handover.already_stored("n1:2", "b@x.test"));
        assert!(!owner.handover.already_stored("n1:2", "a@x.test"));
        assert_eq!(
            owner
                .store
                .open_folder("b@x.test", "INBOX")
                .unwrap()
                .messages
                .len(),
            1
        );
    }

    /// An announcement that never turns into copies delays a commit by the wait at most.
    #[test]
    fn an_abandoned_announcement_costs_a_bounded_wait() {
        let owner = owner();
        let _abandoned = owner.handover.incoming();
        let started = Instant::now();
        let stored =
            owner
                .runtime
                .block_on(owner.handover.store("n1:3", vec![copy("a@x.test")], None));
        let took = started.elapsed();
        assert!(
            matches!(stored.as_slice(), [Deposited::Stored(_)]),
            "{stored:?}"
        );
        assert!(took >= WAIT, "waited {took:?}");
        assert!(took < WAIT * 10, "waited {took:?}");
    }

    /// Each session gets its own copies' outcomes, in order, from a commit shared with
    /// others; a session that went away still has its copies stored and recorded; the
    /// committer ends when the hand-over is dropped.
    #[test]
    fn each_session_gets_its_own_outcomes_and_the_committer_ends_with_the_hand_over() {
        let owner = owner();
        let gone = owner.handover.store("n1:4", vec![copy("c@x.test")], None);
        drop(gone);
        let sessions: Vec<_> = (0..8)
            .map(|i| {
                let users = vec![copy(&format!("u{i}@x.test")), copy("shared@x.test")];
                owner.handover.store(&format!("n1:{}", 10 + i), users, None)
            })
            .collect();
        let outcomes = owner.runtime.block_on(async move {
            let mut all = Vec::new();
            for session in sessions {
                all.push(session.await);
            }
            all
        });
        for (i, outcome) in outcomes.iter().enumerate() {
            assert_eq!(outcome.len(), 2, "session {i}: {outcome:?}");
            assert!(
                outcome.iter().all(|o| matches!(o, Deposited::Stored(_))),
                "{outcome:?}"
            );
            assert!(
                owner
                    .handover
                    .already_stored(&format!("n1:{}", 10 + i), &format!("u{i}@x.test"))
            );
        }
        let shared = owner.store.open_folder("shared@x.test", "INBOX").unwrap();
        assert_eq!(shared.messages.len(), 8);
        // The session that went away: stored and recorded all the same.
        assert_eq!(
            owner
                .store
                .open_folder("c@x.test", "INBOX")
                .unwrap()
                .messages
                .len(),
            1
        );
        assert!(owner.handover.already_stored("n1:4", "c@x.test"));
        let committer = Arc::downgrade(&owner.handover.committer);
        drop(owner.handover);
        let deadline = Instant::now() + WAIT * 10;
        while committer.upgrade().is_some() {
            assert!(
                Instant::now() < deadline,
                "the committer thread did not end"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}
