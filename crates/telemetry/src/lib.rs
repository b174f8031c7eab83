//! What the mail server tells its operator: one function per event, each writing one line of
//! the mail log (`event=<name>` and `key=value` fields, logfmt through the binary's formatter)
//! and moving the Prometheus metrics that count it. Nothing else logs mail events or touches
//! a metric, so the two always agree. Every part that has something to report (the server's
//! sessions, delivery, the cluster, the mailboxes' one road for new mail) holds a
//! [`Telemetry`]; none reports through a part above it.
//!
//! The queue id (`queue_id=`, the queue's message id) ties an `accepted` line to every
//! `delivered`, `deferred` and `bounced` line of the same message, as Postfix's queue ids do.
//! Those (and `dsn`) are [`DeliveryEvents`], the trait delivery reports through (so its unit
//! tests can record them).
//!
//! | event | fields |
//! |---|---|
//! | `connect`, `disconnect` | proto, client, tls; disconnect: duration |
//! | `login` | proto, user, mechanism, result (ok, failed, unavailable, refused), client |
//! | `throttled` | proto, user, client, scope (user, address, network) |
//! | `accepted` | proto, queue_id, from, rcpts, to, size, client, user, spf/dkim/dmarc, dkim_signed |
//! | `rejected` | proto, stage, code, enhanced, reason, client |
//! | `spam` | proto, session, user, from, client, score, action, reasons |
//! | `milter_error` | filter, step, error, applied |
//! | `spam_trained` | user, class, messages, already, source |
//! | `outbound_spam` | user, action (refused, limited), score, reasons |
//! | `managesieve` | action (putscript, setactive, deletescript, renamescript), user, script; renamescript: to |
//! | `delivered` | queue_id, to, folder, uid, delay (local); relay (remote) |
//! | `deferred` | queue_id, to, relay, reply, next_attempt |
//! | `bounced` | queue_id, to, relay, reply |

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::counter::{ConstCounter, Counter};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::{ConstGauge, Gauge};
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

mod delivery;
mod shown;
mod spam;
mod spam_metrics;
mod transport;
mod transport_metrics;

pub use delivery::{DeliveryEvents, SieveCopy};
pub use shown::shown;
pub use spam::SpamVerdict;
pub use spam_metrics::SPAM_ACTIONS;
pub use transport::TlsSession;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ProtocolLabel {
    protocol: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ActionLabel {
    action: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct LoginLabels {
    protocol: &'static str,
    result: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RejectLabels {
    protocol: &'static str,
    stage: &'static str,
}

/// The `action` values of `event=sieve` lines and of `mailstow_sieve_actions_total`.
pub const SIEVE_ACTIONS: [&str; 9] = [
    "keep",
    "fileinto",
    "discard",
    "redirect",
    "reject",
    "ereject",
    "vacation",
    "vacation_skipped",
    "refused",
];

/// The `action` values of `event=managesieve` lines and of
/// `mailstow_managesieve_changes_total`: the ManageSieve commands that change a user's scripts.
pub const MANAGESIEVE_ACTIONS: [&str; 4] =
    ["putscript", "setactive", "deletescript", "renamescript"];

/// The metrics, registered once; cheap to update from any thread.
pub struct Telemetry {
    registry: std::sync::Mutex<Registry>,
    accepted: Family<ProtocolLabel, Counter>,
    rejected: Family<RejectLabels, Counter>,
    delivered: Counter,
    deferred: Counter,
    bounced: Counter,
    connections: Family<ProtocolLabel, Gauge>,
    logins: Family<LoginLabels, Counter>,
    /// From the end of DATA (or BDAT LAST) to the reply: the wait group commit adds.
    reply_seconds: Histogram,
    /// From acceptance to delivery into a mailbox or to a remote server.
    delivery_seconds: Histogram,
    /// Actions users' Sieve rules took, by action.
    sieve_actions: Family<ActionLabel, Counter>,
    /// Sieve runs that failed (the copy kept in INBOX).
    sieve_errors: Counter,
    /// Users' script changes over ManageSieve, by action.
    managesieve_changes: Family<ActionLabel, Counter>,
    /// The spam filter's (`spam.rs`).
    spam: spam_metrics::SpamMetrics,
    /// Certificates and transport security (`transport.rs`).
    transport: transport_metrics::TransportMetrics,
}

impl Telemetry {
    pub fn new() -> Arc<Telemetry> {
        let mut registry = Registry::default();
        let accepted = Family::<ProtocolLabel, Counter>::default();
        let rejected = Family::<RejectLabels, Counter>::default();
        let delivered = Counter::default();
        let deferred = Counter::default();
        let bounced = Counter::default();
        let connections = Family::<ProtocolLabel, Gauge>::default();
        let logins = Family::<LoginLabels, Counter>::default();
        // 100 us to ~3.3 s.
        let reply_seconds = Histogram::new(exponential_buckets(0.0001, 2.0, 16));
        // 1 ms to ~2.3 h.
        let delivery_seconds = Histogram::new(exponential_buckets(0.001, 2.0, 24));
        let sieve_actions = Family::<ActionLabel, Counter>::default();
        let sieve_errors = Counter::default();
        registry.register(
            "mailstow_sieve_actions",
            "Actions users' Sieve rules took on delivered copies, by action",
            sieve_actions.clone(),
        );
        registry.register(
            "mailstow_sieve_errors",
            "Sieve rules that failed on a copy (kept in INBOX instead)",
            sieve_errors.clone(),
        );
        for action in SIEVE_ACTIONS {
            let _ = sieve_actions.get_or_create(&ActionLabel { action });
        }
        let managesieve_changes = Family::<ActionLabel, Counter>::default();
        registry.register(
            "mailstow_managesieve_changes",
            "Changes users made to their Sieve scripts over ManageSieve, by command",
            managesieve_changes.clone(),
        );
        for action in MANAGESIEVE_ACTIONS {
            let _ = managesieve_changes.get_or_create(&ActionLabel { action });
        }
        registry.register(
            "mailstow_messages_accepted",
            "Messages made durable in the queue (SMTP, submission, LMTP)",
            accepted.clone(),
        );
        registry.register(
            "mailstow_messages_rejected",
            "Refusals sent to SMTP, submission and LMTP clients, by the step they answered",
            rejected.clone(),
        );
        registry.register(
            "mailstow_messages_delivered",
            "Recipient copies delivered to a mailbox or to a remote server",
            delivered.clone(),
        );
        registry.register(
            "mailstow_messages_deferred",
            "Recipient delivery attempts that failed temporarily",
            deferred.clone(),
        );
        registry.register(
            "mailstow_messages_bounced",
            "Recipients that failed for good",
            bounced.clone(),
        );
        registry.register(
            "mailstow_connections",
            "Open client connections, by protocol",
            connections.clone(),
        );
        registry.register(
            "mailstow_logins",
            "Login attempts, by protocol and result",
            logins.clone(),
        );
        registry.register(
            "mailstow_data_reply_seconds",
            "Time from the end of a message's data to the reply (250 once durable)",
            reply_seconds.clone(),
        );
        registry.register(
            "mailstow_delivery_delay_seconds",
            "Time from a message's acceptance to a recipient's delivery",
            delivery_seconds.clone(),
        );
        // Every series a dashboard or an alert names exists from the start, at 0: a rate over
        // a series that appears with its first event would miss that event.
        for protocol in ["smtp", "submission", "lmtp"] {
            let _ = accepted.get_or_create(&ProtocolLabel { protocol });
            for stage in ["connect", "mail", "rcpt", "data"] {
                let _ = rejected.get_or_create(&RejectLabels { protocol, stage });
            }
        }
        for protocol in ["smtp", "submission", "lmtp", "pop3", "imap", "managesieve"] {
            let _ = connections.get_or_create(&ProtocolLabel { protocol });
        }
        for protocol in ["submission", "pop3", "imap", "managesieve", "web"] {
            for result in ["ok", "failed"] {
                let _ = logins.get_or_create(&LoginLabels { protocol, result });
            }
        }
        let spam = spam_metrics::SpamMetrics::register(&mut registry);
        let transport = transport_metrics::TransportMetrics::register(&mut registry);
        Arc::new(Telemetry {
            spam,
            transport,
            registry: std::sync::Mutex::new(registry),
            accepted,
            rejected,
            delivered,
            deferred,
            bounced,
            connections,
            logins,
            reply_seconds,
            delivery_seconds,
            sieve_actions,
            sieve_errors,
            managesieve_changes,
        })
    }

    /// Adds the engines' own counters (read on each scrape).
    pub fn register_engines(
        &self,
        queue: Arc<queue::Queue>,
        store: Arc<store::Store>,
        parked: Box<dyn Fn() -> usize + Send + Sync>,
    ) {
        self.registry
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .register_collector(Box::new(Engines {
                queue,
                store,
                parked,
            }));
    }

    /// Adds `mailstow_replica_lag_seconds` (docs/replication.md): how long the oldest change
    /// not yet on the replica partner has waited, read on each scrape.
    pub fn register_replica_lag(&self, lag: Box<dyn Fn() -> f64 + Send + Sync>) {
        self.registry
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .register_collector(Box::new(ReplicaLag { lag }));
    }

    /// The metrics in Prometheus' text format.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        let registry = self.registry.lock().unwrap_or_else(|p| p.into_inner());
        if prometheus_client::encoding::text::encode(&mut out, &registry).is_err() {
            out.clear();
        }
        out
    }

    /// A connection was admitted: logs `connect` now and `disconnect` when the guard drops.
    pub fn connection(
        self: &Arc<Self>,
        proto: &'static str,
        client: SocketAddr,
        tls: bool,
    ) -> OpenConnection {
        self.connections
            .get_or_create(&ProtocolLabel { protocol: proto })
            .inc();
        tracing::info!(event = "connect", proto, client = %client, tls);
        OpenConnection {
            telemetry: self.clone(),
            proto,
            client,
            opened: Instant::now(),
        }
    }

    /// A connection refused before any session (too many connections, a blocked address):
    /// `line` is what it was told.
    pub fn refused_connection(&self, proto: &'static str, client: SocketAddr, line: &str) {
        self.rejected
            .get_or_create(&RejectLabels {
                protocol: proto,
                stage: "connect",
            })
            .inc();
        tracing::info!(
            event = "rejected",
            proto,
            stage = "connect",
            reason = %shown(line),
            client = %client
        );
    }

    /// `result`: ok, failed (wrong credentials), unavailable (directory or verifier
    /// busy), refused (the account is being deleted, too many sessions).
    pub fn login(
        &self,
        proto: &'static str,
        user: &str,
        mechanism: &str,
        result: &'static str,
        client: std::net::IpAddr,
    ) {
        self.logins
            .get_or_create(&LoginLabels {
                protocol: proto,
                result,
            })
            .inc();
        tracing::info!(
            event = "login",
            proto,
            user = %shown(user),
            mechanism = %shown(mechanism),
            result,
            client = %client
        );
    }

    /// A login that involved another node of the cluster: `proxied` (the password was right
    /// and the session now runs on `node`, the user's), `unavailable` (right, but `node` is
    /// down), or, on the owner, `ok` for a session a node handed over (`node` is that node).
    pub fn login_cluster(
        &self,
        proto: &'static str,
        user: &str,
        mechanism: &str,
        result: &'static str,
        client: std::net::IpAddr,
        node: &str,
    ) {
        self.logins
            .get_or_create(&LoginLabels {
                protocol: proto,
                result,
            })
            .inc();
        tracing::info!(
            event = "login",
            proto,
            user = %shown(user),
            mechanism = %shown(mechanism),
            result,
            client = %client,
            node = %shown(node)
        );
    }

    pub fn throttled(
        &self,
        proto: &'static str,
        user: &str,
        client: std::net::IpAddr,
        scope: &'static str,
    ) {
        self.logins
            .get_or_create(&LoginLabels {
                protocol: proto,
                result: "throttled",
            })
            .inc();
        tracing::info!(
            event = "throttled",
            proto,
            user = %shown(user),
            client = %client,
            scope
        );
    }

    /// A message made durable in the queue; `reply_wait` is from the end of its data to
    /// the moment the `250` could be sent.
    pub fn accepted(&self, message: &Accepted<'_>, reply_wait: Duration) {
        self.accepted
            .get_or_create(&ProtocolLabel {
                protocol: message.proto,
            })
            .inc();
        self.reply_seconds.observe(reply_wait.as_secs_f64());
        let checks = message.checks.as_ref();
        tracing::info!(
            event = "accepted",
            proto = message.proto,
            queue_id = message.queue_id,
            from = %format!("<{}>", shown(message.from)),
            rcpts = message.to.len(),
            to = %shown(&message.to.join(",")),
            size = message.size,
            client = %message.client,
            user = %message.user.map_or_else(|| "-".to_string(), shown),
            spf = checks.map_or("-", |c| c.spf),
            dkim = %checks.map_or("-", |c| c.dkim.as_str()),
            dmarc = checks.map_or("-", |c| c.dmarc),
            dkim_signed = %message.dkim_signed.as_deref().map_or_else(|| "-".to_string(), shown),
            reply_wait = %seconds(reply_wait)
        );
    }

    /// A failure reply an SMTP, submission or LMTP session sent.
    pub fn rejected(&self, proto: &'static str, refusal: &smtp::Refusal, client: std::net::IpAddr) {
        let stage = refusal.stage.name();
        self.rejected
            .get_or_create(&RejectLabels {
                protocol: proto,
                stage,
            })
            .inc();
        let reply = &refusal.reply;
        let enhanced = reply
            .enhanced
            .map(|(a, b, c)| format!("{a}.{b}.{c}"))
            .unwrap_or_else(|| "-".into());
        tracing::info!(
            event = "rejected",
            proto,
            stage,
            code = reply.code,
            enhanced = %enhanced,
            reason = %shown(&reply.text),
            from = %refusal.from.as_deref().map_or_else(|| "-".to_string(), |f| format!("<{}>", shown(f))),
            to = %refusal.to.as_deref().map_or_else(|| "-".to_string(), shown),
            client = %client
        );
    }

    /// A user changed their Sieve scripts over ManageSieve (RFC 5804): `action` is one of
    /// [`MANAGESIEVE_ACTIONS`]; `script` the script's name (for setactive, `-` when none was
    /// made active); `to` the new name of a renamescript.
    pub fn managesieve_change(
        &self,
        action: &'static str,
        user: &str,
        script: Option<&str>,
        to: Option<&str>,
    ) {
        self.managesieve_changes
            .get_or_create(&ActionLabel { action })
            .inc();
        tracing::info!(
            event = "managesieve",
            action,
            user = %shown(user),
            script = %script.map_or_else(|| "-".to_string(), shown),
            to = %to.map_or_else(|| "-".to_string(), shown)
        );
    }

    /// An IMAP APPEND, COPY or MOVE refused `NO [OVERQUOTA]` (SMTP and LMTP refusals at RCPT
    /// are `rejected` lines of their own).
    pub fn over_quota(
        &self,
        proto: &'static str,
        user: &str,
        added: store::Usage,
        why: store::OverQuota,
    ) {
        self.rejected
            .get_or_create(&RejectLabels {
                protocol: proto,
                stage: "quota",
            })
            .inc();
        tracing::info!(
            event = "rejected",
            proto,
            stage = "quota",
            user = %shown(user),
            messages = added.messages,
            size = added.bytes,
            reason = match why {
                store::OverQuota::TooLarge => "larger than the quota",
                store::OverQuota::Full => "quota exceeded",
            }
        );
    }
}

/// Delivery's events (the `delivery` crate's threads call them): `delivered`, `deferred`,
/// `bounced` and `dsn` lines with their metrics, and delivery's warnings.
impl DeliveryEvents for Telemetry {
    fn delivered_local(&self, queue_id: u64, to: &str, folder: &str, uid: u32, delay: Duration) {
        self.delivered.inc();
        self.delivery_seconds.observe(delay.as_secs_f64());
        tracing::info!(
            event = "delivered",
            queue_id,
            to = %shown(to),
            folder = %shown(folder),
            uid,
            delay = %seconds(delay)
        );
    }

    /// A copy another node handed over (`origin` = that node and its queue id) stored here.
    fn delivered_handed_over(
        &self,
        origin: &str,
        to: &str,
        folder: &str,
        uid: u32,
        delay: Duration,
    ) {
        self.delivered.inc();
        self.delivery_seconds.observe(delay.as_secs_f64());
        tracing::info!(
            event = "delivered",
            origin = %shown(origin),
            to = %shown(to),
            folder = %shown(folder),
            uid,
            delay = %seconds(delay)
        );
    }

    fn delivered_remote(&self, queue_id: u64, to: &str, relay: &str, delay: Duration) {
        self.delivered.inc();
        self.delivery_seconds.observe(delay.as_secs_f64());
        tracing::info!(
            event = "delivered",
            queue_id,
            to = %shown(to),
            relay = %shown(relay),
            delay = %seconds(delay)
        );
    }

    fn deferred(&self, queue_id: u64, to: &str, relay: &str, reply: &str, next_attempt_ms: u64) {
        self.deferred.inc();
        tracing::info!(
            event = "deferred",
            queue_id,
            to = %shown(to),
            relay = %shown(relay),
            reply = %shown(reply),
            next_attempt = %rfc3339(next_attempt_ms)
        );
    }

    /// The delivery status notification of message `queue_id` was put in its sender's
    /// mailbox.
    fn dsn(&self, queue_id: u64, to: &str, uid: Option<u32>) {
        tracing::info!(
            event = "dsn",
            queue_id,
            to = %shown(to),
            folder = "INBOX",
            uid = uid.unwrap_or(0)
        );
    }

    /// The notification for a remote sender was queued as message `dsn_id`.
    fn dsn_queued(&self, queue_id: u64, to: &str, dsn_id: u64) {
        tracing::info!(
            event = "dsn",
            queue_id,
            to = %shown(to),
            dsn_queue_id = dsn_id
        );
    }

    fn bounced(&self, queue_id: u64, to: &str, relay: &str, reply: &str) {
        self.bounced.inc();
        tracing::info!(
            event = "bounced",
            queue_id,
            to = %shown(to),
            relay = %shown(relay),
            reply = %shown(reply)
        );
    }

    fn dsn_deferred(&self, queue_id: u64, to: &str, error: &store::StoreError) {
        tracing::warn!(
            event = "dsn_deferred",
            queue_id,
            to = %shown(to),
            error = %error
        );
    }

    fn queue_error(&self, queue_id: u64, error: &queue::QueueError) {
        tracing::warn!(event = "queue_error", queue_id, error = %error);
    }

    fn stopped(&self, error: &queue::QueueError) {
        tracing::error!(event = "delivery_stopped", error = %error);
    }

    fn paused_for_space(&self, paused: bool, why: &str) {
        if paused {
            tracing::error!(event = "delivery_paused", reason = %why);
        } else {
            tracing::info!(event = "delivery_resumed");
        }
    }

    fn sieve_action(&self, copy: SieveCopy<'_>, user: &str, action: &'static str, target: &str) {
        self.sieve_actions
            .get_or_create(&ActionLabel { action })
            .inc();
        // `event=sieve action=fileinto folder=... user=... queue_id=...`: the target's field
        // is named by what it is.
        macro_rules! line {
            ($($copy:tt)*) => {
                match action {
                    "keep" | "fileinto" => tracing::info!(
                        event = "sieve", action, folder = %shown(target), user = %shown(user), $($copy)*
                    ),
                    "redirect" | "vacation" => tracing::info!(
                        event = "sieve", action, to = %shown(target), user = %shown(user), $($copy)*
                    ),
                    "discard" => tracing::info!(
                        event = "sieve", action, user = %shown(user), $($copy)*
                    ),
                    _ => tracing::info!(
                        event = "sieve", action, reason = %shown(target), user = %shown(user), $($copy)*
                    ),
                }
            };
        }
        match copy {
            SieveCopy::Queued(queue_id) => line!(queue_id),
            SieveCopy::HandedOver(origin) => line!(origin = %shown(origin)),
            SieveCopy::Arriving(session) => line!(session = %shown(session)),
        }
    }

    fn sieve_error(&self, copy: SieveCopy<'_>, user: &str, error: &str) {
        self.sieve_errors.inc();
        match copy {
            SieveCopy::Queued(queue_id) => tracing::warn!(
                event = "sieve_error",
                user = %shown(user),
                queue_id,
                error = %shown(error),
                msg = "kept in INBOX"
            ),
            SieveCopy::HandedOver(origin) | SieveCopy::Arriving(origin) => tracing::warn!(
                event = "sieve_error",
                user = %shown(user),
                origin = %shown(origin),
                error = %shown(error),
                msg = "kept in INBOX"
            ),
        }
    }
}

/// What an `accepted` line says about a message.
pub struct Accepted<'a> {
    pub proto: &'static str,
    pub queue_id: u64,
    pub from: &'a str,
    pub to: &'a [String],
    /// Bytes received (without the header fields we added).
    pub size: usize,
    pub client: std::net::IpAddr,
    /// The logged-in user (submission).
    pub user: Option<&'a str>,
    /// SPF, DKIM and DMARC of MX mail, when checked.
    pub checks: Option<SenderChecks>,
    /// The signature this server added (submission, the web view): `domain:selector`.
    pub dkim_signed: Option<String>,
}

/// The sender checks' results, by their Authentication-Results names.
#[derive(Clone)]
pub struct SenderChecks {
    pub spf: &'static str,
    /// One result per signature, comma-separated; `none` without a signature.
    pub dkim: String,
    pub dmarc: &'static str,
}

/// Logs `disconnect` (and lowers the open-connections gauge) when the connection ends,
/// however it ends.
pub struct OpenConnection {
    telemetry: Arc<Telemetry>,
    proto: &'static str,
    client: SocketAddr,
    opened: Instant,
}

impl Drop for OpenConnection {
    fn drop(&mut self) {
        self.telemetry
            .connections
            .get_or_create(&ProtocolLabel {
                protocol: self.proto,
            })
            .dec();
        tracing::info!(
            event = "disconnect",
            proto = self.proto,
            client = %self.client,
            duration = %seconds(self.opened.elapsed())
        );
    }
}

/// A duration as seconds with milliseconds, as delays are read.
fn seconds(d: Duration) -> String {
    format!("{:.3}", d.as_secs_f64())
}

fn rfc3339(ms: u64) -> String {
    mail_parser::DateTime::from_timestamp((ms / 1000) as i64).to_rfc3339()
}

/// The queue's and the store's counters, read at scrape time.
struct Engines {
    queue: Arc<queue::Queue>,
    store: Arc<store::Store>,
    /// IMAP connections in the server's parking lot now.
    parked: Box<dyn Fn() -> usize + Send + Sync>,
}

impl std::fmt::Debug for Engines {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Engines")
    }
}

impl Collector for Engines {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let queue = self.queue.stats();
        let store = self.store.io_counters();
        let fsyncs = ConstCounter::new(
            queue
                .fdatasyncs
                .saturating_add(store.data_syncs)
                .saturating_add(store.journal_syncs),
        );
        fsyncs.encode(encoder.encode_descriptor(
            "mailstow_fsync",
            "fdatasync calls of the queue and the store (data and journal)",
            None,
            fsyncs.metric_type(),
        )?)?;
        let pending = ConstGauge::new(queue.pending_messages as i64);
        pending.encode(encoder.encode_descriptor(
            "mailstow_queue_messages",
            "Messages waiting in the queue for delivery (deferred ones included)",
            None,
            pending.metric_type(),
        )?)?;
        let deferred = ConstGauge::new(queue.deferred_messages as i64);
        deferred.encode(encoder.encode_descriptor(
            "mailstow_queue_deferred_messages",
            "Messages in the deferred queue (waiting for a retry)",
            None,
            deferred.metric_type(),
        )?)?;
        let parked = ConstGauge::new((self.parked)() as i64);
        parked.encode(encoder.encode_descriptor(
            "mailstow_imap_parked_connections",
            "IMAP connections in IDLE parked in the parking lot (also counted in mailstow_connections)",
            None,
            parked.metric_type(),
        )?)?;
        Ok(())
    }
}

/// The replica lag, read on each scrape.
struct ReplicaLag {
    lag: Box<dyn Fn() -> f64 + Send + Sync>,
}

impl std::fmt::Debug for ReplicaLag {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ReplicaLag")
    }
}

impl Collector for ReplicaLag {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let lag = ConstGauge::new((self.lag)());
        lag.encode(encoder.encode_descriptor(
            "mailstow_replica_lag_seconds",
            "How long the oldest change not yet on the replica partner has waited (0: none)",
            None,
            lag.metric_type(),
        )?)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_replica_lag_is_read_at_each_scrape() {
        let t = Telemetry::new();
        let lag = Arc::new(std::sync::Mutex::new(0.0));
        let read = lag.clone();
        t.register_replica_lag(Box::new(move || *read.lock().unwrap()));
        assert!(
            t.encode().contains("mailstow_replica_lag_seconds 0.0"),
            "{}",
            t.encode()
        );
        *lag.lock().unwrap() = 2.5;
        assert!(t.encode().contains("mailstow_replica_lag_seconds 2.5"));
    }

    #[test]
    fn the_metrics_have_our_names_and_move() {
        let t = Telemetry::new();
        let fresh = t.encode();
        for line in [
            "mailstow_messages_accepted_total{protocol=\"smtp\"} 0",
            "mailstow_messages_rejected_total{protocol=\"smtp\",stage=\"rcpt\"} 0",
            "mailstow_connections{protocol=\"pop3\"} 0",
            "mailstow_logins_total{protocol=\"imap\",result=\"failed\"} 0",
            "mailstow_messages_delivered_total 0",
            "mailstow_logins_total{protocol=\"managesieve\",result=\"ok\"} 0",
            "mailstow_managesieve_changes_total{action=\"putscript\"} 0",
        ] {
            assert!(fresh.contains(line), "{line} missing from\n{fresh}");
        }
        let client: SocketAddr = "192.0.2.1:2525".parse().unwrap();
        let _open = t.connection("imap", client, true);
        t.login("imap", "a@b.example", "PLAIN", "ok", client.ip());
        t.rejected(
            "smtp",
            &smtp::Refusal {
                stage: smtp::Stage::Rcpt,
                reply: smtp::Reply::new(550, (5, 1, 1), "no such user"),
                from: Some("a@b.example".into()),
                to: Some("c@d.example".into()),
            },
            client.ip(),
        );
        t.delivered_local(7, "a@b.example", "INBOX", 3, Duration::from_millis(12));
        t.managesieve_change("renamescript", "a@b.example", Some("old"), Some("new"));
        let text = t.encode();
        for line in [
            "mailstow_connections{protocol=\"imap\"} 1",
            "mailstow_logins_total{protocol=\"imap\",result=\"ok\"} 1",
            "mailstow_messages_rejected_total{protocol=\"smtp\",stage=\"rcpt\"} 1",
            "mailstow_messages_delivered_total 1",
            "mailstow_delivery_delay_seconds_count 1",
            "mailstow_managesieve_changes_total{action=\"renamescript\"} 1",
        ] {
            assert!(text.contains(line), "{line} missing from\n{text}");
        }
    }
}
