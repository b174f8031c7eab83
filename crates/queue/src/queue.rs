//! The shared core of a running queue: the index and segment table behind one mutex, the
//! request queue the writer thread drains, and the caller-side halves of the operations
//! (input checks, Ahead Read, building deferred copies).
//!
//! Callers never do I/O while holding the mutex: they copy what they need (file handles,
//! slots) and read outside it, so delivery reads never stall the writer.

use std::collections::{BTreeMap, VecDeque};
use std::io;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use disk::{Disk, File};

use crate::error::QueueError;
use crate::format::{self, Kind, Slot};
use crate::index::{Class, Index};
use crate::request::{CopyRecord, FinishRequest, Request, Ticket};
use crate::segment::{SegState, SegmentInfo, status_legal};
use crate::{
    Envelope, MessageId, Outcome, QueueConfig, QueueStats, QueuedMessage, RecipientStatus,
};

pub(crate) struct Core {
    pub(crate) disk: Arc<dyn Disk>,
    pub(crate) dir: PathBuf,
    pub(crate) config: QueueConfig,
    pub(crate) state: Mutex<State>,
    /// Signalled when a request is queued or the queue shuts down.
    pub(crate) wake: Condvar,
    pub(crate) fdatasyncs: AtomicU64,
    pub(crate) records_committed: AtomicU64,
    pub(crate) batches_committed: AtomicU64,
    /// Producers that announced an enqueue they have not submitted yet (see `Incoming`).
    pub(crate) incoming: std::sync::atomic::AtomicUsize,
}

pub(crate) struct State {
    pub(crate) requests: VecDeque<Request>,
    pub(crate) shutdown: bool,
    pub(crate) poisoned: Option<String>,
    pub(crate) index: Index,
    /// Every readable segment, by sequence number.
    pub(crate) segments: BTreeMap<u64, SegmentInfo>,
    /// Last lease token handed out.
    pub(crate) token: u64,
}

impl State {
    pub(crate) fn check_open(&self) -> Result<(), QueueError> {
        if let Some(why) = &self.poisoned {
            return Err(QueueError::Poisoned(why.clone()));
        }
        if self.shutdown {
            return Err(QueueError::Closed);
        }
        Ok(())
    }
}

/// A leased message about to be read.
struct Pick {
    id: MessageId,
    token: u64,
    seg: u64,
    slot_index: u32,
    slot: Slot,
    kind: Kind,
    file: Arc<dyn File>,
    path: PathBuf,
}

impl Core {
    pub(crate) fn lock(&self) -> MutexGuard<'_, State> {
        // Every critical section leaves the state consistent before anything can panic, so a
        // poisoned mutex (a panicking callback) does not make the data wrong.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn shut_down(&self) {
        self.lock().shutdown = true;
        self.wake.notify_all();
    }

    pub(crate) fn submit(&self, request: Request) {
        let mut st = self.lock();
        if let Err(e) = st.check_open() {
            drop(st);
            request.fail(e);
            return;
        }
        st.requests.push_back(request);
        drop(st);
        self.wake.notify_one();
    }

    /// Queues several requests at once, so the writer takes them in the same round.
    fn submit_all(&self, requests: Vec<Request>) {
        if requests.is_empty() {
            return;
        }
        let mut st = self.lock();
        if st.check_open().is_err() {
            let errors: Vec<QueueError> = requests
                .iter()
                .map(|_| st.check_open().err().unwrap_or(QueueError::Closed))
                .collect();
            drop(st);
            for (r, e) in requests.into_iter().zip(errors) {
                r.fail(e);
            }
            return;
        }
        st.requests.extend(requests);
        drop(st);
        self.wake.notify_one();
    }

    /// Largest record a new segment can hold.
    fn record_capacity(&self) -> u64 {
        format::record_capacity(self.config.segment_bytes)
    }

    fn check_envelope(&self, e: &Envelope, content_len: usize) -> Result<(), QueueError> {
        let c = &self.config;
        if e.recipients.is_empty() {
            return Err(QueueError::InvalidInput(
                "a message needs at least one recipient".into(),
            ));
        }
        if e.recipients.len() > c.recipients_max {
            return Err(QueueError::TooLarge {
                what: "recipient list",
                size: e.recipients.len(),
                max: c.recipients_max,
            });
        }
        if content_len > c.message_bytes_max {
            return Err(QueueError::TooLarge {
                what: "message",
                size: content_len,
                max: c.message_bytes_max,
            });
        }
        if e.sender.len() > c.address_bytes_max {
            return Err(QueueError::TooLarge {
                what: "sender address",
                size: e.sender.len(),
                max: c.address_bytes_max,
            });
        }
        for r in &e.recipients {
            if r.address.is_empty() {
                return Err(QueueError::InvalidInput("empty recipient address".into()));
            }
            if r.address.len() > c.address_bytes_max {
                return Err(QueueError::TooLarge {
                    what: "recipient address",
                    size: r.address.len(),
                    max: c.address_bytes_max,
                });
            }
            if let Some(err) = &r.last_error
                && err.len() > format::REASON_BYTES_MAX
            {
                return Err(QueueError::TooLarge {
                    what: "recipient last_error",
                    size: err.len(),
                    max: format::REASON_BYTES_MAX,
                });
            }
            if r.status == RecipientStatus::Moved {
                return Err(QueueError::InvalidInput(
                    "a new message cannot have moved recipients".into(),
                ));
            }
        }
        if !e
            .recipients
            .iter()
            .any(|r| r.status == RecipientStatus::Pending)
        {
            return Err(QueueError::InvalidInput(
                "a new message needs a pending recipient".into(),
            ));
        }
        Ok(())
    }

    pub(crate) fn enqueue_with(
        &self,
        envelope: Envelope,
        content: Vec<u8>,
        done: Ticket<MessageId>,
    ) {
        if let Err(e) = self.check_envelope(&envelope, content.len()) {
            done(Err(e));
            return;
        }
        let encoded = format::encode_envelope(&envelope);
        // Leave room for the failure reasons a deferred copy may add, so a message that was
        // accepted can always be deferred.
        let n = envelope.recipients.len();
        let worst = format::record_len(
            n,
            encoded.len() + n * (3 + format::REASON_BYTES_MAX),
            content.len(),
        );
        if worst > self.record_capacity() {
            done(Err(QueueError::TooLarge {
                what: "message record (for this segment_bytes)",
                size: worst as usize,
                max: self.record_capacity() as usize,
            }));
            return;
        }
        let statuses = envelope
            .recipients
            .iter()
            .map(|r| format::status_code(r.status))
            .collect();
        self.submit(Request::Enqueue {
            envelope: encoded,
            statuses,
            content,
            arrival_ms: envelope.arrival_ms,
            done,
        });
    }

    pub(crate) fn next_batch(
        &self,
        now_ms: u64,
        records_max: usize,
        bytes_max: usize,
    ) -> Result<Vec<QueuedMessage>, QueueError> {
        let picks = {
            let mut st = self.lock();
            st.check_open()?;
            let st = &mut *st;
            let ids = st
                .index
                .lease_ready(now_ms, records_max, bytes_max, &mut st.token);
            picks(st, &ids)
        };
        self.read_picks(picks, false)
    }

    pub(crate) fn take_bounces(
        &self,
        records_max: usize,
    ) -> Result<Vec<QueuedMessage>, QueueError> {
        let picks = {
            let mut st = self.lock();
            st.check_open()?;
            let st = &mut *st;
            let ids = st.index.lease_bounces(records_max, &mut st.token);
            picks(st, &ids)
        };
        self.read_picks(picks, true)
    }

    /// Ahead Read: reads each run of adjacent picks with one `pread`, checks every record and
    /// records the status bytes in its lease.
    fn read_picks(&self, picks: Vec<Pick>, bounce: bool) -> Result<Vec<QueuedMessage>, QueueError> {
        let mut out = Vec::with_capacity(picks.len());
        let mut leases = Vec::with_capacity(picks.len());
        let mut bad = Vec::new();
        let mut settled = Vec::new();
        let mut i = 0;
        let mut single = false;
        while i < picks.len() {
            let mut j = i + 1;
            while !single
                && j < picks.len()
                && picks[j].seg == picks[i].seg
                && picks[j].slot.offset == picks[j - 1].slot.offset + picks[j - 1].slot.len
            {
                j += 1;
            }
            let start = u64::from(picks[i].slot.offset);
            let end = u64::from(picks[j - 1].slot.offset) + u64::from(picks[j - 1].slot.len);
            let mut buf = vec![0u8; (end - start) as usize];
            match picks[i].file.read_exact_at(&mut buf, start) {
                Ok(()) => {
                    let run_of_one = j == i + 1;
                    for p in &picks[i..j] {
                        let a = (u64::from(p.slot.offset) - start) as usize;
                        match decode_message(&buf[a..a + p.slot.len as usize], p, bounce) {
                            Ok(Decoded::Message(mut msg, statuses, content)) => {
                                let content = (a + content.start)..(a + content.end);
                                msg.content = if run_of_one {
                                    // The read buffer becomes the content: a large message
                                    // is not held twice.
                                    let mut own = std::mem::take(&mut buf);
                                    own.copy_within(content.clone(), 0);
                                    own.truncate(content.len());
                                    own
                                } else {
                                    buf[content].to_vec()
                                };
                                leases.push((p.id, p.token, statuses));
                                out.push(msg);
                            }
                            Ok(Decoded::Settled { failed }) => settled.push((
                                p.id,
                                p.token,
                                p.seg,
                                p.slot_index,
                                failed && !bounce,
                            )),
                            Err(why) => bad.push((p.id, format!("{}: {why}", p.path.display()))),
                        }
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof && j - i > 1 => {
                    // A truncated file: read from here on one record at a time, so the
                    // records before the cut are still handed out.
                    single = true;
                    continue;
                }
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => {
                    let p = &picks[i];
                    bad.push((
                        p.id,
                        format!("{}: record lies past the end of the file", p.path.display()),
                    ));
                }
                Err(e) => {
                    let mut st = self.lock();
                    for p in &picks {
                        st.index.release(p.id);
                    }
                    return Err(QueueError::io("read records from", &picks[i].path, e));
                }
            }
            i = j;
        }
        let mut st = self.lock();
        for (id, token, statuses) in leases {
            if let Some(e) = st.index.get_mut(id)
                && let Some(lease) = &mut e.lease
                && lease.token == token
            {
                lease.statuses = statuses;
            }
        }
        for (id, why) in bad {
            st.index.quarantine(id, why);
        }
        let mut resolved = Vec::new();
        for (id, token, seg, slot_index, to_bounce) in settled {
            if st
                .index
                .get(id)
                .and_then(|e| e.lease.as_ref())
                .map(|l| l.token)
                != Some(token)
            {
                continue;
            }
            if to_bounce {
                st.index.reclassify(id, Class::Bounce);
            } else {
                st.index.remove(id);
                resolved.push(Request::Resolve {
                    seg,
                    index: slot_index,
                });
            }
        }
        drop(st);
        for r in resolved {
            self.submit(r);
        }
        Ok(out)
    }

    pub(crate) fn release(&self, id: MessageId) {
        self.lock().index.release(id);
    }

    pub(crate) fn finish(
        &self,
        id: MessageId,
        outcomes: &[(usize, Outcome)],
    ) -> Result<(), QueueError> {
        self.finish_many(&[(id, outcomes.to_vec())])
            .pop()
            .unwrap_or(Err(QueueError::Closed))
    }

    /// Several finishes submitted together, so one writer round (one sync per touched
    /// segment) covers them all; one result per item, in order.
    pub(crate) fn finish_many(
        &self,
        items: &[(MessageId, Vec<(usize, Outcome)>)],
    ) -> Vec<Result<(), QueueError>> {
        let mut waits = Vec::with_capacity(items.len());
        let mut requests = Vec::with_capacity(items.len());
        for (id, outcomes) in items {
            match self.prepare_finish(*id, outcomes) {
                Ok((token, now, copy)) => {
                    let (tx, rx) = std::sync::mpsc::sync_channel(1);
                    requests.push(Request::Finish(FinishRequest {
                        id: *id,
                        token,
                        now,
                        copy,
                        done: Box::new(move |r| {
                            let _ = tx.send(r);
                        }),
                    }));
                    waits.push(Ok(rx));
                }
                Err(e) => waits.push(Err(e)),
            }
        }
        self.submit_all(requests);
        waits
            .into_iter()
            .map(|w| w.and_then(|rx| rx.recv().unwrap_or(Err(QueueError::Closed))))
            .collect()
    }

    /// Checks a finish against the lease and builds what the writer needs: the lease token,
    /// the status bytes after it, and the deferred copy if any recipient is not delivered.
    fn prepare_finish(
        &self,
        id: MessageId,
        outcomes: &[(usize, Outcome)],
    ) -> Result<(u64, Vec<u8>, Option<CopyRecord>), QueueError> {
        let (token, statuses, slot, file, path) = {
            let st = self.lock();
            st.check_open()?;
            let e = st.index.get(id).ok_or(QueueError::UnknownMessage(id))?;
            let lease = e.lease.as_ref().ok_or(QueueError::NotLeased(id))?;
            if e.class == Class::Bounce {
                return Err(QueueError::InvalidInput(format!(
                    "message {id} is a bounce: use finish_bounce"
                )));
            }
            if lease.statuses.is_empty() {
                // Leased, but `next_batch` has not read it yet: not the caller's to finish.
                return Err(QueueError::NotLeased(id));
            }
            let seg = st
                .segments
                .get(&e.seg)
                .ok_or(QueueError::UnknownMessage(id))?;
            (
                lease.token,
                lease.statuses.clone(),
                e.slot,
                seg.file.clone(),
                seg.path.clone(),
            )
        };
        // Exactly one outcome per pending recipient: anything else would leave a recipient in
        // two records or in none.
        let mut seen = vec![false; statuses.len()];
        for (i, _) in outcomes {
            if *i >= statuses.len() || statuses[*i] != format::STATUS_PENDING {
                return Err(QueueError::InvalidInput(format!(
                    "message {id}: recipient {i} is not pending"
                )));
            }
            if std::mem::replace(&mut seen[*i], true) {
                return Err(QueueError::InvalidInput(format!(
                    "message {id}: two outcomes for recipient {i}"
                )));
            }
        }
        let pending = statuses
            .iter()
            .filter(|&&s| s == format::STATUS_PENDING)
            .count();
        if outcomes.len() != pending {
            return Err(QueueError::InvalidInput(format!(
                "message {id}: {} outcomes for {pending} pending recipients",
                outcomes.len()
            )));
        }
        let mut now = statuses.clone();
        for (i, o) in outcomes {
            if *o == Outcome::Delivered {
                now[*i] = format::STATUS_DELIVERED;
            }
        }
        let copy = if outcomes.iter().all(|(_, o)| *o == Outcome::Delivered) {
            None
        } else {
            Some(self.build_copy(id, &slot, &*file, &path, &statuses, outcomes)?)
        };
        Ok((token, now, copy))
    }

    /// The deferred copy of a message: every recipient, with this attempt's outcomes applied
    /// (so recipient indexes stay the same in every copy), one more attempt, and the earliest
    /// retry time of its deferred recipients.
    fn build_copy(
        &self,
        id: MessageId,
        slot: &Slot,
        file: &dyn File,
        path: &std::path::Path,
        statuses: &[u8],
        outcomes: &[(usize, Outcome)],
    ) -> Result<CopyRecord, QueueError> {
        let mut buf = vec![0u8; slot.len as usize];
        file.read_exact_at(&mut buf, u64::from(slot.offset))
            .map_err(|e| QueueError::io("read record from", path, e))?;
        let view = format::check_record(&buf, slot).map_err(|why| {
            QueueError::corrupt(format!("message {id} in {}: {why}", path.display()))
        })?;
        let mut env = format::decode_envelope(view.envelope).map_err(|why| {
            QueueError::corrupt(format!("message {id} in {}: {why}", path.display()))
        })?;
        if env.recipients.len() != statuses.len() {
            return Err(QueueError::corrupt(format!(
                "message {id}: recipient count changed"
            )));
        }
        for (r, &s) in env.recipients.iter_mut().zip(statuses) {
            r.status = format::status_from_code(s).unwrap_or(RecipientStatus::Failed);
        }
        let mut next_attempt = u64::MAX;
        for (i, o) in outcomes {
            let r = &mut env.recipients[*i];
            match o {
                Outcome::Delivered => r.status = RecipientStatus::Delivered,
                Outcome::Deferred {
                    retry_at_ms,
                    reason,
                } => {
                    r.status = RecipientStatus::Pending;
                    r.last_error = Some(cut_reason(reason));
                    next_attempt = next_attempt.min(*retry_at_ms);
                }
                Outcome::Failed { reason } => {
                    r.status = RecipientStatus::Failed;
                    r.last_error = Some(cut_reason(reason));
                }
            }
        }
        let statuses = env
            .recipients
            .iter()
            .map(|r| format::status_code(r.status))
            .collect();
        Ok(CopyRecord {
            envelope: format::encode_envelope(&env),
            statuses,
            content: view.content.to_vec(),
            attempts: slot.attempts.saturating_add(1),
            arrival_ms: slot.arrival_ms,
            next_attempt_ms: if next_attempt == u64::MAX {
                0
            } else {
                next_attempt
            },
        })
    }

    pub(crate) fn finish_bounce(&self, id: MessageId) -> Result<(), QueueError> {
        let token = {
            let st = self.lock();
            st.check_open()?;
            let e = st.index.get(id).ok_or(QueueError::UnknownMessage(id))?;
            let lease = e.lease.as_ref().ok_or(QueueError::NotLeased(id))?;
            if e.class != Class::Bounce {
                return Err(QueueError::InvalidInput(format!(
                    "message {id} is not a bounce"
                )));
            }
            lease.token
        };
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        self.submit(Request::FinishBounce {
            id,
            token,
            done: Box::new(move |r| {
                let _ = tx.send(r);
            }),
        });
        rx.recv().unwrap_or(Err(QueueError::Closed))
    }

    pub(crate) fn quarantined(&self) -> Vec<(MessageId, String)> {
        self.lock()
            .index
            .quarantined
            .iter()
            .map(|(id, why)| (*id, why.clone()))
            .collect()
    }

    pub(crate) fn stats(&self) -> QueueStats {
        let st = self.lock();
        let mut s = QueueStats {
            pending_messages: st.index.pending_main,
            deferred_messages: st.index.pending_deferred,
            bounces: st.index.bounce_count,
            leased: st.index.leased,
            quarantined: st.index.quarantined.len(),
            bytes_used: st.index.bytes_used,
            fdatasyncs: self.fdatasyncs.load(Ordering::Relaxed),
            records_committed: self.records_committed.load(Ordering::Relaxed),
            batches_committed: self.batches_committed.load(Ordering::Relaxed),
            ..QueueStats::default()
        };
        for seg in st.segments.values() {
            match (seg.state, seg.header.kind) {
                (SegState::Free, _) => s.free_segments += 1,
                (_, Kind::Main) => s.main_segments += 1,
                (_, Kind::Deferred) => s.deferred_segments += 1,
            }
        }
        s
    }
}

fn picks(st: &State, ids: &[MessageId]) -> Vec<Pick> {
    ids.iter()
        .filter_map(|&id| {
            let e = st.index.get(id)?;
            let seg = st.segments.get(&e.seg)?;
            Some(Pick {
                id,
                token: e.lease.as_ref().map_or(0, |l| l.token),
                seg: e.seg,
                slot_index: e.slot_index,
                slot: e.slot,
                kind: e.kind,
                file: seg.file.clone(),
                path: seg.path.clone(),
            })
        })
        .collect()
}

/// Cuts a failure reason to what a deferred copy keeps, at a character boundary.
fn cut_reason(reason: &str) -> String {
    let mut end = reason.len().min(format::REASON_BYTES_MAX);
    while !reason.is_char_boundary(end) {
        end -= 1;
    }
    reason[..end].to_string()
}

/// What a record read by Ahead Read turned out to be.
enum Decoded {
    /// A message to hand out (its content still empty), its status bytes, and where its
    /// content lies in the record.
    Message(QueuedMessage, Vec<u8>, std::ops::Range<usize>),
    /// Nothing left to hand out: no pending recipient (for a bounce: no failed one).
    Settled { failed: bool },
}

/// Checks one record read by Ahead Read and builds the message handed out.
fn decode_message(bytes: &[u8], p: &Pick, bounce: bool) -> Result<Decoded, String> {
    let view = format::check_record(bytes, &p.slot)?;
    let mut envelope = format::decode_envelope(view.envelope)?;
    if envelope.recipients.len() != view.statuses.len() {
        return Err("envelope and record disagree on the recipient count".into());
    }
    let mut wanted = Vec::new();
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
        let want = if bounce {
            format::STATUS_FAILED
        } else {
            format::STATUS_PENDING
        };
        if s == want {
            wanted.push(i);
        }
        r.status = format::status_from_code(s).unwrap_or(RecipientStatus::Failed);
    }
    if wanted.is_empty() {
        // The status bytes say more is settled than the index thought: a status write
        // survived a crash that lost the slot's hint (see `recovery::read_statuses`).
        let failed = view.statuses.contains(&format::STATUS_FAILED);
        return Ok(Decoded::Settled { failed });
    }
    let msg = QueuedMessage {
        id: p.id,
        envelope,
        content: Vec::new(),
        attempts: u32::from(p.slot.attempts),
        pending: wanted,
        deferred: p.kind == Kind::Deferred,
    };
    let content = view.content_start..view.content_start + view.content.len();
    Ok(Decoded::Message(msg, view.statuses.to_vec(), content))
}
