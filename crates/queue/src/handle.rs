//! The public handle on a running queue: [`Queue`], cheap to clone, every clone sharing one
//! core and one writer thread, and [`Incoming`], an announced enqueue.
//!
//! `Queue::open` runs recovery and starts the writer; every other call hands over to the
//! shared core (`queue.rs`). The last clone to go stops the writer thread.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use crate::error::QueueError;
use crate::operator::{MessageDetail, QueueEntry};
use crate::queue::Core;
use crate::{
    Envelope, MessageId, Outcome, QueueConfig, QueueStats, QueuedMessage, RecoveryReport, recovery,
    writer,
};

/// The durable mail queue. Cheap to clone; all clones share one queue and one writer thread.
/// `Send + Sync`.
#[derive(Clone)]
pub struct Queue {
    shared: Arc<Shared>,
}

/// An announced enqueue (see [`Queue::incoming`]).
pub struct Incoming {
    core: Arc<Core>,
}

impl Drop for Incoming {
    fn drop(&mut self) {
        self.core
            .incoming
            .fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
        // Taking the lock orders this with the writer's check-then-wait, so the wake-up is
        // never lost between the two.
        drop(self.core.lock());
        self.core.wake.notify_all();
    }
}

/// Owns the writer thread: the last `Queue` clone dropping it stops the thread.
struct Shared {
    core: Arc<Core>,
    writer: Mutex<Option<JoinHandle<Result<(), QueueError>>>>,
}

impl Drop for Shared {
    fn drop(&mut self) {
        let _ = self.stop();
    }
}

impl Shared {
    fn stop(&self) -> Result<(), QueueError> {
        self.core.shut_down();
        let handle = self.writer.lock().unwrap_or_else(|p| p.into_inner()).take();
        // The last clone may be dropped inside a ticket callback, on the writer thread itself:
        // it exits on its own after the shutdown flag, and must not join itself.
        if handle
            .as_ref()
            .is_some_and(|h| h.thread().id() == std::thread::current().id())
        {
            return Ok(());
        }
        match handle {
            Some(h) => h
                .join()
                .unwrap_or_else(|_| Err(QueueError::Poisoned("the writer thread panicked".into()))),
            None => Ok(()),
        }
    }
}

impl Queue {
    /// Opens (creating if needed) the queue in `dir`, recovering it from its segment files.
    pub fn open(
        disk: Arc<dyn disk::Disk>,
        dir: &Path,
        config: QueueConfig,
    ) -> Result<(Queue, RecoveryReport), QueueError> {
        config.validate()?;
        let (core, writer, report) = recovery::recover(disk, dir, config)?;
        let handle = writer::spawn(core.clone(), writer)?;
        let shared = Shared {
            core,
            writer: Mutex::new(Some(handle)),
        };
        Ok((
            Queue {
                shared: Arc::new(shared),
            },
            report,
        ))
    }

    /// Appends a message; returns its id only after the `fdatasync` that makes it durable.
    pub fn enqueue(&self, envelope: Envelope, content: Vec<u8>) -> Result<MessageId, QueueError> {
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        self.enqueue_with(
            envelope,
            content,
            Box::new(move |r| {
                let _ = tx.send(r);
            }),
        );
        rx.recv().unwrap_or(Err(QueueError::Closed))
    }

    /// Non-blocking [`Queue::enqueue`]: `done` is called once with the outcome, on the
    /// writer thread after the covering `fdatasync` (or at once on the caller's thread if the
    /// input is rejected). `done` must not block on the queue.
    pub fn enqueue_with(
        &self,
        envelope: Envelope,
        content: Vec<u8>,
        done: Box<dyn FnOnce(Result<MessageId, QueueError>) + Send>,
    ) {
        self.shared.core.enqueue_with(envelope, content, done)
    }

    /// Announces an enqueue that is on its way (an SMTP session receiving a message's data):
    /// until the returned guard is dropped, the writer may hold a commit round open for up to
    /// `commit_wait_max`, so the announced message shares the next `fdatasync` instead of
    /// needing its own (PostgreSQL's `commit_siblings` idea). Drop the guard right after
    /// `enqueue_with`, or when the message will not come.
    pub fn incoming(&self) -> Incoming {
        self.shared
            .core
            .incoming
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Incoming {
            core: self.shared.core.clone(),
        }
    }

    /// Leases up to `records_max` ready messages (at most `bytes_max` record bytes, but at
    /// least one): the main queue in arrival order first, then deferred messages whose next
    /// attempt is due at `now_ms`. Runs of messages adjacent on disk are read with one `pread`.
    /// A record that fails its checks is quarantined (see [`Queue::quarantined`]) and skipped.
    pub fn next_batch(
        &self,
        now_ms: u64,
        records_max: usize,
        bytes_max: usize,
    ) -> Result<Vec<QueuedMessage>, QueueError> {
        self.shared.core.next_batch(now_ms, records_max, bytes_max)
    }

    /// Records the outcome of a delivery attempt for a leased message: exactly one outcome per
    /// pending recipient (`QueuedMessage::pending`). Durable when it returns; the lease ends.
    pub fn finish(&self, id: MessageId, outcomes: &[(usize, Outcome)]) -> Result<(), QueueError> {
        self.shared.core.finish(id, outcomes)
    }

    /// [`Queue::finish`] for many leased messages at once: they share one commit round, so a
    /// delivery agent finishing a batch pays one sync per touched segment, not one per message.
    /// One result per item, in order; an invalid item fails alone.
    pub fn finish_many(
        &self,
        items: &[(MessageId, Vec<(usize, Outcome)>)],
    ) -> Vec<Result<(), QueueError>> {
        self.shared.core.finish_many(items)
    }

    /// Drops a lease without an outcome: the message is handed out again later.
    pub fn release(&self, id: MessageId) {
        self.shared.core.release(id)
    }

    /// Leases up to `records_max` bounces (messages whose remaining recipients all failed).
    pub fn take_bounces(&self, records_max: usize) -> Result<Vec<QueuedMessage>, QueueError> {
        self.shared.core.take_bounces(records_max)
    }

    /// Removes a leased bounce once the bounce message has been sent. Durable when it returns.
    pub fn finish_bounce(&self, id: MessageId) -> Result<(), QueueError> {
        self.shared.core.finish_bounce(id)
    }

    /// Records taken out of the queue since open because they failed a check when read, with
    /// the reason. They stay on disk; `check(repair = true)` marks them done.
    pub fn quarantined(&self) -> Vec<(MessageId, String)> {
        self.shared.core.quarantined()
    }

    pub fn stats(&self) -> QueueStats {
        self.shared.core.stats()
    }

    /// Why the queue cannot take mail, if it stopped after an I/O failure (it needs a reopen);
    /// `None` when it can. A full disk does not stop it (requests are refused `NoSpace`).
    pub fn write_problem(&self) -> Option<String> {
        self.shared
            .core
            .lock()
            .poisoned
            .as_ref()
            .map(|why| format!("the queue stopped after an I/O failure: {why}"))
    }

    /// Every message in the queue (pending, deferred, bounces; leased or not), sorted by id,
    /// with its envelope and current recipient statuses. Reads each record once (one `pread`,
    /// checked like Ahead Read); a record that fails its checks is listed with `damage` set.
    /// Takes no lease. Quarantined records are not listed (see [`Queue::quarantined`]).
    pub fn list(&self) -> Result<Vec<QueueEntry>, QueueError> {
        self.shared.core.list()
    }

    /// One message with its content. A record that fails its checks is `Corrupt`.
    pub fn show(&self, id: MessageId) -> Result<MessageDetail, QueueError> {
        self.shared.core.show(id)
    }

    /// Makes a deferred message due now: the next `next_batch` hands it out whatever its
    /// retry time. In memory only: after a restart the retry time stored in its slot applies
    /// again. New mail is due already (a no-op); a bounce is `InvalidInput`.
    pub fn retry(&self, id: MessageId) -> Result<(), QueueError> {
        self.shared.core.retry(id)
    }

    /// Removes a message without delivering it or bouncing it: its record's done flag is set
    /// through the writer and synced before this returns, so it stays gone after a crash.
    /// A message a delivery agent holds right now is refused with [`QueueError::Leased`]
    /// (the agent may already have delivered it); try again once it is released or deferred.
    pub fn remove(&self, id: MessageId) -> Result<(), QueueError> {
        self.shared.core.remove(id)
    }

    /// Stops the writer thread after it has committed everything already submitted, for every
    /// clone of this queue. Later calls on clones fail with [`QueueError::Closed`].
    pub fn close(self) -> Result<(), QueueError> {
        self.shared.stop()
    }
}
