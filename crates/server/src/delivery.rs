//! Local delivery: queue → store, in batches.
//!
//! A delivery thread leases a batch of adjacent queued messages (one large read, the paper's
//! Ahead Read), appends every local recipient's copy to the store with one `append_batch`
//! (one durable sync for the whole batch), then records every outcome with one `finish_many`
//! (one queue commit). A crash between the two leaves messages delivered but not marked: they
//! are delivered again after restart, so duplicates are bounded by one batch (guarantee 2).
//!
//! Who owns a recipient is asked of [`Router`], the seam where a cluster later hands the
//! message to another node instead of the local store.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use queue::{Outcome, Queue, QueuedMessage};
use store::{AppendRequest, NewMessage, Store};

use crate::bounce;
use crate::events::Telemetry;
use crate::outbound::{self, Relay, Sent};

/// Most relay connections one delivery batch opens at once.
const RELAY_CONNECTIONS_MAX: usize = 16;

/// Where outbound mail goes.
pub(crate) enum Path {
    Relay(Relay),
    /// Each recipient domain's exchangers.
    Mx(Box<outbound::Mx>),
}

/// What outbound delivery needs: the path, TLS clients, and the runtime to run sessions on.
pub(crate) struct Outbound {
    pub(crate) path: Path,
    pub(crate) clients: outbound::Clients,
    pub(crate) runtime: tokio::runtime::Handle,
    pub(crate) hostname: String,
}

/// Messages leased per batch, and their record bytes.
const BATCH_RECORDS_MAX: usize = 256;
const BATCH_BYTES_MAX: usize = 32 << 20;
/// How long a message may stay undelivered before it bounces (RFC 5321 4.5.4.1: "at least
/// 4-5 days").
pub(crate) const RETRY_FOR: Duration = Duration::from_secs(5 * 24 * 3600);
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

/// Where a recipient's copy goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// A mailbox in this node's store (the canonical user address).
    Local(String),
    /// Another domain: outbound SMTP.
    Remote,
    /// Was local once and is no longer (user deleted since the message was accepted).
    Unknown,
}

/// The location query: who owns this recipient.
pub trait Router: Send + Sync {
    fn route(&self, address: &str) -> Route;
}

/// Wakes delivery threads when the queue commits new mail.
#[derive(Default)]
pub(crate) struct Wakeup {
    pending: Mutex<bool>,
    signal: Condvar,
}

impl Wakeup {
    pub(crate) fn notify(&self) {
        *self.pending.lock().unwrap_or_else(|p| p.into_inner()) = true;
        self.signal.notify_all();
    }

    fn wait(&self, timeout: Duration) {
        let mut pending = self.pending.lock().unwrap_or_else(|p| p.into_inner());
        if !*pending {
            pending = self
                .signal
                .wait_timeout(pending, timeout)
                .map(|(g, _)| g)
                .unwrap_or_else(|p| p.into_inner().0);
        }
        *pending = false;
    }
}

pub(crate) struct Delivery {
    pub(crate) queue: Arc<Queue>,
    pub(crate) store: Store,
    pub(crate) router: Arc<dyn Router>,
    pub(crate) wakeup: Arc<Wakeup>,
    pub(crate) stop: Arc<AtomicBool>,
    pub(crate) hostname: String,
    /// Recipient copies appended to the store since start.
    pub(crate) delivered: Arc<std::sync::atomic::AtomicU64>,
    /// Where remote recipients go; `None`: they wait in the deferred queue.
    pub(crate) outbound: Option<Arc<Outbound>>,
    /// Held shared from routing a batch to appending it (see `Ctx::mailboxes`).
    pub(crate) mailboxes: Arc<std::sync::RwLock<()>>,
    /// The mail log and metrics.
    pub(crate) telemetry: Arc<Telemetry>,
    /// Users whose mailbox here must not change now (a move; see `moves.rs`).
    pub(crate) moves: Arc<crate::moves::Moves>,
}

pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// The wait before attempt `attempts + 1`: 1, 2, 4 ... minutes, at most an hour.
pub(crate) fn backoff(attempts: u32) -> Duration {
    Duration::from_secs(60u64 << attempts.min(6)).min(Duration::from_secs(3600))
}

impl Delivery {
    /// Runs until `stop` is set. Errors from the queue end the thread (the queue is poisoned
    /// and the server must restart to recover); store errors defer the affected recipients.
    pub(crate) fn run(self) {
        while !self.stop.load(Ordering::Relaxed) {
            match self.round() {
                Ok(0) => self.wakeup.wait(IDLE_POLL),
                Ok(n) if n < BATCH_FULL => std::thread::sleep(LINGER),
                Ok(_) => {}
                Err(e) => {
                    tracing::error!(event = "delivery_stopped", error = %e);
                    return;
                }
            }
        }
    }

    /// One batch: returns how many messages it handled.
    fn round(&self) -> Result<usize, queue::QueueError> {
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
        let mailboxes = self.mailboxes.read().unwrap_or_else(|p| p.into_inner());
        // Every (message, recipient index) and where its copy goes.
        let mut appends = Vec::new();
        // (message, recipient, index of its append) for every local copy.
        let mut slots: Vec<(usize, usize, usize)> = Vec::new();
        let mut outcomes: Vec<Vec<(usize, Outcome)>> = vec![Vec::new(); batch.len()];
        // Per message, its remote recipients.
        let mut remote: Vec<(usize, Vec<usize>)> = Vec::new();
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
            let has_remote =
                self.outbound.is_some() && routes.iter().any(|(_, route)| *route == Route::Remote);
            let last_local = routes
                .iter()
                .rposition(|(_, route)| matches!(route, Route::Local(_)));
            for (i, (r, route)) in routes.into_iter().enumerate() {
                match route {
                    // Checked under the shared mailbox lock: a move's freeze takes it
                    // exclusively once after marking the user.
                    Route::Local(user) if self.moves.held(&user) => {
                        let outcome = Outcome::Deferred {
                            retry_at_ms: now + crate::moves::DEFER_FOR.as_millis() as u64,
                            reason: "451 4.2.0 mailbox is being moved".to_string(),
                        };
                        self.log(message, r, "local", &outcome, None, now);
                        outcomes[m].push((r, outcome));
                    }
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
                        appends.push(AppendRequest {
                            user,
                            folder: "INBOX".to_string(),
                            message: NewMessage {
                                internal_date: (message.envelope.arrival_ms / 1000) as i64,
                                content,
                                ..NewMessage::default()
                            },
                        });
                    }
                    Route::Unknown => {
                        let outcome = Outcome::Failed {
                            reason: "550 5.1.1 mailbox no longer exists".to_string(),
                        };
                        self.log(message, r, "local", &outcome, None, now);
                        outcomes[m].push((r, outcome));
                    }
                    Route::Remote if self.outbound.is_some() => match remote.last_mut() {
                        Some((last, rs)) if *last == m => rs.push(r),
                        _ => remote.push((m, vec![r])),
                    },
                    Route::Remote => {
                        let outcome = remote_outcome(message, now);
                        self.log(message, r, "none", &outcome, None, now);
                        outcomes[m].push((r, outcome));
                    }
                }
            }
        }
        let results = if appends.is_empty() {
            Vec::new()
        } else {
            self.store.append_batch(appends)
        };
        drop(mailboxes);
        for (m, r, index) in slots {
            let (outcome, uid) = match results.get(index) {
                Some(Ok(appended)) => {
                    self.delivered.fetch_add(1, Ordering::Relaxed);
                    (Outcome::Delivered, Some(appended.uid))
                }
                Some(Err(e)) => (
                    retry_or_fail(&batch[m], now, format!("451 4.3.0 store: {e}")),
                    None,
                ),
                None => (
                    retry_or_fail(&batch[m], now, "451 4.3.0 store gave no result".into()),
                    None,
                ),
            };
            self.log(&batch[m], r, "local", &outcome, uid, now);
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
                self.log(&batch[m], r, &relay, &outcome, None, now);
                outcomes[m].push((r, outcome));
            }
        }
        let items: Vec<_> = batch
            .iter()
            .zip(outcomes)
            .map(|(message, outcome)| (message.id, outcome))
            .collect();
        for (result, (id, _)) in self.queue.finish_many(&items).into_iter().zip(&items) {
            if let Err(e) = result {
                tracing::warn!(event = "queue_error", queue_id = id, error = %e);
            }
        }
        Ok(())
    }

    /// One line of the mail log (and the metrics) for a recipient's outcome.
    fn log(
        &self,
        message: &QueuedMessage,
        r: usize,
        relay: &str,
        outcome: &Outcome,
        uid: Option<u32>,
        now: u64,
    ) {
        let to = message
            .envelope
            .recipients
            .get(r)
            .map_or("", |recipient| recipient.address.as_str());
        let delay = Duration::from_millis(now.saturating_sub(message.envelope.arrival_ms));
        match outcome {
            Outcome::Delivered => match uid {
                Some(uid) => self
                    .telemetry
                    .delivered_local(message.id, to, "INBOX", uid, delay),
                None => self
                    .telemetry
                    .delivered_remote(message.id, to, relay, delay),
            },
            Outcome::Deferred {
                retry_at_ms,
                reason,
            } => self
                .telemetry
                .deferred(message.id, to, relay, reason, *retry_at_ms),
            Outcome::Failed { reason } => self.telemetry.bounced(message.id, to, relay, reason),
        }
    }

    /// Sends the delivery status notification for a message whose recipients failed, then
    /// removes it. A null sender never gets one (RFC 5321 6.1, no bounce loops); a local
    /// sender gets it in their INBOX; a remote one waits for outbound delivery like any mail.
    fn bounce(&self, message: &QueuedMessage, now: u64) -> Result<(), queue::QueueError> {
        let sender = &message.envelope.sender;
        if !sender.is_empty() {
            let report = bounce::dsn(message, &self.hostname, now);
            let _mailboxes = self.mailboxes.read().unwrap_or_else(|p| p.into_inner());
            match self.router.route(sender) {
                Route::Local(user) => {
                    let mut content = final_delivery_fields("", &user).into_bytes();
                    content.extend_from_slice(&report);
                    let appended = self.store.append(
                        &user,
                        "INBOX",
                        NewMessage {
                            internal_date: (now / 1000) as i64,
                            content,
                            ..NewMessage::default()
                        },
                    );
                    match appended {
                        Ok(appended) => self.telemetry.dsn(message.id, &user, Some(appended.uid)),
                        Err(e) => {
                            // Keep the bounce leased-and-released so it is tried again later.
                            tracing::warn!(
                                event = "dsn_deferred",
                                queue_id = message.id,
                                to = %crate::log::shown(sender),
                                error = %e
                            );
                            self.queue.release(message.id);
                            return Ok(());
                        }
                    }
                }
                Route::Remote | Route::Unknown => {
                    let envelope = queue::Envelope {
                        sender: String::new(),
                        recipients: vec![queue::Recipient {
                            address: sender.clone(),
                            status: queue::RecipientStatus::Pending,
                            last_error: None,
                        }],
                        arrival_ms: now,
                    };
                    let dsn_id = self.queue.enqueue(envelope, report)?;
                    self.telemetry.dsn_queued(message.id, sender, dsn_id);
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
pub(crate) fn final_delivery_fields(sender: &str, mailbox: &str) -> String {
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

    #[test]
    fn backoff_doubles_then_caps() {
        assert_eq!(backoff(0), Duration::from_secs(60));
        assert_eq!(backoff(1), Duration::from_secs(120));
        assert_eq!(backoff(5), Duration::from_secs(1920));
        assert_eq!(backoff(6), Duration::from_secs(3600));
        assert_eq!(backoff(40), Duration::from_secs(3600));
    }
}
