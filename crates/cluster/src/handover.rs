//! The owner's side of a hand-over: a copy another node hands over over LMTP (`XORIGIN`,
//! `XEPOCH`) goes straight into the store, one reply per recipient (the seed's version 2: no
//! second queue on the way).
//!
//! A recipient is taken only if this node owns it at the epoch the origin routed with
//! ([`HandOver::owns`]); a copy this node already stored for the same origin message is
//! acknowledged without storing it again ([`HandOver::already_stored`], `record.rs`). The
//! copies of every concurrent hand-over share one store commit: the LMTP session announces
//! its copies once a recipient is accepted ([`HandOver::incoming`]), and the store's commit
//! waits a moment for announced ones (`store::Store::incoming`; the queue's group commit,
//! applied to the store). Order within a hand-over, as `record.rs` requires: the store
//! commit (through the one road, `mailboxes::Deposit`, which logs each `delivered` line),
//! then the record, then the replies. The SMTP replies themselves are the server's.

use std::sync::Arc;

use mailboxes::{Copy, Deposit, Deposited, Origin};
use store::AppendRequest;

use crate::record::{self, Delivered};

/// What an owner node needs to take hand-overs.
pub struct HandOver {
    node: String,
    directory: directory::Directory,
    deposit: Arc<Deposit>,
    record: Arc<Delivered>,
}

impl HandOver {
    pub fn new(
        node: String,
        directory: directory::Directory,
        deposit: Arc<Deposit>,
        record: Arc<Delivered>,
    ) -> HandOver {
        HandOver {
            node,
            directory,
            deposit,
            record,
        }
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
        let stored = self.record.contains(&record::key(origin, user));
        if stored {
            tracing::info!(
                event = "duplicate",
                origin = %telemetry::shown(origin),
                to = %telemetry::shown(user)
            );
        }
        stored
    }

    /// Announces copies on their way (an LMTP session accepted a recipient): the store's
    /// next commit may wait for them. Pass it to [`HandOver::store`].
    pub fn incoming(&self) -> store::Incoming {
        self.deposit.incoming()
    }

    /// Stores the `origin` message's copies in one commit with every other hand-over's,
    /// records the stored ones, then returns each copy's outcome (in order).
    pub async fn store(
        &self,
        origin: &str,
        appends: Vec<AppendRequest>,
        announced: Option<store::Incoming>,
    ) -> Vec<Deposited> {
        let count = appends.len();
        let keys: Vec<record::Key> = appends
            .iter()
            .map(|a| record::key(origin, &a.user))
            .collect();
        let copies = appends
            .into_iter()
            .map(|append| Copy {
                append,
                origin: Origin::HandedOver {
                    origin: origin.to_string(),
                },
            })
            .collect();
        let (deposit, delivered) = (self.deposit.clone(), self.record.clone());
        let stored = tokio::task::spawn_blocking(move || {
            let gate = deposit.gate().clone();
            let shared = gate.shared();
            let outcomes = deposit.deposit(&shared, copies, announced);
            drop(shared);
            let stored: Vec<record::Key> = keys
                .iter()
                .zip(&outcomes)
                .filter(|(_, outcome)| matches!(outcome, Deposited::Stored(_)))
                .map(|(key, _)| *key)
                .collect();
            if let Err(e) = delivered.record(&stored) {
                tracing::error!(
                    event = "cluster_delivered_error",
                    error = %e,
                    msg = "a retry of these copies would store them again"
                );
            }
            outcomes
        })
        .await;
        stored.unwrap_or_else(|_| {
            vec![
                Deposited::Failed(store::StoreError::Failed("the store task failed".into()));
                count
            ]
        })
    }

    /// Syncs the record within `SYNC_INTERVAL` of each write (its crash rule), until aborted.
    pub fn spawn_record_sync(&self) -> tokio::task::JoinHandle<()> {
        let delivered = self.record.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(record::SYNC_INTERVAL);
            loop {
                tick.tick().await;
                if !delivered.unsynced() {
                    continue;
                }
                let record = delivered.clone();
                if let Ok(Err(e)) = tokio::task::spawn_blocking(move || record.sync()).await {
                    tracing::error!(event = "cluster_delivered_error", error = %e, msg = "records not synced");
                }
            }
        })
    }
}
