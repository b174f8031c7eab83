//! Operator commands over a running queue: list, show, retry, remove (`mailstow queue ...`).
//!
//! They read records the way Ahead Read does (one `pread` per record, checked against its
//! slot), but take no lease, so delivery is never held up by an operator looking. Removal goes
//! through the writer like any completion: the record's done flag, then `fdatasync`.

use std::sync::Arc;

use disk::File;

use crate::error::QueueError;
use crate::format::{self, Kind, Slot};
use crate::index::Class;
use crate::queue::Core;
use crate::request::Request;
use crate::segment::status_legal;
use crate::{Envelope, MessageId, RecipientStatus};

/// What a message in the queue is waiting for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MessageClass {
    /// New mail in the main queue, not tried yet.
    Pending,
    /// Tried before; waiting for its next attempt time.
    Deferred,
    /// Every remaining recipient failed; waiting for its bounce to be sent.
    Bounce,
}

impl MessageClass {
    pub fn name(self) -> &'static str {
        match self {
            MessageClass::Pending => "pending",
            MessageClass::Deferred => "deferred",
            MessageClass::Bounce => "bounce",
        }
    }
}

/// One message as [`crate::Queue::list`] and [`crate::Queue::show`] report it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QueueEntry {
    pub id: MessageId,
    pub class: MessageClass,
    /// The record lies in a deferred segment (a copy made by an earlier attempt).
    pub deferred: bool,
    /// Sender, every recipient with its current status and last error, arrival time. Empty
    /// sender and recipients when the record could not be read (`damage` says why).
    pub envelope: Envelope,
    /// Content bytes.
    pub size: u64,
    pub attempts: u32,
    /// When delivery may try it next (Unix ms; 0 = now). In memory: `retry` sets it to 0.
    pub next_attempt_ms: u64,
    /// A delivery agent holds it right now.
    pub leased: bool,
    /// Why the record could not be read (it fails its checks; delivery will quarantine it).
    pub damage: Option<String>,
}

/// [`QueueEntry`] with the message content, from [`crate::Queue::show`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MessageDetail {
    pub entry: QueueEntry,
    pub content: Vec<u8>,
}

/// An index entry copied out under the lock, to be read without it.
struct Snapshot {
    id: MessageId,
    seg: u64,
    slot_index: u32,
    slot: Slot,
    kind: Kind,
    class: Class,
    leased: bool,
    file: Arc<dyn File>,
    path: std::path::PathBuf,
}

impl Snapshot {
    fn entry(&self, envelope: Envelope, damage: Option<String>) -> QueueEntry {
        QueueEntry {
            id: self.id,
            class: match (self.class, self.kind) {
                (Class::Bounce, _) => MessageClass::Bounce,
                (Class::Ready, Kind::Main) => MessageClass::Pending,
                (Class::Ready, Kind::Deferred) => MessageClass::Deferred,
            },
            deferred: self.kind == Kind::Deferred,
            envelope,
            size: u64::from(self.slot.content_len),
            attempts: u32::from(self.slot.attempts),
            next_attempt_ms: self.slot.next_attempt_ms,
            leased: self.leased,
            damage,
        }
    }

    /// Reads and checks the record (one `pread`): its envelope with the current statuses
    /// applied, and its content.
    fn read(&self) -> Result<(Envelope, Vec<u8>), String> {
        let mut buf = vec![0u8; self.slot.len as usize];
        self.file
            .read_exact_at(&mut buf, u64::from(self.slot.offset))
            .map_err(|e| format!("{}: read: {e}", self.path.display()))?;
        let view = format::check_record(&buf, &self.slot)
            .map_err(|why| format!("{}: {why}", self.path.display()))?;
        let mut envelope = format::decode_envelope(view.envelope)
            .map_err(|why| format!("{}: {why}", self.path.display()))?;
        if envelope.recipients.len() != view.statuses.len() {
            return Err("envelope and record disagree on the recipient count".into());
        }
        for (i, (r, &s)) in envelope
            .recipients
            .iter_mut()
            .zip(view.statuses)
            .enumerate()
        {
            if !status_legal(format::status_code(r.status), s) {
                return Err(format!(
                    "status byte {s} of recipient {i} cannot follow {:?}",
                    r.status
                ));
            }
            r.status = format::status_from_code(s).unwrap_or(RecipientStatus::Failed);
        }
        Ok((envelope, view.content.to_vec()))
    }
}

impl Core {
    fn snapshot(&self, id: MessageId) -> Result<Snapshot, QueueError> {
        let st = self.lock();
        st.check_open()?;
        let e = st.index.get(id).ok_or(QueueError::UnknownMessage(id))?;
        let seg = st
            .segments
            .get(&e.seg)
            .ok_or(QueueError::UnknownMessage(id))?;
        Ok(Snapshot {
            id,
            seg: e.seg,
            slot_index: e.slot_index,
            slot: e.slot,
            kind: e.kind,
            class: e.class,
            leased: e.lease.is_some(),
            file: seg.file.clone(),
            path: seg.path.clone(),
        })
    }

    /// Whether the message is still in the same record: if it is, the record was not done
    /// while we read it, so its segment was not recycled under us and the bytes are its own.
    fn still_there(&self, s: &Snapshot) -> bool {
        self.lock()
            .index
            .get(s.id)
            .is_some_and(|e| e.seg == s.seg && e.slot_index == s.slot_index)
    }

    pub(crate) fn list(&self) -> Result<Vec<QueueEntry>, QueueError> {
        let mut snaps: Vec<Snapshot> = {
            let st = self.lock();
            st.check_open()?;
            st.index
                .iter()
                .filter_map(|(id, e)| {
                    let seg = st.segments.get(&e.seg)?;
                    Some(Snapshot {
                        id,
                        seg: e.seg,
                        slot_index: e.slot_index,
                        slot: e.slot,
                        kind: e.kind,
                        class: e.class,
                        leased: e.lease.is_some(),
                        file: seg.file.clone(),
                        path: seg.path.clone(),
                    })
                })
                .collect()
        };
        snaps.sort_by_key(|s| s.id);
        let mut read = Vec::with_capacity(snaps.len());
        for s in &snaps {
            // Correct over fast: the whole record, checksum included, so a damaged record
            // shows as damaged here rather than only when delivery reaches it.
            let entry = match s.read() {
                Ok((envelope, _)) => s.entry(envelope, None),
                Err(why) => {
                    let envelope = Envelope {
                        sender: String::new(),
                        recipients: Vec::new(),
                        arrival_ms: s.slot.arrival_ms,
                    };
                    s.entry(envelope, Some(why))
                }
            };
            read.push(entry);
        }
        // Drop messages that left the queue while we read (finished, removed, moved on to a
        // deferred copy): what we read of them may be stale.
        let st = self.lock();
        Ok(snaps
            .iter()
            .zip(read)
            .filter(|(s, _)| {
                st.index
                    .get(s.id)
                    .is_some_and(|e| e.seg == s.seg && e.slot_index == s.slot_index)
            })
            .map(|(_, entry)| entry)
            .collect())
    }

    pub(crate) fn show(&self, id: MessageId) -> Result<MessageDetail, QueueError> {
        let s = self.snapshot(id)?;
        let read = s.read();
        if !self.still_there(&s) {
            return Err(QueueError::UnknownMessage(id));
        }
        let (envelope, content) =
            read.map_err(|why| QueueError::corrupt(format!("message {id}: {why}")))?;
        Ok(MessageDetail {
            entry: s.entry(envelope, None),
            content,
        })
    }

    pub(crate) fn retry(&self, id: MessageId) -> Result<(), QueueError> {
        let mut st = self.lock();
        st.check_open()?;
        let e = st.index.get(id).ok_or(QueueError::UnknownMessage(id))?;
        match (e.class, e.kind) {
            (Class::Bounce, _) => Err(QueueError::InvalidInput(format!(
                "message {id} is a bounce: every remaining recipient failed, nothing to retry"
            ))),
            // New mail is handed out in arrival order as soon as a delivery agent asks.
            (Class::Ready, Kind::Main) => Ok(()),
            (Class::Ready, Kind::Deferred) => {
                st.index.set_next_attempt(id, 0);
                Ok(())
            }
        }
    }

    pub(crate) fn remove(&self, id: MessageId) -> Result<(), QueueError> {
        let (seg, index) = {
            let mut st = self.lock();
            st.check_open()?;
            let e = st.index.get(id).ok_or(QueueError::UnknownMessage(id))?;
            if e.lease.is_some() {
                // The agent holding it will finish it; removing it under the agent would make
                // its finish fail and, for a store append already made, be a lie.
                return Err(QueueError::Leased(id));
            }
            let at = (e.seg, e.slot_index);
            // Out of the index at once, so no agent can lease it while the mark is written;
            // its segment still counts the slot live until the mark is durable (Q5).
            st.index.remove(id);
            at
        };
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        self.submit(Request::Remove {
            seg,
            index,
            done: Box::new(move |r| {
                let _ = tx.send(r);
            }),
        });
        rx.recv().unwrap_or(Err(QueueError::Closed))
    }
}
