//! Local delivery: queue → store, in batches.
//!
//! A delivery thread leases a batch of adjacent queued messages (one large read, the paper's
//! Ahead Read), appends every local recipient's copy to the store with one `append_batch`
//! (one durable sync for the whole batch), then records every outcome with one `finish_many`
//! (one queue commit). A crash between the two leaves messages delivered but not marked: they
//! are delivered again after restart, so duplicates are bounded by one batch (guarantee 2).
//!
//! Who owns a recipient is asked of [`Router`], the seam where a cluster later hands the
//! message to another node instead of the local store ([`Route::Peer`]).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use mailboxes::{Copy, Deposited, Origin};
use queue::{Outcome, Queue, QueuedMessage};
use store::{AppendRequest, NewMessage};

use crate::bounce;
use crate::outbound::{self, Relay, Sent};
use crate::peer::{Handed, PeerPath, PeerRecipient};
use crate::route::{Route, Router};
use crate::wakeup::Wakeup;
use telemetry::DeliveryEvents;

/// Most relay connections one delivery batch opens at once.
const RELAY_CONNECTIONS_MAX: usize = 16;

/// Where outbound mail goes.
pub enum Path {
    Relay(Relay),
    /// Each recipient domain's exchangers.
    Mx(Box<outbound::Mx>),
}

/// What outbound delivery needs: the path, TLS clients, and the runtime to run sessions on.
pub struct Outbound {
    pub path: Path,
    pub clients: outbound::Clients,
    pub runtime: tokio::runtime::Handle,
    /// The name we give in EHLO.
    pub hostname: String,
}

/// Messages leased per batch, and their record bytes.
const BATCH_RECORDS_MAX: usize = 256;
const BATCH_BYTES_MAX: usize = 32 << 20;
/// How long a message may stay undelivered before it bounces (RFC 5321 4.5.4.1: "at least
/// 4-5 days").
pub const RETRY_FOR: Duration = Duration::from_secs(5 * 24 * 3600);
/// Without a wake-up, the worker still looks for due deferred mail this often.
const IDLE_POLL: Duration = Duration::from_secs(1);
/// Under load, a worker whose last batch was small waits this long before the next one, so
/// batches grow with the arrival rate and each costs its three syncs (store data, store
/// journal, queue marks) for many messages instead of a few. Mail arriving after a quiet
/// spell is delivered at once: the wait follows a non-empty batch only, and it is not on the
/// path of any SMTP reply (the 250 was sent when the queue made the message durable).
const LINGER: Duration = Duration::from_millis(50);
/// A batch at least this big was not small: the next one starts at once.
const BATCH_FULL: usize = BATCH_RECORDS_MAX;

/// One delivery thread's state: run it with [`Delivery::run`] on a thread of its own.
pub struct Delivery {
    pub queue: Arc<Queue>,
    pub router: Arc<dyn Router>,
    pub wakeup: Arc<Wakeup>,
    pub stop: Arc<AtomicBool>,
    /// The name DSNs are reported from (`Reporting-MTA`, `MAILER-DAEMON@`).
    pub hostname: String,
    /// Recipient copies delivered (to the store or a remote server) since start.
    pub delivered: Arc<std::sync::atomic::AtomicU64>,
    /// Where remote recipients go; `None`: they wait in the deferred queue.
    pub outbound: Option<Arc<Outbound>>,
    /// The one road into the store (`mailboxes::Deposit`): its gate is held shared from
    /// routing a batch to appending it, and exclusively by whoever removes or moves a user's
    /// mail (`user del`, `user rename`, a move's freeze), so a copy routed to a user before
    /// such a change cannot land after it. It writes the `delivered` and `dsn` lines of the
    /// copies it stores.
    pub deposit: Arc<mailboxes::Deposit>,
    /// The mail log and metrics.
    pub events: Arc<dyn DeliveryEvents>,
    /// Where copies for users of other nodes go (a cluster node); `None`: a single node.
    pub peers: Option<Arc<PeerPath>>,
    /// The data directory's free-space reserve: below it, delivery pauses (mail stays
    /// queued) until space comes back.
    pub space: Arc<disk::SpaceReserve>,
}

/// How often a paused delivery looks at the free space again.
const SPACE_POLL: Duration = Duration::from_millis(500);

/// The retry of a copy refused for want of room: soon, since space comes back by itself
/// (an operator frees it, or delivery resumes and the queue shrinks).
const NO_SPACE_RETRY: Duration = Duration::from_secs(15);

/// Milliseconds since the epoch, as the queue records times.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// The wait before attempt `attempts + 1`: 1, 2, 4 ... minutes, at most an hour.
pub fn backoff(attempts: u32) -> Duration {
    Duration::from_secs(60u64 << attempts.min(6)).min(Duration::from_secs(3600))
}

impl Delivery {
    /// Runs until `stop` is set. Below the free-space reserve it pauses, mail kept queued,
    /// and resumes by itself when space comes back; a queue without room for a notification
    /// is waited out the same way. Other errors from the queue end the thread (the queue is
    /// poisoned and the server must restart to recover); store errors defer the affected
    /// recipients.
    pub fn run(self) {
        let mut paused = false;
        while !self.stop.load(Ordering::Relaxed) {
            if let Err(shortage) = self.space.check(0) {
                if !paused {
                    self.events.paused_for_space(true, &shortage.to_string());
                    paused = true;
                }
                std::thread::sleep(SPACE_POLL);
                continue;
            }
            if paused {
                self.events.paused_for_space(false, "");
                paused = false;
            }
            match self.round() {
                Ok(0) => self.wakeup.wait(IDLE_POLL),
                Ok(n) if n < BATCH_FULL => std::thread::sleep(LINGER),
                Ok(_) => {}
                Err(e) if e.is_out_of_space() => std::thread::sleep(SPACE_POLL),
                Err(e) => {
                    self.events.stopped(&e);
                    return;
                }
            }
        }
    }

    /// One batch: returns how many messages it handled.
    fn round(&self) -> Result<usize, queue::QueueError> {
        // Whole rounds only: a backup's capture (`Wakeup::pause`) never sees a batch
        // deposited in the store but not yet marked in the queue.
        let _round = self.wakeup.round();
        let now = now_ms();
        let batch = self
            .queue
            .next_batch(now, BATCH_RECORDS_MAX, BATCH_BYTES_MAX)?;
        let bounces = self.queue.take_bounces(BATCH_RECORDS_MAX)?;
        let handled = batch.len() + bounces.len();
        let mut batch = batch;
        if !batch.is_empty() {
            self.deliver(&mut batch, now)?;
        }
        for message in bounces {
            self.bounce(&message, now)?;
        }
        Ok(handled)
    }

    fn deliver(&self, batch: &mut [QueuedMessage], now: u64) -> Result<(), queue::QueueError> {
        // From the routing to the append: a user deleted meanwhile waits for this batch, and
        // a batch that starts after the deletion routes the user as unknown.
        let gate = self.deposit.gate().clone();
        let shared = gate.shared();
        // Every (message, recipient index) and where its copy goes.
        let mut appends = Vec::new();
        // (message, recipient, index of its append) for every local copy.
        let mut slots: Vec<(usize, usize, usize)> = Vec::new();
        let mut outcomes: Vec<Vec<(usize, Outcome)>> = vec![Vec::new(); batch.len()];
        // Messages with a copy the store refused for want of room.
        let mut no_room = vec![false; batch.len()];
        // Per message, its remote recipients.
        let mut remote: Vec<(usize, Vec<usize>)> = Vec::new();
        // Per message and owner node: (message, node, its LMTP address, recipients).
        let mut peer: PeerGroups = Vec::new();
        for (m, message) in batch.iter_mut().enumerate() {
            let routes: Vec<(usize, Route)> = message
                .pending
                .iter()
                .map(|&r| {
                    (
                        r,
                        self.router.route(&message.envelope.recipients[r].address),
                    )
                })
                .collect();
            // The last local copy takes the content itself: a large message is not held twice
            // (remote recipients read it later, so then every local copy is a clone).
            // cluster: a peer's copy will read the content too (handed over LMTP in peer.rs).
            let has_remote = routes.iter().any(|(_, route)| match route {
                Route::Remote => self.outbound.is_some(),
                Route::Peer { up, .. } => *up && self.peers.is_some(),
                Route::Local(_) | Route::Unknown | Route::Held(_) => false,
            });
            let last_local = routes
                .iter()
                .rposition(|(_, route)| matches!(route, Route::Local(_)));
            for (i, (r, route)) in routes.into_iter().enumerate() {
                match route {
                    Route::Local(user) => {
                        let trace = final_delivery_fields(&message.envelope.sender, &user);
                        let content = if Some(i) == last_local && !has_remote {
                            let mut content = std::mem::take(&mut message.content);
                            content.splice(0..0, trace.bytes());
                            content
                        } else {
                            let mut content =
                                Vec::with_capacity(trace.len() + message.content.len());
                            content.extend_from_slice(trace.as_bytes());
                            content.extend_from_slice(&message.content);
                            content
                        };
                        slots.push((m, r, appends.len()));
                        appends.push(Copy {
                            append: AppendRequest {
                                user,
                                folder: "INBOX".to_string(),
                                message: NewMessage {
                                    internal_date: (message.envelope.arrival_ms / 1000) as i64,
                                    content,
                                    ..NewMessage::default()
                                },
                            },
                            origin: Origin::Queued {
                                queue_id: message.id,
                                delay: Duration::from_millis(
                                    now.saturating_sub(message.envelope.arrival_ms),
                                ),
                            },
                            rules: Some(mailboxes::rules::Envelope {
                                sender: message.envelope.sender.clone(),
                                recipient: message.envelope.recipients[r].address.clone(),
                            }),
                        });
                    }
                    Route::Unknown => {
                        let outcome = Outcome::Failed {
                            reason: "550 5.1.1 mailbox no longer exists".to_string(),
                        };
                        self.log(message, r, "local", &outcome, now);
                        outcomes[m].push((r, outcome));
                    }
                    Route::Remote if self.outbound.is_some() => match remote.last_mut() {
                        Some((last, rs)) if *last == m => rs.push(r),
                        _ => remote.push((m, vec![r])),
                    },
                    Route::Remote => {
                        let outcome = remote_outcome(message, now);
                        self.log(message, r, "none", &outcome, now);
                        outcomes[m].push((r, outcome));
                    }
                    Route::Peer {
                        node,
                        user,
                        epoch,
                        lmtp,
                        up,
                    } => {
                        // Unreachable: a hand-over could not reach it, and the prober has
                        // not since (it wakes this copy the moment one does).
                        let suspect = self
                            .peers
                            .as_ref()
                            .is_some_and(|p| p.is_suspect(&node) || p.is_unreachable(&node));
                        if !up || suspect || self.peers.is_none() {
                            let reason = if !up {
                                format!("451 4.4.1 node {node} (owner of {user}) is down")
                            } else if suspect {
                                format!("451 4.4.1 node {node} (owner of {user}) does not answer")
                            } else {
                                format!(
                                    "451 4.3.0 {user} is on node {node}: this node is not in the cluster"
                                )
                            };
                            let outcome = peer_retry(message, now, reason);
                            if let Some(peers) = &self.peers {
                                peers.waiting(&node, message.id);
                            }
                            self.log(message, r, &node, &outcome, now);
                            outcomes[m].push((r, outcome));
                            continue;
                        }
                        let recipient = PeerRecipient { user, epoch };
                        match peer
                            .iter_mut()
                            .find(|(pm, pn, _, _)| *pm == m && *pn == node)
                        {
                            Some((_, _, _, list)) => list.push((r, recipient)),
                            None => peer.push((m, node, lmtp, vec![(r, recipient)])),
                        }
                    }
                    Route::Held(why) => {
                        let outcome = peer_retry(message, now, format!("451 4.2.0 {why}"));
                        self.log(message, r, "local", &outcome, now);
                        outcomes[m].push((r, outcome));
                    }
                }
            }
        }
        let results = if appends.is_empty() {
            Vec::new()
        } else {
            self.deposit.deposit(&shared, appends)
        };
        drop(shared);
        for (m, r, index) in slots {
            let outcome = match results.get(index) {
                // Logged (`delivered`) and counted by the deposit; or, by the user's rules,
                // discarded or sent on (logged `sieve`).
                Some(Deposited::Stored(_) | Deposited::Disposed) => {
                    outcomes[m].push((r, Outcome::Delivered));
                    continue;
                }
                // RFC 5429 2.1: refused after acceptance, the sender gets a DSN (the bounce).
                Some(Deposited::Rejected(reason)) => Outcome::Failed {
                    reason: format!("550 5.7.1 {}", mailboxes::rules::refusal_text(reason)),
                },
                Some(Deposited::Held) => {
                    let user = &batch[m].envelope.recipients[r].address;
                    peer_retry(
                        &batch[m],
                        now,
                        format!("451 4.2.0 the mailbox of {user} is being moved"),
                    )
                }
                // RFC 3463 4.3.1: no room in the store; it passes, so soon and without a
                // bounce however old the message is.
                Some(Deposited::Failed(e)) if e.is_out_of_space() => {
                    no_room[m] = true;
                    Outcome::Deferred {
                        retry_at_ms: now + NO_SPACE_RETRY.as_millis() as u64,
                        reason: format!("452 4.3.1 store: {e}"),
                    }
                }
                Some(Deposited::Failed(e)) => {
                    retry_or_fail(&batch[m], now, format!("451 4.3.0 store: {e}"))
                }
                None => retry_or_fail(&batch[m], now, "451 4.3.0 store gave no result".into()),
            };
            self.log(&batch[m], r, "local", &outcome, now);
            outcomes[m].push((r, outcome));
        }
        if let Some(out) = &self.outbound
            && !remote.is_empty()
        {
            for (m, r, relay, sent) in relay_batch(out, batch, remote) {
                let outcome = match sent {
                    Sent::Delivered => {
                        self.delivered.fetch_add(1, Ordering::Relaxed);
                        Outcome::Delivered
                    }
                    Sent::Temporary(reason) => retry_or_fail(&batch[m], now, reason),
                    Sent::Permanent(reason) => Outcome::Failed { reason },
                };
                self.log(&batch[m], r, &relay, &outcome, now);
                outcomes[m].push((r, outcome));
            }
        }
        if let Some(peers) = &self.peers
            && !peer.is_empty()
        {
            for (m, r, node, handed) in peer_batch(peers, batch, peer) {
                let outcome = match handed {
                    Handed::Delivered => {
                        self.delivered.fetch_add(1, Ordering::Relaxed);
                        Outcome::Delivered
                    }
                    // A full mailbox (RFC 3463 4.2.2) is not an outage: the usual backoff.
                    Handed::Temporary(reason) if reason.contains(" 4.2.2") => {
                        retry_or_fail(&batch[m], now, reason)
                    }
                    Handed::Temporary(reason) => {
                        // Only a silent owner (open socket, no answer) is skipped for a while:
                        // a refused connection costs nothing to try again, and skipping it
                        // would delay the mail of an owner that just restarted.
                        if reason.contains("no answer in time") {
                            peers.suspect(&node);
                        }
                        // Not the owner's answer but the way to it (no connection, or no
                        // answer on it): until the prober reaches the owner, its copies wait
                        // for it rather than each try, and then go at once (a healed
                        // partition does not wait out the short schedule).
                        if unreachable(&reason) {
                            peers.unreachable(&node);
                        }
                        peers.waiting(&node, batch[m].id);
                        peer_retry(&batch[m], now, reason)
                    }
                    Handed::Permanent(reason) => Outcome::Failed { reason },
                };
                self.log(&batch[m], r, &node, &outcome, now);
                outcomes[m].push((r, outcome));
            }
        }
        // A message the store had no room for, with no copy delivered, is left as it was
        // and handed out again: a deferred copy would write all of it once more, on a disk
        // that is full. One with a copy delivered is finished (a deferred copy carries the
        // rest), or that copy would be delivered twice.
        let mut items = Vec::with_capacity(batch.len());
        for ((message, outcome), no_room) in batch.iter().zip(outcomes).zip(no_room) {
            if no_room && !outcome.iter().any(|(_, o)| matches!(o, Outcome::Delivered)) {
                self.queue.release(message.id);
            } else {
                items.push((message.id, outcome));
            }
        }
        for (result, (id, _)) in self.queue.finish_many(&items).into_iter().zip(&items) {
            if let Err(e) = result {
                self.events.queue_error(*id, &e);
                if e.is_out_of_space() {
                    // No room for its deferred copy: it stays as it was, handed out again.
                    self.queue.release(*id);
                }
            }
        }
        Ok(())
    }

    /// One line of the mail log (and the metrics) for a recipient's outcome.
    fn log(&self, message: &QueuedMessage, r: usize, relay: &str, outcome: &Outcome, now: u64) {
        let to = message
            .envelope
            .recipients
            .get(r)
            .map_or("", |recipient| recipient.address.as_str());
        let delay = Duration::from_millis(now.saturating_sub(message.envelope.arrival_ms));
        match outcome {
            // A local copy's `delivered` line is the deposit's; this is a remote one.
            Outcome::Delivered => self.events.delivered_remote(message.id, to, relay, delay),
            Outcome::Deferred {
                retry_at_ms,
                reason,
            } => self
                .events
                .deferred(message.id, to, relay, reason, *retry_at_ms),
            Outcome::Failed { reason } => self.events.bounced(message.id, to, relay, reason),
        }
    }

    /// Sends the delivery status notification for a message whose recipients failed, then
    /// removes it. A null sender never gets one (RFC 5321 6.1, no bounce loops); a local
    /// sender gets it in their INBOX; a remote one waits for outbound delivery like any mail.
    fn bounce(&self, message: &QueuedMessage, now: u64) -> Result<(), queue::QueueError> {
        let sender = &message.envelope.sender;
        if !sender.is_empty() {
            let report = bounce::dsn(message, &self.hostname, now);
            let gate = self.deposit.gate().clone();
            let shared = gate.shared();
            match self.router.route(sender) {
                Route::Local(user) => {
                    let mut content = final_delivery_fields("", &user).into_bytes();
                    content.extend_from_slice(&report);
                    let copy = Copy {
                        append: AppendRequest {
                            user,
                            folder: "INBOX".to_string(),
                            message: NewMessage {
                                internal_date: (now / 1000) as i64,
                                content,
                                ..NewMessage::default()
                            },
                        },
                        origin: Origin::Notification {
                            queue_id: message.id,
                        },
                        rules: None,
                    };
                    let deposited = self.deposit.deposit(&shared, vec![copy]);
                    // Stored: logged (`dsn`) by the deposit.
                    if !matches!(deposited.first(), Some(Deposited::Stored(_))) {
                        let error = match deposited.into_iter().next() {
                            Some(Deposited::Failed(e)) => e,
                            _ => store::StoreError::Failed("the mailbox is held".into()),
                        };
                        // Keep the bounce leased-and-released so it is tried again later.
                        self.events.dsn_deferred(message.id, sender, &error);
                        self.queue.release(message.id);
                        return Ok(());
                    }
                }
                // cluster: a sender on another node gets the notification like any mail for
                // it: queued, then delivered by route (peer.rs).
                Route::Remote | Route::Unknown | Route::Peer { .. } | Route::Held(_) => {
                    let envelope = queue::Envelope {
                        sender: String::new(),
                        recipients: vec![queue::Recipient {
                            address: sender.clone(),
                            status: queue::RecipientStatus::Pending,
                            last_error: None,
                        }],
                        arrival_ms: now,
                    };
                    let dsn_id = match self.queue.enqueue(envelope, report) {
                        Ok(id) => id,
                        Err(e) if e.is_out_of_space() => {
                            // Tried again once there is room.
                            self.events.queue_error(message.id, &e);
                            self.queue.release(message.id);
                            return Ok(());
                        }
                        Err(e) => return Err(e),
                    };
                    self.events.dsn_queued(message.id, sender, dsn_id);
                }
            }
        }
        self.queue.finish_bounce(message.id)
    }
}

/// Sends every message's remote recipients through the relay, at most `RELAY_CONNECTIONS_MAX`
/// sessions at once; one (message, recipient, result) per remote recipient. A session that
/// could not run at all leaves its recipients temporarily failed.
fn relay_batch(
    out: &Arc<Outbound>,
    batch: &[QueuedMessage],
    remote: Vec<(usize, Vec<usize>)>,
) -> Vec<(usize, usize, String, Sent)> {
    let slots = Arc::new(tokio::sync::Semaphore::new(RELAY_CONNECTIONS_MAX));
    let mut expected: Vec<(usize, usize)> = Vec::new();
    // One plan per recipient domain for the whole batch (MTA-STS, DANE): the first session
    // to a domain makes it, the others wait for it.
    let mut plans: std::collections::HashMap<String, outbound::SharedPlan> =
        std::collections::HashMap::new();
    let results = out.runtime.block_on(async {
        let mut sessions = tokio::task::JoinSet::new();
        for (m, rs) in remote {
            let message = &batch[m];
            // One session per message through a relay; per message and domain to exchangers.
            let mut groups: Vec<(String, Vec<usize>)> = Vec::new();
            for &r in &rs {
                let address = &message.envelope.recipients[r].address;
                let key = match &out.path {
                    Path::Relay(_) => String::new(),
                    Path::Mx(_) => address
                        .rsplit_once('@')
                        .map(|(_, d)| d.to_ascii_lowercase())
                        .unwrap_or_default(),
                };
                match groups.iter_mut().find(|(k, _)| *k == key) {
                    Some((_, list)) => list.push(r),
                    None => groups.push((key, vec![r])),
                }
            }
            for (domain, rs) in groups {
                let recipients: Vec<String> = rs
                    .iter()
                    .map(|&r| message.envelope.recipients[r].address.clone())
                    .collect();
                expected.extend(rs.iter().map(|&r| (m, r)));
                let (out, slots) = (out.clone(), slots.clone());
                let sender = message.envelope.sender.clone();
                let content = message.content.clone();
                let plan = plans.entry(domain.clone()).or_default().clone();
                sessions.spawn(async move {
                    let _slot = slots.acquire_owned().await;
                    let (relay, sent) = match &out.path {
                        Path::Relay(relay) => {
                            let sent = outbound::send(
                                relay,
                                &out.clients,
                                &out.hostname,
                                &sender,
                                &recipients,
                                &content,
                            )
                            .await;
                            (relay.name(), sent)
                        }
                        Path::Mx(mx) => {
                            outbound::send_mx(
                                mx,
                                &out.clients,
                                &out.hostname,
                                &domain,
                                &plan,
                                &sender,
                                &recipients,
                                &content,
                            )
                            .await
                        }
                    };
                    (m, rs, relay, sent)
                });
            }
        }
        let mut done = Vec::new();
        while let Some(joined) = sessions.join_next().await {
            if let Ok((m, rs, relay, sent)) = joined {
                done.extend(
                    rs.into_iter()
                        .zip(sent)
                        .map(|(r, s)| (m, r, relay.clone(), s)),
                );
            }
        }
        done
    });
    let answered: std::collections::HashSet<(usize, usize)> =
        results.iter().map(|&(m, r, _, _)| (m, r)).collect();
    let mut all = results;
    for (m, r) in expected {
        if !answered.contains(&(m, r)) {
            all.push((
                m,
                r,
                "none".to_string(),
                Sent::Temporary("451 4.3.0 relay session failed".into()),
            ));
        }
    }
    all
}

/// The trace fields final delivery puts on top of a copy: `Return-Path` with the envelope
/// sender (RFC 5321 4.4: the delivering server adds it) and `Delivered-To` with the mailbox
/// (as Postfix and Dovecot write it; loops show up as repeats). Both addresses passed the
/// SMTP parser, which admits no line break; control characters are dropped anyway, so no
/// address can add a header field.
pub fn final_delivery_fields(sender: &str, mailbox: &str) -> String {
    let clean = |s: &str| s.chars().filter(|c| !c.is_control()).collect::<String>();
    format!(
        "Return-Path: <{}>\r\nDelivered-To: {}\r\n",
        clean(sender),
        clean(mailbox)
    )
}

/// With neither a relay nor direct delivery, remote recipients wait in the deferred queue and
/// bounce when they expire, exactly as if the remote MX were unreachable.
fn remote_outcome(message: &QueuedMessage, now: u64) -> Outcome {
    retry_or_fail(
        message,
        now,
        "451 4.4.0 no outbound route configured ([server] relay_host)".to_string(),
    )
}

/// A copy for another node of the cluster that could not be handed over now: retried on a
/// short schedule (1, 2, 4 ... seconds, at most [`PEER_RETRY_MAX`]), since the owner is
/// expected back within seconds (and its return wakes the copy anyway, `PeerPath::waiting`:
/// its lease coming back, or the prober reaching an owner that was up but unreachable);
/// bounced only past [`RETRY_FOR`] like any mail.
fn peer_retry(message: &QueuedMessage, now: u64, reason: String) -> Outcome {
    let age = Duration::from_millis(now.saturating_sub(message.envelope.arrival_ms));
    if age >= RETRY_FOR {
        return Outcome::Failed {
            reason: format!(
                "{reason} (gave up after {} days)",
                RETRY_FOR.as_secs() / 86_400
            ),
        };
    }
    let wait = Duration::from_secs(1u64 << message.attempts.min(6)).min(PEER_RETRY_MAX);
    Outcome::Deferred {
        retry_at_ms: now + wait.as_millis() as u64,
        reason,
    }
}

/// Whether a hand-over failed on the way to the owner (`peer.rs`: connecting, or no answer
/// in time), not by anything the owner said (a refused greeting or LHLO, a 4xx reply).
fn unreachable(reason: &str) -> bool {
    reason.contains("no answer in time")
        || (reason.starts_with("451 4.4.1 ")
            && !reason.contains(": greeting ")
            && !reason.contains("not a mailstow cluster node"))
}

/// The longest wait between two attempts to hand a copy to its owner node.
pub(crate) const PEER_RETRY_MAX: Duration = Duration::from_secs(30);

type PeerGroups = Vec<(usize, String, String, Vec<(usize, PeerRecipient)>)>;

/// Hands every message's copies to their owner nodes, at most `PEER_CONNECTIONS_MAX`
/// transactions at once; one (message, recipient, node, outcome) per copy.
fn peer_batch(
    peers: &Arc<PeerPath>,
    batch: &[QueuedMessage],
    groups: PeerGroups,
) -> Vec<(usize, usize, String, Handed)> {
    // Per owner, its messages dealt round-robin over at most `PEER_STREAMS_PER_NODE`
    // streams; a stream hands its messages over one after the other on one pooled
    // connection, so a batch opens no more connections than the pool keeps, while the
    // owner still gets several transactions at once to store in one commit.
    let mut streams: Vec<(String, String, Vec<Handing>)> = Vec::new();
    let mut per_node: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    let mut expected: Vec<(usize, usize, String)> = Vec::new();
    for (m, node, lmtp, recipients) in groups {
        let message = &batch[m];
        expected.extend(recipients.iter().map(|(r, _)| (m, *r, node.clone())));
        let handing = Handing {
            m,
            sender: message.envelope.sender.clone(),
            // The origin's key: the queue id with the arrival time, unique even if this
            // node's queue were ever started afresh.
            origin_id: format!("{}.{}", message.id, message.envelope.arrival_ms),
            content: message.content.clone(),
            recipients,
        };
        let seen = per_node.entry(node.clone()).or_insert(0);
        let node_streams: Vec<usize> = streams
            .iter()
            .enumerate()
            .filter(|(_, (n, _, _))| *n == node)
            .map(|(i, _)| i)
            .collect();
        if node_streams.len() < PEER_STREAMS_PER_NODE {
            streams.push((node, lmtp, vec![handing]));
        } else {
            streams[node_streams[*seen % node_streams.len()]]
                .2
                .push(handing);
        }
        *seen += 1;
    }
    let slots = Arc::new(tokio::sync::Semaphore::new(PEER_CONNECTIONS_MAX));
    let results = peers.runtime.block_on(async {
        let mut sessions = tokio::task::JoinSet::new();
        for (node, lmtp, handings) in streams {
            let (peers, slots) = (peers.clone(), slots.clone());
            sessions.spawn(async move {
                let _slot = slots.acquire_owned().await;
                let mut results = Vec::new();
                for handing in handings {
                    let (rs, list): (Vec<usize>, Vec<PeerRecipient>) =
                        handing.recipients.into_iter().unzip();
                    let handed = peers
                        .peers
                        .hand_over(
                            &lmtp,
                            &handing.origin_id,
                            &handing.sender,
                            &list,
                            &handing.content,
                        )
                        .await;
                    for (r, h) in rs.into_iter().zip(handed) {
                        results.push((handing.m, r, node.clone(), h));
                    }
                }
                results
            });
        }
        let mut results = Vec::new();
        while let Some(joined) = sessions.join_next().await {
            if let Ok(stream) = joined {
                results.extend(stream);
            }
        }
        results
    });
    // A task that panicked leaves its copies for a later attempt.
    let mut out = results;
    for (m, r, node) in expected {
        if !out.iter().any(|(om, or, _, _)| *om == m && *or == r) {
            out.push((
                m,
                r,
                node,
                Handed::Temporary("451 4.3.0 hand-over failed".into()),
            ));
        }
    }
    out
}

/// One message's hand-over to one owner.
struct Handing {
    m: usize,
    sender: String,
    origin_id: String,
    content: Vec<u8>,
    recipients: Vec<(usize, PeerRecipient)>,
}

/// Transactions with owner nodes at once, per delivery batch.
const PEER_CONNECTIONS_MAX: usize = 16;
/// Connections (streams of transactions one after the other) to one owner, per batch.
const PEER_STREAMS_PER_NODE: usize = 16;

fn retry_or_fail(message: &QueuedMessage, now: u64, reason: String) -> Outcome {
    let age = Duration::from_millis(now.saturating_sub(message.envelope.arrival_ms));
    if age >= RETRY_FOR {
        Outcome::Failed {
            reason: format!(
                "{reason} (gave up after {} days)",
                RETRY_FOR.as_secs() / 86_400
            ),
        }
    } else {
        Outcome::Deferred {
            retry_at_ms: now + backoff(message.attempts).as_millis() as u64,
            reason,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    use queue::{Envelope, Recipient, RecipientStatus};
    use store::{Mailstore as _, Store};

    /// Routes by the recipient's local part.
    struct ByName;

    impl Router for ByName {
        fn route(&self, address: &str) -> Route {
            match address.split('@').next() {
                Some("alice") => Route::Local(address.to_string()),
                Some("peter") => Route::Peer {
                    node: "node-2".into(),
                    user: address.to_string(),
                    epoch: 3,
                    lmtp: "127.0.0.1:1".into(),
                    up: false,
                },
                Some("gone") => Route::Unknown,
                _ => Route::Remote,
            }
        }
    }

    /// Every event as one line, as the server's log would carry it.
    #[derive(Default)]
    struct Recorded(Mutex<Vec<String>>);

    impl Recorded {
        fn push(&self, line: String) {
            self.0.lock().unwrap().push(line);
        }
    }

    impl DeliveryEvents for Recorded {
        fn delivered_local(&self, id: u64, to: &str, folder: &str, uid: u32, _: Duration) {
            self.push(format!("delivered {id} {to} {folder} {uid}"));
        }
        fn delivered_handed_over(
            &self,
            origin: &str,
            to: &str,
            folder: &str,
            uid: u32,
            _: Duration,
        ) {
            self.push(format!("delivered {origin} {to} {folder} {uid}"));
        }
        fn delivered_remote(&self, id: u64, to: &str, relay: &str, _: Duration) {
            self.push(format!("delivered {id} {to} {relay}"));
        }
        fn deferred(&self, id: u64, to: &str, relay: &str, reply: &str, _: u64) {
            self.push(format!("deferred {id} {to} {relay} {reply}"));
        }
        fn bounced(&self, id: u64, to: &str, relay: &str, reply: &str) {
            self.push(format!("bounced {id} {to} {relay} {reply}"));
        }
        fn dsn(&self, id: u64, to: &str, uid: Option<u32>) {
            self.push(format!("dsn {id} {to} {uid:?}"));
        }
        fn dsn_queued(&self, id: u64, to: &str, dsn_id: u64) {
            self.push(format!("dsn {id} {to} queued {dsn_id}"));
        }
        fn dsn_deferred(&self, id: u64, to: &str, error: &store::StoreError) {
            self.push(format!("dsn_deferred {id} {to} {error}"));
        }
        fn queue_error(&self, id: u64, error: &queue::QueueError) {
            self.push(format!("queue_error {id} {error}"));
        }
        fn stopped(&self, error: &queue::QueueError) {
            self.push(format!("stopped {error}"));
        }
        fn paused_for_space(&self, paused: bool, why: &str) {
            self.push(format!("paused {paused} {why}"));
        }
        fn sieve_action(
            &self,
            copy: telemetry::SieveCopy<'_>,
            user: &str,
            action: &'static str,
            target: &str,
        ) {
            self.push(format!("sieve {copy:?} {user} {action} {target}"));
        }
        fn sieve_error(&self, copy: telemetry::SieveCopy<'_>, user: &str, error: &str) {
            self.push(format!("sieve_error {copy:?} {user} {error}"));
        }
    }

    #[test]
    fn one_batch_routes_each_recipient_and_reports_each_outcome() {
        let disk: Arc<dyn disk::Disk> = Arc::new(disk::SimDisk::new());
        let (queue, _) = Queue::open(
            disk.clone(),
            std::path::Path::new("/queue"),
            queue::QueueConfig {
                segment_bytes: 1 << 20,
                ..queue::QueueConfig::default()
            },
        )
        .unwrap();
        let (store, _) = Store::open(
            disk,
            std::path::Path::new("/store"),
            store::StoreConfig {
                volume_grow_bytes: 256 << 10,
                journal_checkpoint_bytes: 256 << 10,
                reservation_bytes: 0,
                ..store::StoreConfig::default()
            },
        )
        .unwrap();
        store.create_folder("alice@a.example", "INBOX").unwrap();
        let recipient = |address: &str| Recipient {
            address: address.into(),
            status: RecipientStatus::Pending,
            last_error: None,
        };
        let id = queue
            .enqueue(
                Envelope {
                    sender: "sam@b.example".into(),
                    recipients: vec![
                        recipient("alice@a.example"),
                        recipient("peter@a.example"),
                        recipient("gone@a.example"),
                        recipient("rita@b.example"),
                    ],
                    arrival_ms: now_ms(),
                },
                b"Subject: hi\r\n\r\nbody\r\n".to_vec(),
            )
            .unwrap();
        let events = Arc::new(Recorded::default());
        let delivered = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let worker = Delivery {
            queue: Arc::new(queue),
            router: Arc::new(ByName),
            wakeup: Arc::new(Wakeup::default()),
            stop: Arc::new(AtomicBool::new(false)),
            hostname: "mx.a.example".into(),
            delivered: delivered.clone(),
            outbound: None,
            deposit: Arc::new(mailboxes::Deposit::new(
                store.clone(),
                Arc::new(mailboxes::Gate::single()),
                events.clone(),
                delivered.clone(),
            )),
            events: events.clone(),
            peers: None,
            space: disk::SpaceReserve::new(
                Arc::new(disk::SimDisk::new()),
                std::path::Path::new("/"),
                0,
            ),
        };
        assert_eq!(worker.round().unwrap(), 1);
        let mut lines = events.0.lock().unwrap().clone();
        lines.sort();
        assert_eq!(
            lines,
            [
                format!("bounced {id} gone@a.example local 550 5.1.1 mailbox no longer exists"),
                format!(
                    "deferred {id} peter@a.example node-2 451 4.4.1 node node-2 (owner of \
                     peter@a.example) is down"
                ),
                format!(
                    "deferred {id} rita@b.example none 451 4.4.0 no outbound route configured \
                     ([server] relay_host)"
                ),
                format!("delivered {id} alice@a.example INBOX 1"),
            ]
        );
        assert_eq!(delivered.load(Ordering::Relaxed), 1);
        assert_eq!(
            store.read("alice@a.example", "INBOX", 1).unwrap(),
            b"Return-Path: <sam@b.example>\r\nDelivered-To: alice@a.example\r\n\
              Subject: hi\r\n\r\nbody\r\n"
        );
    }

    #[test]
    fn backoff_doubles_then_caps() {
        assert_eq!(backoff(0), Duration::from_secs(60));
        assert_eq!(backoff(1), Duration::from_secs(120));
        assert_eq!(backoff(5), Duration::from_secs(1920));
        assert_eq!(backoff(6), Duration::from_secs(3600));
        assert_eq!(backoff(40), Duration::from_secs(3600));
    }
}
