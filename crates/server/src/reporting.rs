//! TLS-RPT (RFC 8460) and DMARC aggregate (RFC 7489 7.2) reports in the running server, over
//! the `reports` crate: what is counted as mail comes and goes, the reports sent, and the
//! reports others send to our report addresses (issue 39).
//!
//! - **Counting never slows a reply.** The SMTP shell (a DMARC verdict) and delivery (an
//!   outbound session's TLS outcome, [`Reports::record`]) hand a row to a bounded channel
//!   ([`ROWS_QUEUED_MAX`]); one writer task puts each into the directory's counters. When
//!   the channel is full the row is dropped and counted (`event=report_dropped`, logged at
//!   most once per [`LOG_INTERVAL`] with the total so far).
//! - **What a DMARC row says.** One row per message from a domain with a DMARC policy
//!   (a DMARC result of `pass` or `fail`; `temperror` and `permerror` have no policy to
//!   report under), counted when the checks are done: disposition `reject` when the DMARC
//!   policy refused it (`dmarc_enforce`), `none` otherwise; a message the spam filter, a
//!   milter or a rule refuses later still counts as `none`, and one the local-sender check
//!   refuses is not counted. `sender_auth::Verdict` carries the policy that applied, not the
//!   record: the policy published is shown as that policy for `p` and `sp`, relaxed
//!   alignment, no testing flag; the policy domain is the From domain (see [`dmarc_key`]).
//! - **Sending.** Every [`SEND_INTERVAL`] (and on `mailstow report send`), the reports due
//!   ([`reports::Reporter::due`]: finished UTC days) are each claimed in the directory first
//!   (`mark_report_sent`, which refuses a second claim for the same kind, domain and day),
//!   then DKIM-signed with the key of the From domain (as vacation replies are) and queued
//!   from `postmaster@` our host's domain. So in a cluster only the node whose claim
//!   succeeded sends a report; a crash (or a queue refusal) between the claim and the queue
//!   loses that one report: at most once, since a report is statistics, not mail, and the
//!   other order would let two nodes racing both send it. A round does not start while the
//!   queue cannot write.
//! - **Receiving.** `tls-reports@DOMAIN` and `dmarc-reports@DOMAIN` of a local domain (the
//!   `rua` addresses `mailstow dns` prints) are taken at RCPT by the SMTP shell whatever
//!   users or aliases exist ([`report_address`]), and the message is given to
//!   [`Reports::ingest`] before the reply: stored when it is a report about one of our
//!   domains, logged and dropped otherwise (the sender still gets its `250`: a report is
//!   never bounced).

use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use directory::{
    Directory, DmarcDisposition, DmarcKey, DmarcPolicyPublished, ReportKind, SentReport,
    TlsPolicyType, TlsSessionKey,
};
use reports::{Config, OutgoingReport, Reporter, TxtResolver};
use tokio::sync::mpsc;

use crate::dkim::Signers;

/// Rows waiting for the writer task: past it a row is dropped (and counted). A row is a few
/// hundred bytes; the writer does one directory transaction per row.
pub const ROWS_QUEUED_MAX: usize = 4096;

/// How often the reports due are sent.
pub const SEND_INTERVAL: Duration = Duration::from_secs(3600);

/// Least time between two log lines about dropped rows or failed writes.
pub const LOG_INTERVAL: Duration = Duration::from_secs(60);

/// How long a round waits for the queue to make one report durable.
const QUEUE_WAIT_MAX: Duration = Duration::from_secs(30);

/// The local parts that take reports, by kind.
const REPORT_LOCAL_PARTS: [(&str, ReportKind); 2] = [
    ("tls-reports", ReportKind::TlsRpt),
    ("dmarc-reports", ReportKind::Dmarc),
];

/// A counter row for the writer, with its time (Unix seconds).
enum Row {
    Tls(TlsSessionKey),
    Dmarc(DmarcKey),
}

/// A log line at most once per [`LOG_INTERVAL`].
#[derive(Default)]
struct Gate(Mutex<Option<Instant>>);

impl Gate {
    fn open(&self) -> bool {
        let mut last = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if last.is_some_and(|at| at.elapsed() < LOG_INTERVAL) {
            return false;
        }
        *last = Some(Instant::now());
        true
    }
}

struct Inner<R> {
    /// Counts and takes in (its From is unused).
    recorder: Reporter<R>,
    resolver: R,
    directory: Directory,
    telemetry: Arc<telemetry::Telemetry>,
    hostname: String,
    rows: mpsc::Sender<(i64, Row)>,
    dropped: AtomicU64,
    dropped_logged: Gate,
    signers: Signers,
}

/// The server's reports: cheap to clone, shared by the SMTP shell, delivery and the sender.
pub struct Reports<R = hickory_resolver::TokioResolver> {
    inner: Arc<Inner<R>>,
}

impl<R> Clone for Reports<R> {
    fn clone(&self) -> Self {
        Reports {
            inner: self.inner.clone(),
        }
    }
}

/// Unix seconds now.
pub(crate) fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

impl Reports {
    /// The reports of a server named `hostname`, asking `dns_servers` (empty: the system's)
    /// where reports go. Starts the writer task: call within the runtime.
    pub fn start(
        dns_servers: &[std::net::SocketAddr],
        hostname: &str,
        directory: Directory,
        telemetry: Arc<telemetry::Telemetry>,
    ) -> anyhow::Result<Reports> {
        let resolver = sender_auth::resolver(
            dns_servers,
            sender_auth::DNS_TIMEOUT,
            sender_auth::DNS_TRIES,
        )
        .map_err(|e| anyhow::anyhow!("the reports' DNS resolver: {e}"))?;
        Reports::with_resolver(resolver, hostname, directory, telemetry)
    }
}

impl<R: TxtResolver + Clone + 'static> Reports<R> {
    /// [`Reports::start`] with its resolver.
    pub fn with_resolver(
        resolver: R,
        hostname: &str,
        directory: Directory,
        telemetry: Arc<telemetry::Telemetry>,
    ) -> anyhow::Result<Reports<R>> {
        let hostname = hostname.trim_end_matches('.').to_ascii_lowercase();
        let recorder = Reporter::new(
            directory.clone(),
            resolver.clone(),
            Config::new(&hostname, &hostname, &format!("postmaster@{hostname}")),
        )
        .map_err(|e| anyhow::anyhow!("reports: {e}"))?;
        let (rows, rx) = mpsc::channel(ROWS_QUEUED_MAX);
        let reports = Reports {
            inner: Arc::new(Inner {
                recorder,
                resolver,
                directory,
                telemetry,
                hostname,
                rows,
                dropped: AtomicU64::new(0),
                dropped_logged: Gate::default(),
                signers: Signers::default(),
            }),
        };
        tokio::spawn(write_rows(reports.inner.clone(), rx));
        Ok(reports)
    }

    /// Rows dropped because the writer was behind, since start.
    pub fn dropped(&self) -> u64 {
        self.inner.dropped.load(Ordering::Relaxed)
    }

    fn queue_row(&self, row: Row) {
        if self.inner.rows.try_send((unix_now(), row)).is_err() {
            let dropped = self.inner.dropped.fetch_add(1, Ordering::Relaxed) + 1;
            if self.inner.dropped_logged.open() {
                tracing::warn!(
                    event = "report_dropped",
                    dropped,
                    msg =
                        "report counters dropped: the directory writes them slower than they come"
                );
            }
        }
    }

    /// One outbound SMTP session's TLS outcome under its policy (RFC 8460 4): its
    /// `event=outbound_tls` and metrics now, its TLS-RPT counter soon. `result` is `None`
    /// when TLS was negotiated as the policy asked; `ip` unspecified when no address was
    /// reached. Delivery's sink: any thread may call it; it never waits.
    pub fn record(
        &self,
        policy: &transport_policy::AppliedPolicy,
        mx_host: &str,
        ip: IpAddr,
        result: Option<transport_policy::ResultType>,
        detail: &str,
    ) {
        let failure = result.map(transport_policy::ResultType::as_str);
        self.inner.telemetry.outbound_tls(&telemetry::TlsSession {
            domain: &policy.domain,
            mx_host,
            policy: policy.kind.as_str(),
            result: failure.unwrap_or("success"),
            detail,
        });
        self.queue_row(Row::Tls(tls_key(policy, mx_host, ip, failure)));
    }

    /// One received message's DMARC outcome: see the module documentation.
    pub(crate) fn record_dmarc(&self, key: DmarcKey) {
        self.queue_row(Row::Dmarc(key));
    }

    /// A message sent to a report address: stored when it holds a report about one of our
    /// domains (`event=report direction=received`), logged and dropped when not
    /// (`event=report_refused`). An error only when the directory could not store it now.
    pub(crate) async fn ingest(&self, message: &[u8], client: IpAddr) -> Result<(), String> {
        match self.inner.recorder.ingest(message, unix_now()).await {
            Ok(Some(report)) => {
                self.inner.telemetry.report(
                    report.kind.as_str(),
                    "received",
                    &report.domain,
                    &report.report_id,
                );
                Ok(())
            }
            Ok(None) => {
                tracing::info!(
                    event = "report_refused",
                    client = %client,
                    error = "the same report was received before"
                );
                Ok(())
            }
            Err(reports::Error::Directory(e)) => Err(e.to_string()),
            Err(e) => {
                tracing::info!(
                    event = "report_refused",
                    client = %client,
                    error = %telemetry::shown(&e.to_string())
                );
                Ok(())
            }
        }
    }

    /// Our reports' sender: `postmaster@` the first of our host name and its parent domains
    /// that is a local domain, else of the first local domain, else of the host name. A
    /// local domain's key signs them.
    async fn sender(&self) -> String {
        let cache = self.inner.directory.cache();
        let mut name = self.inner.hostname.as_str();
        loop {
            if cache.is_local_domain(name) {
                return format!("postmaster@{name}");
            }
            match name.split_once('.') {
                Some((_, parent)) => name = parent,
                None => break,
            }
        }
        match self.inner.directory.list_domains().await {
            Ok(domains) if !domains.is_empty() => format!("postmaster@{}", domains[0]),
            _ => format!("postmaster@{}", self.inner.hostname),
        }
    }

    /// Sends the reports due at `now` (Unix seconds): each claimed, signed, queued (see the
    /// module documentation). Returns one line per report sent.
    pub async fn send_due(
        &self,
        queue: &Arc<queue::Queue>,
        wakeup: &Arc<delivery::Wakeup>,
        now: i64,
    ) -> Result<String, String> {
        if let Some(problem) = queue.write_problem() {
            return Err(format!("the queue cannot take reports now: {problem}"));
        }
        let from = self.sender().await;
        let inner = &self.inner;
        let reporter = Reporter::new(
            inner.directory.clone(),
            inner.resolver.clone(),
            Config::new(&inner.hostname, &inner.hostname, &from),
        )
        .map_err(|e| e.to_string())?;
        let due = reporter.due(now).await.map_err(|e| e.to_string())?;
        let mut out = String::new();
        for report in due {
            let claimed = inner
                .directory
                .mark_report_sent(&SentReport {
                    kind: report.kind,
                    domain: report.domain.clone(),
                    day: report.day,
                    report_id: report.report_id.clone(),
                    sent_at: now,
                    rua: report.recipients.clone(),
                    bytes: report.message.len() as u64,
                })
                .await
                .map_err(|e| e.to_string())?;
            if !claimed {
                // Another node of the cluster sends it.
                continue;
            }
            match self.queue_report(queue, wakeup, &report).await {
                Ok(queue_id) => {
                    inner.telemetry.report(
                        report.kind.as_str(),
                        "sent",
                        &report.domain,
                        &report.report_id,
                    );
                    out.push_str(&format!(
                        "sent {} {} {} {} queue_id={queue_id} to {}\n",
                        report.kind,
                        report.domain,
                        reports_date(report.day),
                        report.report_id,
                        report.recipients.join(",")
                    ));
                }
                Err(e) => {
                    tracing::warn!(
                        event = "report_error",
                        kind = report.kind.as_str(),
                        domain = %telemetry::shown(&report.domain),
                        id = %telemetry::shown(&report.report_id),
                        error = %e,
                        msg = "claimed but not queued: this report is lost"
                    );
                    out.push_str(&format!(
                        "lost {} {} {}: {e}\n",
                        report.kind, report.domain, report.report_id
                    ));
                }
            }
        }
        Ok(out)
    }

    /// Signs `report` with its From domain's key, when we hold one (RFC 8460 5.3 asks for a
    /// signature), and makes it durable in the queue.
    async fn queue_report(
        &self,
        queue: &Arc<queue::Queue>,
        wakeup: &Arc<delivery::Wakeup>,
        report: &OutgoingReport,
    ) -> Result<u64, String> {
        let inner = &self.inner;
        let domain = report.from.rsplit_once('@').map_or("", |(_, d)| d);
        let mut content = Vec::with_capacity(report.message.len() + 1024);
        let mut dkim_signed = None;
        if let Some(signer) = inner.signers.for_domain(&inner.directory, domain) {
            match signer.sign(&report.message) {
                Ok(signature) => {
                    content.extend_from_slice(signature.as_bytes());
                    dkim_signed = Some(format!("{}:{}", signer.domain(), signer.selector()));
                }
                Err(e) => tracing::warn!(
                    event = "dkim_error",
                    domain = %telemetry::shown(domain),
                    error = %e
                ),
            }
        }
        content.extend_from_slice(&report.message);
        let size = content.len();
        let started = Instant::now();
        let durable = {
            let telemetry = inner.telemetry.clone();
            let from = report.from.clone();
            let to = report.recipients.clone();
            Box::new(move |queue_id| {
                telemetry.accepted(
                    &telemetry::Accepted {
                        proto: "report",
                        queue_id,
                        from: &from,
                        to: &to,
                        size,
                        client: IpAddr::from([127, 0, 0, 1]),
                        user: None,
                        checks: None,
                        dkim_signed,
                    },
                    started.elapsed(),
                );
            })
        };
        let rx = crate::enqueue::enqueue(
            queue,
            wakeup,
            &report.from,
            &report.recipients,
            delivery::now_ms(),
            content,
            durable,
        );
        match tokio::time::timeout(QUEUE_WAIT_MAX, rx).await {
            Ok(Ok(Ok(queue_id))) => Ok(queue_id),
            Ok(Ok(Err(e))) => Err(format!("queue: {e}")),
            Ok(Err(_)) => Err("the queue closed".into()),
            Err(_) => Err("the queue did not answer in time".into()),
        }
    }
}

/// The reports sent from this node's queue: every [`SEND_INTERVAL`] and on `mailstow report
/// send`.
pub struct ReportSender<R = hickory_resolver::TokioResolver> {
    pub reports: Reports<R>,
    pub queue: Arc<queue::Queue>,
    pub wakeup: Arc<delivery::Wakeup>,
}

impl<R: TxtResolver + Clone + 'static> ReportSender<R> {
    /// Sends the reports due every [`SEND_INTERVAL`], the first round now; runs until
    /// aborted.
    pub fn spawn_hourly(self: &Arc<Self>) -> tokio::task::JoinHandle<()> {
        let sender = self.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(SEND_INTERVAL);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                let sent = sender
                    .reports
                    .send_due(&sender.queue, &sender.wakeup, unix_now())
                    .await;
                if let Err(e) = sent {
                    tracing::warn!(event = "report_error", error = %e, msg = "sending reports");
                }
            }
        })
    }
}

impl<R: TxtResolver + Clone + 'static> admin::ReportSending for ReportSender<R> {
    fn send_due(&self, now: Option<i64>) -> admin::Pending {
        let (reports, queue, wakeup) = (
            self.reports.clone(),
            self.queue.clone(),
            self.wakeup.clone(),
        );
        Box::pin(async move {
            let now = now.unwrap_or_else(unix_now);
            let out = reports.send_due(&queue, &wakeup, now).await?;
            Ok(if out.is_empty() {
                "no report due\n".to_string()
            } else {
                out
            })
        })
    }
}

/// `YYYY-MM-DD` of a UTC day.
fn reports_date(day: i64) -> String {
    let dt = mail_parser::DateTime::from_timestamp(day.saturating_mul(directory::DAY_S));
    format!("{:04}-{:02}-{:02}", dt.year, dt.month, dt.day)
}

/// The writer: each row into the directory, in order, until the channel closes.
async fn write_rows<R: TxtResolver>(inner: Arc<Inner<R>>, mut rx: mpsc::Receiver<(i64, Row)>) {
    let failed_logged = Gate::default();
    while let Some((now, row)) = rx.recv().await {
        let (kind, result) = match &row {
            Row::Tls(key) => ("tlsrpt", inner.recorder.record_tls(now, key).await),
            Row::Dmarc(key) => ("dmarc", inner.recorder.record_dmarc(now, key).await),
        };
        if let Err(e) = result
            && failed_logged.open()
        {
            tracing::warn!(event = "report_error", kind, error = %e, msg = "a report counter was not recorded");
        }
    }
}

/// Which report `address` takes, when it is one of our report addresses: `tls-reports@` or
/// `dmarc-reports@` (any case) a domain `is_local` says is ours.
pub(crate) fn report_address(address: &str, is_local: impl Fn(&str) -> bool) -> Option<ReportKind> {
    let (local, domain) = address.rsplit_once('@')?;
    let (_, kind) = REPORT_LOCAL_PARTS
        .iter()
        .find(|(name, _)| local.eq_ignore_ascii_case(name))?;
    is_local(&domain.to_ascii_lowercase()).then_some(*kind)
}

/// Whether `a` and `b` are one domain or one is under the other: DMARC's relaxed alignment
/// (RFC 7489 3.1) as far as it can be told without the Public Suffix List.
fn aligned(a: &str, b: &str) -> bool {
    let a = a.trim_end_matches('.').to_ascii_lowercase();
    let b = b.trim_end_matches('.').to_ascii_lowercase();
    let under = |x: &str, y: &str| x.strip_suffix(y).is_some_and(|rest| rest.ends_with('.'));
    !a.is_empty() && (a == b || under(&a, &b) || under(&b, &a))
}

fn disposition(policy: sender_auth::DmarcPolicy) -> DmarcDisposition {
    match policy {
        sender_auth::DmarcPolicy::None => DmarcDisposition::None,
        sender_auth::DmarcPolicy::Quarantine => DmarcDisposition::Quarantine,
        sender_auth::DmarcPolicy::Reject => DmarcDisposition::Reject,
    }
}

/// The DMARC row of a checked message (RFC 7489 appendix C `RecordType`), when its DMARC
/// result is `pass` or `fail`; `refused`: the DMARC policy refused it.
///
/// The verdict gives DMARC's result, not which identifier aligned: an aligned pass is a
/// passing DKIM signature or SPF check whose domain is the From domain or one under or over
/// it, forced to agree with the verdict (a `fail` has neither; a `pass` has at least one).
/// The DKIM signature shown is the aligned pass, else the first pass, else the first.
pub(crate) fn dmarc_key(
    ip: IpAddr,
    mail_from: &str,
    verdict: &sender_auth::Verdict,
    refused: bool,
) -> Option<DmarcKey> {
    use sender_auth::{DkimResult, DmarcResult, SpfResult};
    if !matches!(verdict.dmarc, DmarcResult::Pass | DmarcResult::Fail) {
        return None;
    }
    let from = verdict
        .from_domain
        .as_deref()?
        .trim_end_matches('.')
        .to_ascii_lowercase();
    if from.is_empty() {
        return None;
    }
    let passes: Vec<&sender_auth::DkimOutcome> = verdict
        .dkim
        .iter()
        .filter(|d| d.result == DkimResult::Pass && !d.domain.is_empty())
        .collect();
    let aligned_pass = passes.iter().copied().find(|d| aligned(&d.domain, &from));
    let spf_pass = verdict.spf == SpfResult::Pass;
    let (mut dkim_aligned, mut spf_aligned) = (
        aligned_pass.is_some(),
        spf_pass && aligned(&verdict.spf_domain, &from),
    );
    match verdict.dmarc {
        DmarcResult::Fail => (dkim_aligned, spf_aligned) = (false, false),
        _ if !dkim_aligned && !spf_aligned => {
            // Aligned by the organizational domain (siblings under it): whichever passed.
            dkim_aligned = !passes.is_empty();
            spf_aligned = !dkim_aligned && spf_pass;
        }
        _ => {}
    }
    let shown = aligned_pass
        .or(passes.first().copied())
        .or(verdict.dkim.iter().find(|d| !d.domain.is_empty()));
    let selector = shown.map_or("", |d| d.selector.as_str());
    let policy = disposition(verdict.dmarc_policy);
    Some(DmarcKey {
        policy_domain: from.clone(),
        source_ip: ip,
        disposition: if refused {
            DmarcDisposition::Reject
        } else {
            DmarcDisposition::None
        },
        dkim_aligned,
        spf_aligned,
        header_from: from,
        envelope_from: mail_from
            .rsplit_once('@')
            .map(|(_, d)| d.to_ascii_lowercase())
            .unwrap_or_default(),
        dkim_domain: shown.map(|d| d.domain.clone()).unwrap_or_default(),
        // A selector longer than a DNS label is no real one.
        dkim_selector: if selector.len() <= directory::SELECTOR_BYTES_MAX {
            selector.to_owned()
        } else {
            String::new()
        },
        dkim_result: shown.map_or("none", |d| d.result.name()).to_owned(),
        spf_domain: verdict.spf_domain.clone(),
        spf_helo: mail_from.is_empty(),
        spf_result: verdict.spf.name().to_owned(),
        policy: DmarcPolicyPublished {
            p: policy,
            sp: policy,
            adkim_strict: false,
            aspf_strict: false,
            testing: false,
        },
    })
}

/// The TLS-RPT row of one session.
fn tls_key(
    policy: &transport_policy::AppliedPolicy,
    mx_host: &str,
    ip: IpAddr,
    failure: Option<&str>,
) -> TlsSessionKey {
    TlsSessionKey {
        policy_domain: policy.domain.trim_end_matches('.').to_ascii_lowercase(),
        policy_type: match policy.kind {
            transport_policy::PolicyKind::Sts => TlsPolicyType::Sts,
            transport_policy::PolicyKind::Tlsa => TlsPolicyType::Tlsa,
            transport_policy::PolicyKind::NoPolicyFound => TlsPolicyType::NoPolicyFound,
        },
        policy_strings: policy.strings.clone(),
        mx_host: mx_host.trim_end_matches('.').to_ascii_lowercase(),
        receiving_ip: (!ip.is_unspecified()).then_some(ip),
        failure: failure.map(str::to_owned),
    }
}

#[cfg(test)]
mod tests;

/// Delivery's sink for outbound sessions' TLS outcomes: [`Reports::record`].
impl delivery::TlsResults for Reports {
    fn record(
        &self,
        policy: &transport_policy::AppliedPolicy,
        mx_host: &str,
        ip: IpAddr,
        result: Option<transport_policy::ResultType>,
        detail: &str,
    ) {
        Reports::record(self, policy, mx_host, ip, result, detail);
    }
}
