//! The owner's side of a hand-over: copies other nodes hand over, from every LMTP session at
//! once, stored in one store commit and recorded (`dedup.rs`) in one fsync.
//!
//! Each LMTP transaction carries one message, and a node hands a batch of messages over on
//! several connections at once, so an owner storing each transaction on its own would pay a
//! store commit (data sync + journal sync) and a record fsync per message, where local
//! delivery pays them once per batch. One committer thread takes every request waiting,
//! appends them all with one `append_batch`, records the stored copies with one fsync, and
//! answers each session: the queue's group commit, applied to the store. There is no timer:
//! requests that arrive while a commit runs wait for it and form the next batch.
//!
//! Order within a commit, as in `dedup.rs`: the store commit, then the record, then the
//! replies. Under the shared mailbox lock, like a delivery batch: a user's removal waits for
//! the copies, and a move's freeze (which takes it exclusively once) is seen here.

use std::sync::Arc;
use std::sync::mpsc;

use store::{AppendRequest, Appended, StoreError};

use crate::dedup::{Delivered, Key};

/// Copies in one commit at most (a request is never split).
const BATCH_COPIES_MAX: usize = 512;

/// One session's copies: each with its record key.
pub(crate) struct Request {
    pub(crate) copies: Vec<(AppendRequest, Key)>,
    /// Per copy: `None` when its user is frozen for a move (not stored).
    pub(crate) reply: tokio::sync::oneshot::Sender<Vec<Option<Result<Appended, StoreError>>>>,
}

/// The committer thread's mailbox.
pub(crate) struct Committer {
    requests: mpsc::Sender<Request>,
}

impl Committer {
    pub(crate) fn start(
        store: store::Store,
        mailboxes: Arc<std::sync::RwLock<()>>,
        moves: Arc<crate::moves::Moves>,
        delivered: Arc<Delivered>,
    ) -> std::io::Result<Committer> {
        let (requests, incoming) = mpsc::channel::<Request>();
        std::thread::Builder::new()
            .name("handover-commit".into())
            .spawn(move || {
                // Ends when every sender is gone (the server's context dropped).
                while let Ok(first) = incoming.recv() {
                    let mut batch = vec![first];
                    let mut copies = batch[0].copies.len();
                    while copies < BATCH_COPIES_MAX {
                        match incoming.try_recv() {
                            Ok(next) => {
                                copies += next.copies.len();
                                batch.push(next);
                            }
                            Err(_) => break,
                        }
                    }
                    commit(&store, &mailboxes, &moves, &delivered, batch);
                }
            })?;
        Ok(Committer { requests })
    }

    /// Stores `copies`; their outcomes in order, once committed and recorded.
    pub(crate) async fn store(
        &self,
        copies: Vec<(AppendRequest, Key)>,
    ) -> Vec<Option<Result<Appended, StoreError>>> {
        let count = copies.len();
        let (reply, answer) = tokio::sync::oneshot::channel();
        if self.requests.send(Request { copies, reply }).is_err() {
            return vec![
                Some(Err(StoreError::Failed(
                    "the hand-over committer stopped".into()
                )));
                count
            ];
        }
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
