//! The one road into the store for new mail: queue delivery, copies handed over by another
//! node, delivery status notifications, the web view's Sent copy and imports all come
//! through a [`Deposit`].
//!
//! Here, and only here, new mail is checked against the [`Gate`] (a held mailbox gets
//! nothing: [`Deposited::Held`]), appended with the store's group commit (one data sync and
//! one journal sync for every concurrent caller's copies), counted, and logged: the mail
//! log's `delivered` line (and `dsn` for a notification) is written here once the copy is
//! durable, before the caller answers anyone.
//!
//! Every deposit is made under the gate held shared ([`crate::gate::Shared`]), which the
//! caller takes before it decides where its copies go (a delivery batch routes its
//! recipients under it), so a user removed or frozen meanwhile never gets a copy routed
//! before the change.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use store::{AppendRequest, Appended, ImportBatch, ImportOutcome, Mailstore as _, StoreError};
use telemetry::DeliveryEvents;

use crate::gate::{Gate, Shared};
use crate::rules::{CopyId, Disposition, Rules};

/// Where a copy comes from: what its log line says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// A recipient of a queued message (`delivered` with its queue id), `delay` after its
    /// arrival.
    Queued { queue_id: u64, delay: Duration },
    /// A copy another node of the cluster handed over (`delivered` with `origin`: the node,
    /// its queue id and the arrival time). `key`, the copy's key against a second store of
    /// the origin's retry, goes into the store's journal record with the copy
    /// (`Store::append_batch_delivered`; docs/storage.md, "Delivered keys").
    HandedOver {
        origin: String,
        key: Option<store::DeliveredKey>,
    },
    /// The delivery status notification about queued message `queue_id`, for its local
    /// sender (`dsn`).
    Notification { queue_id: u64 },
    /// A copy its own user made (the web view's Sent copy): no line.
    Own,
}

/// One copy to store.
#[derive(Debug, Clone)]
pub struct Copy {
    pub append: AppendRequest,
    pub origin: Origin,
    /// Final delivery to INBOX (a queued or handed-over copy): the user's rules run on it
    /// with this envelope. `None` stores it as it is.
    pub rules: Option<crate::rules::Envelope>,
}

/// What became of a copy.
#[derive(Debug, Clone)]
pub enum Deposited {
    /// Durable, in this folder with this UID; logged.
    Stored(Appended),
    /// Not stored: the mailbox is held (a move, or another node owns it). Try again later.
    Held,
    /// Not stored: the store refused or failed.
    Failed(StoreError),
    /// Not stored, by the user's rules: discarded, or only sent on (logged `sieve`).
    Disposed,
    /// Refused by the user's rules (RFC 5429 reject/ereject), with the reason for the
    /// sender: a DSN, or an LMTP refusal.
    Rejected(String),
}

/// The road. Cheap to share (`Arc`).
pub struct Deposit {
    store: Arc<store::Store>,
    gate: Arc<Gate>,
    events: Arc<dyn DeliveryEvents>,
    /// Copies delivered since start (`delivered` in `<data_dir>/stats`), with delivery's
    /// remote ones.
    delivered: Arc<AtomicU64>,
    /// Users' mail rules, once the node has wired them (`set_rules`).
    rules: std::sync::OnceLock<Arc<Rules>>,
}

impl Deposit {
    pub fn new(
        store: Arc<store::Store>,
        gate: Arc<Gate>,
        events: Arc<dyn DeliveryEvents>,
        delivered: Arc<AtomicU64>,
    ) -> Deposit {
        Deposit {
            store,
            gate,
            events,
            delivered,
            rules: std::sync::OnceLock::new(),
        }
    }

    /// Runs users' rules on every copy that asks for them from now on. Once.
    pub fn set_rules(&self, rules: Arc<Rules>) {
        let _ = self.rules.set(rules);
    }

    /// The rules, once set.
    pub fn rules(&self) -> Option<&Arc<Rules>> {
        self.rules.get()
    }

    /// The store the copies go into.
    pub fn store(&self) -> &Arc<store::Store> {
        &self.store
    }

    pub fn gate(&self) -> &Arc<Gate> {
        &self.gate
    }

    /// Whether `user` has a Junk folder, made now if it had none (a failure files the copy
    /// in INBOX instead).
    fn junk_ready(&self, user: &str) -> bool {
        use store::Mailstore as _;
        self.store.status(user, "Junk").is_ok()
            || matches!(
                self.store.create_folder(user, "Junk"),
                Ok(_) | Err(store::StoreError::FolderExists { .. })
            )
    }

    /// Stores every copy not held, in one group commit with whatever else is waiting, and
    /// logs each one stored. Outcomes in order.
    pub fn deposit(&self, under: &Shared<'_>, copies: Vec<Copy>) -> Vec<Deposited> {
        assert!(
            std::ptr::eq(under.gate, &*self.gate),
            "a deposit under another gate than its own"
        );
        let count = copies.len();
        let mut outcomes: Vec<Option<Deposited>> = vec![None; count];
        let mut appends = Vec::new();
        // Per append: its copy's index and origin (a copy the rules file into several
        // folders has several appends).
        let mut placed: Vec<(usize, Origin)> = Vec::new();
        for (i, copy) in copies.into_iter().enumerate() {
            if self.gate.held(&copy.append.user) {
                outcomes[i] = Some(Deposited::Held);
                continue;
            }
            // docs/spam.md 2: a final-delivery copy our filter flagged goes to Junk unless
            // the user's rules put it elsewhere.
            let default_folder = if copy.rules.is_some()
                && copy.append.folder == "INBOX"
                && spam::status_of(&copy.append.message.content).is_some_and(|s| s.flagged)
                && self.junk_ready(&copy.append.user)
            {
                "Junk"
            } else {
                "INBOX"
            };
            let mut copy = copy;
            if default_folder != "INBOX" {
                copy.append.folder = default_folder.to_string();
            }
            let rules = match (&copy.rules, self.rules.get()) {
                (Some(envelope), Some(rules)) if rules.active(&copy.append.user) => {
                    Some((envelope, rules))
                }
                _ => None,
            };
            let Some((envelope, rules)) = rules else {
                placed.push((i, copy.origin));
                appends.push(copy.append);
                continue;
            };
            let id = match &copy.origin {
                Origin::Queued { queue_id, .. } => CopyId::Queued(*queue_id),
                Origin::HandedOver { origin, .. } => CopyId::HandedOver(origin),
                Origin::Notification { queue_id } => CopyId::Queued(*queue_id),
                Origin::Own => CopyId::HandedOver("own"),
            };
            let user = copy.append.user.clone();
            match rules.apply(
                id,
                &user,
                envelope,
                &copy.append.message.content,
                default_folder,
            ) {
                Disposition::Disposed => outcomes[i] = Some(Deposited::Disposed),
                Disposition::Rejected { reason } => outcomes[i] = Some(Deposited::Rejected(reason)),
                Disposition::Store { folders, edited } => {
                    let mut message = copy.append.message;
                    if let Some(edited) = edited {
                        message.content = edited;
                    }
                    let last = folders.len().saturating_sub(1);
                    for (n, placement) in folders.into_iter().enumerate() {
                        let content = if n == last {
                            std::mem::take(&mut message.content)
                        } else {
                            message.content.clone()
                        };
                        placed.push((i, copy.origin.clone()));
                        appends.push(AppendRequest {
                            user: user.clone(),
                            folder: placement.folder,
                            message: store::NewMessage {
                                flags: message.flags.union(placement.flags),
                                keywords: placement.keywords,
                                internal_date: message.internal_date,
                                content,
                            },
                        });
                    }
                }
            }
        }
        let names: Vec<(String, String)> = appends
            .iter()
            .map(|a| (a.user.clone(), a.folder.clone()))
            .collect();
        // A handed-over copy's key rides on its last append (a copy the rules file into
        // several folders: a batch split between them stores the first ones twice at worst,
        // never loses one).
        let keys: Vec<Option<store::DeliveredKey>> = placed
            .iter()
            .enumerate()
            .map(|(n, (i, origin))| match origin {
                Origin::HandedOver { key, .. }
                    if placed.get(n + 1).is_none_or(|(next, _)| next != i) =>
                {
                    *key
                }
                _ => None,
            })
            .collect();
        let results = if appends.is_empty() {
            Vec::new()
        } else if keys.iter().all(Option::is_none) {
            self.store.append_batch(appends)
        } else {
            self.store
                .append_batch_delivered(appends.into_iter().zip(keys).collect())
        };
        assert!(
            results.is_empty() || results.len() == placed.len(),
            "the store answered {} of {} appends",
            results.len(),
            placed.len()
        );
        for (((i, origin), (user, folder)), result) in placed.into_iter().zip(names).zip(results) {
            let outcome = match result {
                Ok(appended) => {
                    self.stored(&origin, &user, &folder, &appended);
                    Deposited::Stored(appended)
                }
                Err(e) => Deposited::Failed(e),
            };
            // A copy in several folders is stored when all of them are; its first failure
            // says why not.
            outcomes[i] = match outcomes[i].take() {
                None | Some(Deposited::Stored(_)) => Some(outcome),
                failed => failed,
            };
        }
        outcomes
            .into_iter()
            .map(|o| {
                o.unwrap_or_else(|| {
                    Deposited::Failed(StoreError::Failed("the store gave no result".into()))
                })
            })
            .collect()
    }

    /// Commits one prepared import batch (`Store::prepare_import`): the batch's own group
    /// commit, UIDs kept where they ascend. Imports are operator work on a mailbox that
    /// exists here: not refused for a hold, and not logged per message (the import logs its
    /// summary).
    pub fn import(
        &self,
        under: &Shared<'_>,
        batch: ImportBatch,
    ) -> Result<Vec<Result<ImportOutcome, StoreError>>, StoreError> {
        assert!(
            std::ptr::eq(under.gate, &*self.gate),
            "an import under another gate than its own"
        );
        self.store.commit_import(batch)
    }

    /// The log line and the count of one stored copy.
    fn stored(&self, origin: &Origin, user: &str, folder: &str, appended: &Appended) {
        match origin {
            Origin::Queued { queue_id, delay } => {
                self.delivered.fetch_add(1, Ordering::Relaxed);
                self.events
                    .delivered_local(*queue_id, user, folder, appended.uid, *delay);
            }
            Origin::HandedOver { origin, .. } => {
                self.delivered.fetch_add(1, Ordering::Relaxed);
                self.events.delivered_handed_over(
                    origin,
                    user,
                    folder,
                    appended.uid,
                    Duration::ZERO,
                );
            }
            Origin::Notification { queue_id } => {
                self.events.dsn(*queue_id, user, Some(appended.uid));
            }
            Origin::Own => {}
        }
    }
}
