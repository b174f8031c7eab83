//! The owner's side of a hand-over: copies other nodes hand over, from every LMTP session at
//! once, stored in one store commit and recorded (`dedup.rs`) with one write.
//!
//! Each LMTP transaction carries one message, and a node hands a batch of messages over on
//! several connections at once, so an owner storing each transaction on its own would pay a
//! store commit (data sync + journal sync) per message, where local delivery pays it once
//! per batch. One committer thread takes every request waiting, appends them all with one
//! `append_batch`, records the stored copies with one write (synced within a second), and
//! answers each session: the queue's group commit, applied to the store. Requests that
//! arrive while a commit runs wait for it and form the next batch; and a commit waits up to
//! `COMMIT_WAIT_MAX` for hand-overs that sessions announced (a recipient accepted, the
//! content on its way), as the queue's writer does for announced messages.
//!
//! Order within a commit, as in `dedup.rs`: the store commit, then the record (written;
//! synced within a second), then the replies. Under the shared mailbox lock, like a delivery batch: a user's removal waits for
//! the copies, and a move's freeze (which takes it exclusively once) is seen here.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use store::{AppendRequest, Appended, StoreError};

use crate::dedup::{Delivered, Key};

/// Copies in one commit at most (a request is never split).
const BATCH_COPIES_MAX: usize = 512;
/// How long a commit waits for announced hand-overs ([`Committer::incoming`]) to join it:
/// the queue's `commit_wait_max` idea. A sending node hands a batch over on several
/// connections at once; their transactions reach this node within a fraction of a
/// millisecond of each other, and each one that joins saves a store commit. Nobody announced means nobody waits.
const COMMIT_WAIT_MAX: Duration = Duration::from_millis(2);

/// One session's copies: each with its record key.
pub(crate) struct Request {
    pub(crate) copies: Vec<(AppendRequest, Key)>,
    /// Per copy: `None` when its user is frozen for a move (not stored).
    pub(crate) reply: tokio::sync::oneshot::Sender<Vec<Option<Result<Appended, StoreError>>>>,
}

/// What the sessions and the committer thread share.
struct Shared {
    requests: Mutex<Pending>,
    wake: Condvar,
    /// Hand-overs announced (a recipient accepted) and not yet requested or abandoned.
    incoming: AtomicUsize,
    /// `COMMIT_WAIT_MAX`, longer in tests.
    wait_max: Duration,
}

struct Pending {
    requests: VecDeque<Request>,
    /// Set when the server's context drops: the thread ends once the requests are done.
    stopped: bool,
}

impl Shared {
    fn pending(&self) -> std::sync::MutexGuard<'_, Pending> {
        self.requests.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The committer thread's mailbox.
pub(crate) struct Committer {
    shared: Arc<Shared>,
}

/// A hand-over on its way (see [`Committer::incoming`]).
pub(crate) struct Incoming {
    shared: Arc<Shared>,
}

impl Drop for Incoming {
    fn drop(&mut self) {
        self.shared.incoming.fetch_sub(1, Ordering::SeqCst);
        // Taking the lock orders this with the committer's check-then-wait, so the wake-up
        // is never lost between the two.
        drop(self.shared.pending());
        self.shared.wake.notify_all();
    }
}

impl Drop for Committer {
    fn drop(&mut self) {
        self.shared.pending().stopped = true;
        self.shared.wake.notify_all();
    }
}

impl Committer {
    pub(crate) fn start(
        store: store::Store,
        mailboxes: Arc<std::sync::RwLock<()>>,
        moves: Arc<crate::moves::Moves>,
        delivered: Arc<Delivered>,
    ) -> std::io::Result<Committer> {
        Self::start_waiting(store, mailboxes, moves, delivered, COMMIT_WAIT_MAX)
    }

    fn start_waiting(
        store: store::Store,
        mailboxes: Arc<std::sync::RwLock<()>>,
        moves: Arc<crate::moves::Moves>,
        delivered: Arc<Delivered>,
        wait_max: Duration,
    ) -> std::io::Result<Committer> {
        let shared = Arc::new(Shared {
            requests: Mutex::new(Pending {
                requests: VecDeque::new(),
                stopped: false,
            }),
            wake: Condvar::new(),
            incoming: AtomicUsize::new(0),
            wait_max,
        });
        let thread = shared.clone();
        std::thread::Builder::new()
            .name("handover-commit".into())
            .spawn(move || {
                while let Some(batch) = next_batch(&thread, &delivered) {
                    commit(&store, &mailboxes, &moves, &delivered, batch);
                }
            })?;
        Ok(Committer { shared })
    }

    /// Announces a hand-over on its way (an LMTP session from another node accepted a
    /// recipient): until the guard drops, a commit may wait up to `COMMIT_WAIT_MAX` for it.
    /// Drop it after [`Committer::store`] has queued the request, or when none will come.
    pub(crate) fn incoming(&self) -> Incoming {
        self.shared.incoming.fetch_add(1, Ordering::SeqCst);
        Incoming {
            shared: self.shared.clone(),
        }
    }

    /// Stores `copies`; their outcomes in order, once committed and recorded. The request
    /// is queued before the first await, so an [`Incoming`] dropped after this call was
    /// made (not awaited) is never waited for in vain.
    pub(crate) fn store(
        &self,
        copies: Vec<(AppendRequest, Key)>,
    ) -> impl std::future::Future<Output = Vec<Option<Result<Appended, StoreError>>>> + use<> {
        let count = copies.len();
        let (reply, answer) = tokio::sync::oneshot::channel();
        {
            let mut pending = self.shared.pending();
            pending.requests.push_back(Request { copies, reply });
        }
        self.shared.wake.notify_all();
        async move {
            answer.await.unwrap_or_else(|_| {
                vec![
                    Some(Err(StoreError::Failed(
                        "the hand-over committer stopped".into()
                    )));
                    count
                ]
            })
        }
    }
}

/// The next commit's requests: everything waiting, after holding the round open briefly
/// for announced hand-overs. `None` when stopped with nothing left.
fn next_batch(shared: &Shared, delivered: &Delivered) -> Option<Vec<Request>> {
    let mut pending = shared.pending();
    while pending.requests.is_empty() {
        if pending.stopped {
            return None;
        }
        if delivered.unsynced() {
            // Idle with records not yet synced: sync them after `SYNC_INTERVAL` at most.
            let (guard, waited) = shared
                .wake
                .wait_timeout(pending, crate::dedup::SYNC_INTERVAL)
                .unwrap_or_else(|p| p.into_inner());
            pending = guard;
            if waited.timed_out() && pending.requests.is_empty() {
                drop(pending);
                if let Err(e) = delivered.sync() {
                    tracing::error!(event = "cluster_delivered_error", error = %e, msg = "records not synced");
                }
                pending = shared.pending();
            }
        } else {
            pending = shared.wake.wait(pending).unwrap_or_else(|p| p.into_inner());
        }
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
    Some(batch)
}

fn copies(requests: &VecDeque<Request>) -> usize {
    requests.iter().map(|r| r.copies.len()).sum()
}

fn commit(
    store: &store::Store,
    mailboxes: &std::sync::RwLock<()>,
    moves: &crate::moves::Moves,
    delivered: &Delivered,
    batch: Vec<Request>,
) {
    let _shared = mailboxes.read().unwrap_or_else(|p| p.into_inner());
    let mut appends = Vec::new();
    let mut keys = Vec::new();
    // Per request, per copy: its index in `appends`, or None when held.
    let mut places: Vec<Vec<Option<usize>>> = Vec::with_capacity(batch.len());
    let mut replies = Vec::with_capacity(batch.len());
    for request in batch {
        let mut place = Vec::with_capacity(request.copies.len());
        for (append, key) in request.copies {
            if moves.held(&append.user) {
                place.push(None);
            } else {
                place.push(Some(appends.len()));
                appends.push(append);
                keys.push(key);
            }
        }
        places.push(place);
        replies.push(request.reply);
    }
    let results = if appends.is_empty() {
        Vec::new()
    } else {
        store.append_batch(appends)
    };
    let stored: Vec<Key> = keys
        .iter()
        .zip(&results)
        .filter(|(_, r)| r.is_ok())
        .map(|(k, _)| *k)
        .collect();
    if let Err(e) = delivered.record(&stored) {
        tracing::error!(
            event = "cluster_delivered_error",
            error = %e,
            msg = "a retry of these copies would store them again"
        );
    }
    for (place, reply) in places.into_iter().zip(replies) {
        let outcomes = place
            .into_iter()
            .map(|at| {
                at.map(|i| {
                    results.get(i).cloned().unwrap_or_else(|| {
                        Err(StoreError::Failed("no result from the store".into()))
                    })
                })
            })
            .collect();
        let _ = reply.send(outcomes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn copy(user: &str, n: u8) -> (AppendRequest, Key) {
        (
            AppendRequest {
                user: user.to_string(),
                folder: "INBOX".to_string(),
                message: store::NewMessage {
                    content: format!("Subject: {n}\r\n\r\nbody {n}\r\n").into_bytes(),
                    ..store::NewMessage::default()
                },
            },
            crate::dedup::key(&format!("n1:{n}"), user),
        )
    }

    /// Long enough that a loaded machine's scheduling never outlasts it.
    const WAIT: Duration = Duration::from_millis(500);

    /// A committer over a fresh store, directory and record in `dir`, waiting `WAIT` for
    /// announced hand-overs.
    fn committer(
        dir: &std::path::Path,
        runtime: &tokio::runtime::Runtime,
    ) -> (Committer, store::Store, Arc<Delivered>) {
        let (store, _) = store::Store::open(
            Arc::new(disk::RealDisk),
            &dir.join("store"),
            store::StoreConfig::default(),
        )
        .unwrap();
        store.create_folder("a@example.org", "INBOX").unwrap();
        let directory = runtime
            .block_on(directory::Directory::open_at(
                &directory::Location::Sqlite(dir.join("directory.db")),
                directory::Options::default(),
            ))
            .unwrap();
        let moves = Arc::new(crate::moves::Moves::new(None, directory));
        let delivered = Arc::new(Delivered::open(dir, Duration::from_secs(86_400), 1_000).unwrap());
        let committer = Committer::start_waiting(
            store.clone(),
            Arc::new(std::sync::RwLock::new(())),
            moves,
            delivered.clone(),
            WAIT,
        )
        .unwrap();
        (committer, store, delivered)
    }

    /// An announced hand-over joins the commit of one requested before it: one data sync
    /// for both, and both recorded.
    #[test]
    fn an_announced_hand_over_shares_the_commit() {
        let dir = tempfile::tempdir().unwrap();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let (committer, store, delivered) = committer(dir.path(), &runtime);
        let before = store.stats().data_syncs;
        let announced = committer.incoming();
        let first = committer.store(vec![copy("a@example.org", 1)]);
        // The committer now holds the round open for the announced one.
        std::thread::sleep(WAIT / 10);
        let second = committer.store(vec![copy("a@example.org", 2)]);
        drop(announced);
        let (first, second) = runtime.block_on(async { (first.await, second.await) });
        assert!(matches!(first.as_slice(), [Some(Ok(_))]), "{first:?}");
        assert!(matches!(second.as_slice(), [Some(Ok(_))]), "{second:?}");
        assert_eq!(store.stats().data_syncs - before, 1, "one commit for both");
        assert!(delivered.contains(&copy("a@example.org", 1).1));
        assert!(delivered.contains(&copy("a@example.org", 2).1));
    }

    /// An announcement that never turns into a request delays a commit by the wait at most; the record written for the 250 is synced once the committer falls idle.
    #[test]
    fn an_abandoned_announcement_costs_a_bounded_wait_and_the_record_is_synced() {
        let dir = tempfile::tempdir().unwrap();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let (committer, _store, delivered) = committer(dir.path(), &runtime);
        let _abandoned = committer.incoming();
        let started = Instant::now();
        let stored = runtime.block_on(committer.store(vec![copy("a@example.org", 3)]));
        let took = started.elapsed();
        assert!(matches!(stored.as_slice(), [Some(Ok(_))]), "{stored:?}");
        assert!(took >= WAIT, "waited {took:?}");
        assert!(took < WAIT * 10, "waited {took:?}");
        let deadline = Instant::now() + crate::dedup::SYNC_INTERVAL * 5;
        while delivered.unsynced() {
            assert!(Instant::now() < deadline, "the record was never synced");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}
