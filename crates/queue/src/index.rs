//! The in-memory queue index (the paper's MIN table): message id → where its record is and
//! what state it is in, plus the orders the readers hand messages out in.
//!
//! Main-queue messages come out in id order, which is arrival order (ids ascend with every
//! commit). Deferred ones come out by next attempt time. Bounces wait in their own set. A
//! leased message is in none of these orders until it is released or finished.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use crate::MessageId;
use crate::format::{Kind, Slot};

/// What a live record is waiting for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Class {
    /// Has at least one pending recipient: waiting for delivery.
    Ready,
    /// No pending recipient, at least one failed one: waiting for `take_bounces`.
    Bounce,
}

/// A lease handed out by `next_batch` or `take_bounces`.
#[derive(Clone, Debug)]
pub(crate) struct Lease {
    /// Distinguishes this lease from a later one on the same message.
    pub(crate) token: u64,
    /// The record's status bytes as read when the lease was taken.
    pub(crate) statuses: Vec<u8>,
}

/// One message in the index.
#[derive(Clone, Debug)]
pub(crate) struct Entry {
    pub(crate) seg: u64,
    pub(crate) slot_index: u32,
    pub(crate) slot: Slot,
    pub(crate) kind: Kind,
    pub(crate) class: Class,
    pub(crate) lease: Option<Lease>,
}

#[derive(Default)]
pub(crate) struct Index {
    entries: HashMap<MessageId, Entry>,
    main_ready: BTreeSet<MessageId>,
    deferred_ready: BTreeSet<(u64, MessageId)>,
    bounces: BTreeSet<MessageId>,
    /// Records that failed their checks when read: out of the queue, reported, left on disk.
    pub(crate) quarantined: BTreeMap<MessageId, String>,
    pub(crate) pending_main: usize,
    pub(crate) pending_deferred: usize,
    pub(crate) bounce_count: usize,
    pub(crate) bytes_used: u64,
    pub(crate) leased: usize,
}

impl Index {
    pub(crate) fn get(&self, id: MessageId) -> Option<&Entry> {
        self.entries.get(&id)
    }

    pub(crate) fn get_mut(&mut self, id: MessageId) -> Option<&mut Entry> {
        self.entries.get_mut(&id)
    }

    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// Every message in the index, in no particular order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (MessageId, &Entry)> {
        self.entries.iter().map(|(id, e)| (*id, e))
    }

    /// Moves a message's next attempt time (in memory only), keeping the deferred order right.
    /// A leased message keeps its lease and is ordered by the new time when released.
    pub(crate) fn set_next_attempt(&mut self, id: MessageId, at_ms: u64) {
        let Some(e) = self.entries.get(&id).cloned() else {
            return;
        };
        self.unlink(id, &e);
        if let Some(e) = self.entries.get_mut(&id) {
            e.slot.next_attempt_ms = at_ms;
            let e = e.clone();
            self.link(id, &e);
        }
    }

    fn counter(&mut self, e: &Entry) -> &mut usize {
        match (e.class, e.kind) {
            (Class::Bounce, _) => &mut self.bounce_count,
            (Class::Ready, Kind::Main) => &mut self.pending_main,
            (Class::Ready, Kind::Deferred) => &mut self.pending_deferred,
        }
    }

    fn link(&mut self, id: MessageId, e: &Entry) {
        if e.lease.is_some() {
            return;
        }
        match (e.class, e.kind) {
            (Class::Bounce, _) => self.bounces.insert(id),
            (Class::Ready, Kind::Main) => self.main_ready.insert(id),
            (Class::Ready, Kind::Deferred) => {
                self.deferred_ready.insert((e.slot.next_attempt_ms, id))
            }
        };
    }

    fn unlink(&mut self, id: MessageId, e: &Entry) {
        match (e.class, e.kind) {
            (Class::Bounce, _) => self.bounces.remove(&id),
            (Class::Ready, Kind::Main) => self.main_ready.remove(&id),
            (Class::Ready, Kind::Deferred) => {
                self.deferred_ready.remove(&(e.slot.next_attempt_ms, id))
            }
        };
    }

    /// Adds a message. The caller guarantees the id is not present (one live record per id).
    pub(crate) fn insert(&mut self, id: MessageId, e: Entry) {
        debug_assert!(
            !self.entries.contains_key(&id),
            "message {id} indexed twice"
        );
        *self.counter(&e) += 1;
        self.bytes_used += u64::from(e.slot.len);
        if e.lease.is_some() {
            self.leased += 1;
        }
        self.link(id, &e);
        self.entries.insert(id, e);
    }

    pub(crate) fn remove(&mut self, id: MessageId) -> Option<Entry> {
        let e = self.entries.remove(&id)?;
        self.unlink(id, &e);
        *self.counter(&e) -= 1;
        self.bytes_used -= u64::from(e.slot.len);
        if e.lease.is_some() {
            self.leased -= 1;
        }
        Some(e)
    }

    /// Leases up to `records_max` ready messages (at least one if any is ready, even if larger
    /// than `bytes_max`): main queue first, then deferred ones due at `now_ms`.
    pub(crate) fn lease_ready(
        &mut self,
        now_ms: u64,
        records_max: usize,
        bytes_max: usize,
        token: &mut u64,
    ) -> Vec<MessageId> {
        let mut out = Vec::new();
        let mut bytes = 0u64;
        let fits = |out: &Vec<MessageId>, bytes: u64, len: u32| {
            out.len() < records_max
                && (out.is_empty() || bytes + u64::from(len) <= bytes_max as u64)
        };
        let mut main = Vec::new();
        for &id in &self.main_ready {
            let len = self.entries[&id].slot.len;
            if !fits(&main, bytes, len) {
                break;
            }
            bytes += u64::from(len);
            main.push(id);
        }
        out.extend(main);
        let mut deferred = Vec::new();
        for &(at, id) in &self.deferred_ready {
            let len = self.entries[&id].slot.len;
            if at > now_ms || out.len() + deferred.len() >= records_max {
                break;
            }
            if !(out.is_empty() && deferred.is_empty()) && bytes + u64::from(len) > bytes_max as u64
            {
                break;
            }
            bytes += u64::from(len);
            deferred.push(id);
        }
        out.extend(deferred);
        for &id in &out {
            self.lease(id, token);
        }
        out
    }

    /// Leases up to `records_max` bounces.
    pub(crate) fn lease_bounces(&mut self, records_max: usize, token: &mut u64) -> Vec<MessageId> {
        let ids: Vec<MessageId> = self.bounces.iter().copied().take(records_max).collect();
        for &id in &ids {
            self.lease(id, token);
        }
        ids
    }

    fn lease(&mut self, id: MessageId, token: &mut u64) {
        let Some(e) = self.entries.get(&id).cloned() else {
            return;
        };
        debug_assert!(e.lease.is_none());
        self.unlink(id, &e);
        *token += 1;
        self.leased += 1;
        if let Some(e) = self.entries.get_mut(&id) {
            e.lease = Some(Lease {
                token: *token,
                statuses: Vec::new(),
            });
        }
    }

    /// Drops a lease; the message becomes available again. No-op if not leased.
    pub(crate) fn release(&mut self, id: MessageId) {
        let Some(e) = self.entries.get_mut(&id) else {
            return;
        };
        if e.lease.take().is_none() {
            return;
        }
        self.leased -= 1;
        let e = e.clone();
        self.link(id, &e);
    }

    /// Changes a message's class (ending any lease), keeping the counters right.
    pub(crate) fn reclassify(&mut self, id: MessageId, class: Class) {
        if let Some(mut e) = self.remove(id) {
            e.class = class;
            e.lease = None;
            self.insert(id, e);
        }
    }

    /// Takes a message out of the queue because its record failed a check when read.
    pub(crate) fn quarantine(&mut self, id: MessageId, why: String) {
        if self.remove(id).is_some() {
            self.quarantined.insert(id, why);
        }
    }
}
