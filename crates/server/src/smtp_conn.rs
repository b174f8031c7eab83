//! One SMTP, submission or LMTP connection: the `smtp::Session` under the connection driver,
//! and the session's decisions answered from the directory, the queue and the store.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use limits::Deadlines;
use smtp::{AuthResult, Event, Reply, Verdict};
use store::Mailstore as _;

use crate::driver::{Conn, Protocol, Step};
use crate::enqueue::enqueue;
use crate::login::{Login, LoginRefused, authzid_allowed, check_login};
use crate::service::Service;
use crate::shell::Shell;
use filtering::verdict_of;
use telemetry::shown;
use telemetry::{Accepted, SenderChecks};

mod filtering;

/// What the shell remembers of the open transaction.
#[derive(Default)]
struct Transaction {
    /// SIZE= of MAIL FROM, for the quota check at RCPT.
    size: u64,
    /// Per accepted RCPT, in order: the mailboxes or remote addresses it expanded to.
    targets: Vec<Vec<String>>,
    /// Tells the queue a message is on its way once a recipient is accepted, so concurrent
    /// sessions' messages share one commit (see `queue::Queue::incoming`).
    incoming: Option<queue::Incoming>,
    /// The same for a hand-over from another node: its copies share the store's next
    /// commit with other sessions' (see `cluster::HandOver::incoming`).
    handover: Option<cluster::handover::Incoming>,
    /// A report address (`tls-reports@`, `dmarc-reports@` a local domain) was accepted: the
    /// message goes to `Reports::ingest`, not to a mailbox.
    report: bool,
}

/// What SMTP, submission and LMTP connections need beside the shell: the queue their mail
/// enters, the sender checks and DKIM signers, the store's usage for quotas, and in a
/// cluster the hand-overs this node takes.
pub(crate) struct SmtpParts {
    pub(crate) queue: Arc<queue::Queue>,
    pub(crate) wakeup: Arc<delivery::Wakeup>,
    /// The store's usage, for the quota check at RCPT.
    pub(crate) store: Arc<store::Store>,
    /// SPF, DKIM and DMARC of MX mail (`None` when `sender_checks` is off).
    pub(crate) checker: Option<sender_auth::Checker>,
    /// DKIM signers made from the directory's keys, by (domain, selector).
    pub(crate) signers: Arc<crate::dkim::Signers>,
    /// Messages made durable in the queue since start.
    pub(crate) accepted: Arc<AtomicU64>,
    /// Numbers sessions (their Received ids).
    pub(crate) session_ids: AtomicU64,
    /// Hand-overs from other nodes, taken here (cluster only).
    pub(crate) handover: Option<Arc<cluster::HandOver>>,
    /// Takes back the reverse paths of mail users' rules redirected.
    pub(crate) srs: Arc<sender_auth::Srs>,
    /// Users' rules, for refusing before the 250 what they would reject.
    pub(crate) rules: Option<Arc<mailboxes::Rules>>,
    /// The spam filter and the milters (docs/spam.md).
    pub(crate) filter: Arc<filter::Filter>,
    /// TLS-RPT and DMARC reports: DMARC verdicts counted, reports taken in.
    pub(crate) reports: Option<crate::Reports>,
}

/// An SMTP-family session and its shell.
pub(crate) struct Smtp {
    parts: Arc<SmtpParts>,
    session: smtp::Session,
    service: Service,
    ip: IpAddr,
    port: u16,
    session_id: u64,
    authenticated: Option<String>,
    transaction: Transaction,
    /// RCPTs refused as unknown in this session (the tarpit counts them).
    unknown_recipients: usize,
    /// An LMTP client at another cluster node's address: its transactions are hand-overs,
    /// stored by the committer, never queued.
    from_node: bool,
    /// The session's milters, opened at connect (none on LMTP).
    milters: Option<filter::Milters>,
    /// A milter discarded the open transaction: accepted, and dropped.
    discarded: Option<String>,
}

impl Smtp {
    /// Runs the session until it needs input, answering its decisions.
    async fn answer(&mut self, conn: &mut Conn) -> Step {
        while let Some(event) = self.session.poll() {
            match event {
                Event::Reply(bytes) => conn.out.extend_from_slice(&bytes),
                Event::StartTls => {
                    if conn.start_tls().await.is_err() {
                        return Step::Close;
                    }
                    self.session.tls_started();
                    self.transaction = Transaction::default();
                }
                Event::Auth {
                    mechanism,
                    username,
                    password,
                    authzid,
                } => {
                    // The client waits for this answer anyway; send what is pending first.
                    if conn.flush().await.is_err() {
                        return Step::Close;
                    }
                    let attempt = Login {
                        proto: self.service.name(),
                        mechanism,
                        username: &username,
                        ip: self.ip,
                    };
                    let result = if !authzid_allowed(&authzid, &username) {
                        attempt.failed(&conn.shell);
                        AuthResult::Failed
                    } else {
                        self.authenticate(conn, &attempt, &password).await
                    };
                    self.session.auth_result(result);
                }
                Event::Connect => {
                    let verdict = self.connected(&conn.shell).await;
                    self.session.connect_result(verdict);
                }
                Event::Hello { name } => {
                    let verdict = match &mut self.milters {
                        Some(milters) => verdict_of(milters.helo(&name).await, &mut self.discarded),
                        None => Verdict::Accept,
                    };
                    self.session.hello_result(verdict);
                }
                Event::MailFrom { from, size, .. } => {
                    self.transaction = Transaction {
                        size: size.unwrap_or(0),
                        ..Transaction::default()
                    };
                    self.discarded = None;
                    // RFC 1870 6.1: the declared SIZE counts against the free space too.
                    let mut verdict = match conn.shell.storage_full(size.unwrap_or(0)) {
                        Some(_) => Verdict::Reject(Reply::insufficient_storage()),
                        None => self.sender(&conn.shell, &from),
                    };
                    if verdict == Verdict::Accept
                        && let Some(milters) = &mut self.milters
                    {
                        milters.abort().await;
                        let user = self.authenticated.clone().unwrap_or_default();
                        let macros = [
                            ("{mail_addr}", from.as_str()),
                            ("{auth_authen}", user.as_str()),
                        ];
                        verdict =
                            verdict_of(milters.mail(&from, &macros).await, &mut self.discarded);
                    }
                    self.session.mail_result(verdict);
                }
                Event::RcptTo { to, .. } => {
                    // Pipelined replies go out together (RFC 2920 3.2: the driver flushes
                    // before it waits for input); only a tarpit's pause sends them first.
                    if self.tarpitted(&conn.shell) && conn.flush().await.is_err() {
                        return Step::Close;
                    }
                    // The disk may have filled since MAIL: refused here too, still before DATA.
                    let mut verdict = match conn.shell.storage_full(self.transaction.size) {
                        Some(_) => Verdict::Reject(Reply::insufficient_storage()),
                        None => self.recipient(&conn.shell, &to).await,
                    };
                    if verdict == Verdict::Accept
                        && let Some(milters) = &mut self.milters
                    {
                        let macros = [("{rcpt_addr}", to.as_str())];
                        verdict = verdict_of(milters.rcpt(&to, &macros).await, &mut self.discarded);
                        if verdict != Verdict::Accept {
                            // The filter refused this recipient: it is not in the transaction.
                            self.transaction.targets.pop();
                        }
                    }
                    self.session.rcpt_result(verdict);
                }
                Event::Message { envelope, content } => {
                    // The replies so far go out before checks that may take seconds (DNS);
                    // a hand-over's commit takes milliseconds and its sender reads every
                    // reply at once, so they wait for the last one: one write, not three.
                    if !self.from_node && conn.flush().await.is_err() {
                        return Step::Close;
                    }
                    let verdicts = self.accept_message(&conn.shell, &envelope, content).await;
                    self.session.message_result(verdicts);
                }
                Event::Close => {
                    if let Some(milters) = self.milters.take() {
                        milters.quit().await;
                    }
                    return Step::Close;
                }
            }
        }
        if self.session.wants_input() {
            Step::Read
        } else {
            // Nothing to read and nothing to answer: the session is stuck, which it never
            // should be; end the connection instead of spinning.
            tracing::warn!(
                event = "session_stuck",
                proto = self.service.name(),
                client = %self.ip
            );
            Step::Close
        }
    }

    pub(crate) fn new(
        shell: &Shell,
        parts: Arc<SmtpParts>,
        service: Service,
        peer: SocketAddr,
        tls: bool,
    ) -> Smtp {
        let live = shell.live();
        let config = match service {
            Service::Lmtp => live.lmtp.clone(),
            Service::Submission | Service::Submissions => live.submission.clone(),
            _ => live.smtp.clone(),
        };
        let session_id = parts.session_ids.fetch_add(1, Ordering::Relaxed);
        // docs/spam.md 4: with milters (or a blocklist that refuses clients) the shell
        // decides on the connection and the greeting too.
        let filter = parts.filter.config();
        let milters = match service {
            Service::Smtp => !filter.milters.is_empty(),
            Service::Submission | Service::Submissions => {
                filter.milters.iter().any(|m| m.submission)
            }
            _ => false,
        };
        let refusing_zones = service == Service::Smtp && filter.dnsbl.iter().any(|z| z.reject);
        let config = if milters || refusing_zones {
            let mut deciding = (*config).clone();
            deciding.decide_connect = true;
            deciding.decide_hello = milters;
            Arc::new(deciding)
        } else {
            config
        };
        Smtp {
            parts,
            session: smtp::Session::new(config, smtp::Peer { ip: peer.ip(), tls }),
            service,
            ip: peer.ip(),
            port: peer.port(),
            session_id,
            authenticated: None,
            transaction: Transaction::default(),
            unknown_recipients: 0,
            milters: None,
            discarded: None,
            from_node: service == Service::Lmtp
                && shell
                    .cluster
                    .as_ref()
                    .is_some_and(|c| c.is_node_address(&shell.directory, peer.ip())),
        }
    }
}

impl Protocol for Smtp {
    async fn step(&mut self, conn: &mut Conn) -> Step {
        let step = self.answer(conn).await;
        // One `rejected` line per failure reply, whichever step produced it.
        for refusal in self.session.take_refusals() {
            conn.shell
                .telemetry
                .rejected(self.service.name(), &refusal, self.ip);
        }
        step
    }

    fn feed(&mut self, bytes: &[u8]) {
        self.session.feed(bytes);
    }

    fn timeout(&self) -> Duration {
        self.session.timeout()
    }

    fn deadlines(&self) -> Deadlines {
        self.session.deadlines()
    }

    fn timed_out(&mut self) {
        self.session.timed_out();
    }

    fn deadline_passed(&mut self) {
        tracing::debug!(
            event = "deadline",
            proto = self.service.name(),
            client = %self.ip
        );
        self.session.deadline_passed();
    }

    fn shutting_down(&mut self) {
        self.session.shutting_down();
    }

    /// A submission session's user is gone either way: its mail is not sent.
    fn revoked(&mut self, _why: mailboxes::Ending) {
        self.session.revoked();
    }
}

impl Smtp {
    async fn authenticate(
        &mut self,
        conn: &mut Conn,
        attempt: &Login<'_>,
        password: &str,
    ) -> AuthResult {
        let shell = conn.shell.clone();
        match check_login(&shell, attempt, password).await {
            Ok(user) => match shell.sessions.enter(&user, mailboxes::Protocol::Submission) {
                Ok(member) => {
                    attempt.ok(&shell, &user);
                    conn.member = Some(member);
                    self.authenticated = Some(user.clone());
                    AuthResult::Success { user }
                }
                Err(_) => {
                    attempt.refused(&shell, &user);
                    AuthResult::TemporaryFailure
                }
            },
            Err(LoginRefused::BadCredentials) => AuthResult::Failed,
            Err(LoginRefused::Throttled | LoginRefused::Unavailable) => {
                AuthResult::TemporaryFailure
            }
        }
    }

    /// MAIL policy. On submission the sender must be the authenticated user, or an address
    /// that delivers to that user (an alias of theirs): a logged-in account must not send as
    /// somebody else (Postfix's `reject_sender_login_mismatch`). The null sender is allowed
    /// (RFC 5321 4.5.5: notifications). MX and LMTP senders are checked after the data
    /// (SPF, DKIM and DMARC need the message).
    fn sender(&self, shell: &Shell, from: &str) -> Verdict {
        if !matches!(self.service, Service::Submission | Service::Submissions) || from.is_empty() {
            return Verdict::Accept;
        }
        let Some(user) = &self.authenticated else {
            // The session refuses MAIL before AUTH on submission; never reached.
            return Verdict::Accept;
        };
        if from.eq_ignore_ascii_case(user) {
            return Verdict::Accept;
        }
        match shell.directory.cache().resolve(from) {
            directory::Resolution::Local(targets)
                if targets.iter().any(
                    |t| matches!(t, directory::Target::User(u) if u.eq_ignore_ascii_case(user)),
                ) =>
            {
                Verdict::Accept
            }
            _ => Verdict::Reject(Reply::new(
                553,
                (5, 7, 1),
                "sender address is not owned by the authenticated user",
            )),
        }
    }

    /// RCPT policy: local users (after aliases) are accepted within quota; other domains only
    /// from authenticated clients (no open relay); LMTP takes local recipients only. A client
    /// that keeps naming unknown recipients is slowed down, then disconnected (the tarpit).
    async fn recipient(&mut self, shell: &Shell, to: &str) -> Verdict {
        let tarpit = self.service != Service::Lmtp;
        let live = shell.live();
        let unknown_max = live.config.recipients_unknown_max;
        if self.tarpitted(shell) {
            if self.unknown_recipients >= unknown_max.saturating_mul(2) {
                // RFC 5321 3.8: 421 closes the session.
                return Verdict::Reject(Reply::new(
                    421,
                    (4, 7, 0),
                    format!(
                        "{} too many unknown recipients, closing",
                        shell.config.hostname
                    ),
                ));
            }
            tokio::time::sleep(live.config.tarpit_delay).await;
        }
        let cache = shell.directory.cache();
        // Reports others send about our domains go to the report store, whoever the
        // address would reach otherwise (crate::reporting).
        if !self.from_node
            && self.parts.reports.is_some()
            && crate::reporting::report_address(to, |d| cache.is_local_domain(d)).is_some()
        {
            self.transaction.targets.push(Vec::new());
            self.transaction.report = true;
            return Verdict::Accept;
        }
        // A bounce (or reply) to the rewritten reverse path of mail a user's rules
        // redirected goes back to the original sender (SRS), before aliases, subaddresses
        // or a catch-all could take it.
        let srs = if self.service == Service::Smtp
            && to
                .rsplit_once('@')
                .is_some_and(|(_, domain)| cache.is_local_domain(domain))
        {
            self.parts
                .srs
                .reverse(to, delivery::now_ms() / 86_400_000)
                .ok()
        } else {
            None
        };
        let resolution = match srs {
            Some(original) => {
                directory::Resolution::Local(vec![directory::Target::Remote(original)])
            }
            None => cache.resolve(to),
        };
        let targets = match resolution {
            directory::Resolution::UnknownUser => {
                self.unknown_recipients += 1;
                if tarpit && self.unknown_recipients == unknown_max {
                    tracing::info!(
                        event = "tarpit",
                        proto = self.service.name(),
                        client = %self.ip,
                        unknown_recipients = unknown_max,
                        delay_ms = live.config.tarpit_delay.as_millis() as u64
                    );
                }
                return Verdict::Reject(Reply::new(
                    550,
                    (5, 1, 1),
                    "mailbox unavailable: no such user",
                ));
            }
            directory::Resolution::NotLocal => {
                if self.service == Service::Lmtp || self.authenticated.is_none() {
                    // RFC 5321 3.6.2, RFC 7372 (5.7.1: relaying denied)
                    return Verdict::Reject(Reply::new(554, (5, 7, 1), "relay access denied"));
                }
                vec![to.to_string()]
            }
            directory::Resolution::Local(targets) => {
                let mut addresses = Vec::with_capacity(targets.len());
                for target in targets {
                    match target {
                        directory::Target::User(user) => {
                            if let Some(reject) = self.over_quota(shell, &user) {
                                return Verdict::Reject(reject);
                            }
                            addresses.push(user);
                        }
                        directory::Target::Remote(address) => addresses.push(address),
                    }
                }
                addresses
            }
        };
        self.transaction.targets.push(targets);
        if self.from_node {
            if self.transaction.handover.is_none() {
                self.transaction.handover = self.parts.handover.as_ref().map(|h| h.incoming());
            }
        } else if self.transaction.incoming.is_none() {
            self.transaction.incoming = Some(self.parts.queue.incoming());
        }
        Verdict::Accept
    }

    /// Whether the next RCPT waits out the tarpit's delay first (SMTP and submission only).
    fn tarpitted(&self, shell: &Shell) -> bool {
        self.service != Service::Lmtp
            && self.unknown_recipients >= shell.live().config.recipients_unknown_max
    }

    /// What the SPF/DKIM/DMARC verdict means for an MX message: refused when its DMARC
    /// policy says reject (RFC 7489 6.6.2), or when it names one of our domains in MAIL FROM
    /// or From: without SPF or DKIM vouching for that domain (only our users may send as
    /// our domains, and they submit with AUTH). A DNS failure makes the second refusal
    /// temporary.
    fn sender_policy(
        &self,
        shell: &Shell,
        envelope: &smtp::Envelope,
        verdict: &sender_auth::Verdict,
    ) -> Option<Reply> {
        let live = shell.live();
        let config = &live.config;
        if config.dmarc_enforce && verdict.dmarc_rejects() {
            let domain = verdict
                .from_domain
                .as_deref()
                .unwrap_or("the sender's domain");
            return Some(Reply::new(
                550,
                (5, 7, 1),
                format!("rejected by the DMARC policy of {}", shown(domain)),
            ));
        }
        if !config.local_sender_check {
            return None;
        }
        let cache = shell.directory.cache();
        let mail_from_domain = envelope
            .from
            .rsplit_once('@')
            .map(|(_, domain)| domain.to_ascii_lowercase());
        let ours = [mail_from_domain, verdict.from_domain.clone()]
            .into_iter()
            .flatten()
            .find(|domain| cache.is_local_domain(domain) && !verdict.authenticated_for(domain))?;
        let unsure = verdict.spf == sender_auth::SpfResult::TempError
            || verdict
                .dkim
                .iter()
                .any(|d| d.result == sender_auth::DkimResult::TempError);
        Some(if unsure {
            Reply::new(
                451,
                (4, 7, 0),
                format!(
                    "cannot verify a sender in {} now, try again later",
                    shown(&ours)
                ),
            )
        } else {
            Reply::new(
                550,
                (5, 7, 1),
                format!(
                    "{} is a local domain: log in to send as it (SPF and DKIM do not pass)",
                    shown(&ours)
                ),
            )
        })
    }

    /// RFC 3463 4.2.2 (mailbox full, temporary) and 5.2.2 (the message alone exceeds it).
    fn over_quota(&self, shell: &Shell, user: &str) -> Option<Reply> {
        let quota = crate::quota::of(&shell.directory, user);
        if !quota.is_limited() {
            return None;
        }
        // A message of unknown size (no SIZE=) counts as one byte: a user at the limit is
        // full whatever comes.
        let added = store::Usage {
            folders: 0,
            messages: 1,
            bytes: self.transaction.size.max(1),
        };
        // Usage comes from the store's index (no I/O).
        match quota.admits(self.parts.store.usage(user), added) {
            Ok(()) => None,
            // RFC 3463 3.3: X.2.2 mailbox full; permanent when it could never fit.
            Err(store::OverQuota::TooLarge) => Some(Reply::new(
                552,
                (5, 2, 2),
                "message exceeds the mailbox quota",
            )),
            Err(store::OverQuota::Full) => Some(Reply::new(452, (4, 2, 2), "mailbox full")),
        }
    }

    /// Adds the Received header and makes the message durable in the queue; only the queue's
    /// commit callback produces the `250` (guarantee 1).
    async fn accept_message(
        &mut self,
        shell: &Arc<Shell>,
        envelope: &smtp::Envelope,
        content: Vec<u8>,
    ) -> Vec<Verdict> {
        if self.service == Service::Lmtp
            && let Some(origin) = &envelope.origin
            && shell.cluster.is_some()
        {
            return self
                .accept_handed_over(shell, envelope, origin, content)
                .await;
        }
        let accepted = envelope.recipients.len();
        // LMTP (RFC 2033 4.2): one reply per accepted recipient; all share the commit.
        let replies = if self.service == Service::Lmtp {
            accepted.max(1)
        } else {
            1
        };
        let targets = std::mem::take(&mut self.transaction.targets);
        let mut recipients: Vec<String> = targets.iter().flatten().cloned().collect();
        recipients.sort();
        recipients.dedup();
        let now = delivery::now_ms();
        let id = format!("{:x}.{:x}", now, self.session_id);
        let mut message = content;
        // Header fields to put in front, newest first (RFC 5321 4.4: trace fields at the top).
        let mut prepend = smtp::received_header(
            envelope,
            &shell.config.hostname,
            &id,
            &delivery::bounce::rfc5322_date(now),
        );
        let data_end = std::time::Instant::now();
        let mut checks = None;
        let mut dkim_signed = None;
        let mut check_verdict = None;
        if self.service == Service::Smtp
            && let Some(checker) = &self.parts.checker
        {
            // RFC 8601 5: a field claiming to be ours was not written by us.
            if let std::borrow::Cow::Owned(stripped) =
                sender_auth::strip_our_authentication_results(&message, &shell.config.hostname)
            {
                message = stripped;
            }
            let verdict = checker
                .check(&sender_auth::CheckInput {
                    ip: self.ip,
                    helo: &envelope.helo,
                    mail_from: &envelope.from,
                    message: &message,
                })
                .await;
            let dkim: Vec<&str> = verdict.dkim.iter().map(|d| d.result.name()).collect();
            checks = Some(SenderChecks {
                spf: verdict.spf.name(),
                dkim: if dkim.is_empty() {
                    "none".to_string()
                } else {
                    dkim.join(",")
                },
                dmarc: verdict.dmarc.name(),
            });
            let refusal = self.sender_policy(shell, envelope, &verdict);
            // crate::reporting: one DMARC row per message, unless another check refused it.
            let dmarc_refused = shell.live().config.dmarc_enforce && verdict.dmarc_rejects();
            if let Some(reports) = &self.parts.reports
                && (refusal.is_none() || dmarc_refused)
                && let Some(key) =
                    crate::reporting::dmarc_key(self.ip, &envelope.from, &verdict, dmarc_refused)
            {
                reports.record_dmarc(key);
            }
            if let Some(refusal) = refusal {
                // The refusal itself is logged as `rejected` (stage data) with the
                // reply; this line adds what the checks found.
                if let Some(c) = &checks {
                    tracing::info!(
                        event = "sender_checks",
                        proto = self.service.name(),
                        from = %format!("<{}>", shown(&envelope.from)),
                        client = %self.ip,
                        helo = %shown(&envelope.helo),
                        spf = c.spf,
                        dkim = %c.dkim,
                        dmarc = c.dmarc,
                        result = "refused"
                    );
                }
                self.transaction.incoming = None;
                return vec![Verdict::Reject(refusal); replies];
            }
            // Above our Received: the result of this hop's checks.
            prepend = format!("{}{prepend}", verdict.header);
            check_verdict = Some(verdict);
        }
        if std::mem::take(&mut self.transaction.report)
            && let Some(reports) = &self.parts.reports
        {
            // Taken before the reply; the trace fields we add are not part of the report.
            if let Err(e) = reports.ingest(&message, self.ip).await {
                tracing::warn!(event = "report_error", error = %e, msg = "storing a received report");
                self.transaction.incoming = None;
                return vec![
                    Verdict::Reject(Reply::new(451, (4, 3, 0), "try again later"));
                    replies
                ];
            }
            if recipients.is_empty() {
                self.transaction.incoming = None;
                return vec![Verdict::Accept; replies];
            }
        }
        let filtered = matches!(
            self.service,
            Service::Smtp | Service::Submission | Service::Submissions
        );
        if filtered {
            // docs/spam.md 2: a sender cannot claim a verdict; only ours counts.
            if let std::borrow::Cow::Owned(stripped) = spam::strip_status_fields(&message) {
                message = stripped;
            }
        }
        // The fields go in front of the content in place: the content's buffer usually has
        // the room, so the message is not held twice.
        let size = message.len();
        message.splice(0..0, prepend.bytes());
        // docs/spam.md 4: the milters see the message as it will be queued, trace fields
        // included, and their changes apply before anything else looks at it.
        let mut quarantine = None;
        if let Some(milters) = &mut self.milters {
            let (step, ending) = milters.message(&message).await;
            match verdict_of(step, &mut self.discarded) {
                Verdict::Accept => {}
                refusal => {
                    self.transaction.incoming = None;
                    return vec![refusal; replies];
                }
            }
            if !ending.modifications.is_empty() {
                message = milter::apply(&message, &ending.modifications);
                recipients = self.recipients_changed(
                    shell,
                    envelope,
                    &targets,
                    recipients,
                    &ending.modifications,
                );
            }
            quarantine = ending.quarantine;
        }
        if let Some(filter) = &self.discarded {
            // Accepted and dropped, as the filter asked: logged, never queued.
            let filter = filter.clone();
            for user in &recipients {
                shell.telemetry.spam(&telemetry::SpamVerdict {
                    proto: self.service.name(),
                    session: &id,
                    user,
                    from: &envelope.from,
                    client: self.ip,
                    score: 0.0,
                    action: "discard",
                    reasons: &format!("MILTER_{filter}"),
                });
            }
            self.transaction.incoming = None;
            return vec![Verdict::Accept; replies];
        }
        if matches!(self.service, Service::Submission | Service::Submissions) {
            // RFC 6376: sign with the key of the From: domain, when we hold one.
            if let Some(domain) = sender_auth::from_domain(&message)
                && let Some(signer) = self.parts.signers.for_domain(&shell.directory, &domain)
            {
                match signer.sign(&message) {
                    Ok(signature) => {
                        message.splice(0..0, signature.bytes());
                        dkim_signed = Some(format!("{}:{}", signer.domain(), signer.selector()));
                    }
                    Err(e) => tracing::warn!(
                        event = "dkim_error",
                        domain = %shown(&domain),
                        error = %e
                    ),
                }
            }
            if let Some(user) = self.authenticated.clone()
                && self.parts.filter.enabled()
            {
                match self.parts.filter.judge_submission(&user, &message).await {
                    filter::Outbound::Accept => {}
                    filter::Outbound::Refuse(score) => {
                        self.transaction.incoming = None;
                        return vec![
                            Verdict::Reject(Reply::new(
                                550,
                                (5, 7, 1),
                                format!("message refused as spam (score {:.1})", score.points),
                            ));
                            replies
                        ];
                    }
                    filter::Outbound::Limited { retry_after } => {
                        self.transaction.incoming = None;
                        return vec![
                            Verdict::Reject(Reply::new(
                                451,
                                (4, 7, 1),
                                format!(
                                    "sending limit of this account reached (spam suspected), try again in {} minutes",
                                    retry_after.as_secs().div_ceil(60).max(1)
                                ),
                            ));
                            replies
                        ];
                    }
                }
            }
        }
        // docs/spam.md 2: each recipient user's verdict; copies with different verdicts are
        // queued apart, each with its own fields.
        let mut copies: Vec<(Vec<u8>, Vec<String>)> = Vec::new();
        let mut user_copy: std::collections::HashMap<String, usize> = Default::default();
        if self.service == Service::Smtp && (self.parts.filter.enabled() || quarantine.is_some()) {
            match self
                .spam_verdicts(
                    shell,
                    envelope,
                    &recipients,
                    &message,
                    check_verdict.as_ref(),
                    quarantine.as_deref(),
                    &id,
                )
                .await
            {
                Ok(groups) => {
                    // docs/spam.md 2: the fields go under our trace fields (our
                    // Authentication-Results and Received stay on top), at the top when a
                    // milter changed those.
                    let after_trace = if message.starts_with(prepend.as_bytes()) {
                        prepend.len()
                    } else {
                        0
                    };
                    for (fields, members) in groups {
                        let mut copy = Vec::with_capacity(fields.len() + message.len());
                        copy.extend_from_slice(&message[..after_trace]);
                        copy.extend_from_slice(fields.as_bytes());
                        copy.extend_from_slice(&message[after_trace..]);
                        for m in &members {
                            user_copy.insert(m.clone(), copies.len());
                        }
                        copies.push((copy, members));
                    }
                }
                Err(refusal) => {
                    self.transaction.incoming = None;
                    return vec![Verdict::Reject(refusal); replies];
                }
            }
        } else {
            copies.push((message, recipients.clone()));
        }
        // RFC 5429 2.1: a recipient whose rules reject the message is refused here, before
        // the 250, when the protocol can say so: LMTP per recipient, SMTP when every
        // recipient rejects. Otherwise the rules run again at delivery and the sender gets
        // a DSN.
        let refused = self.refused_by_rules(shell, envelope, &targets, &copies, &user_copy, &id);
        if refused.iter().any(Option::is_some) {
            let all = refused.iter().all(Option::is_some);
            if all || self.service == Service::Lmtp {
                let kept: std::collections::HashSet<&String> = targets
                    .iter()
                    .zip(&refused)
                    .filter(|(_, r)| r.is_none())
                    .flat_map(|(t, _)| t.iter())
                    .collect();
                for (_, members) in &mut copies {
                    members.retain(|m| kept.contains(m));
                }
                copies.retain(|(_, members)| !members.is_empty());
            }
            if all {
                self.transaction.incoming = None;
                return match self.service {
                    Service::Lmtp => refused
                        .iter()
                        .map(|r| Verdict::Reject(sieve_refusal(r.as_deref().unwrap_or(""))))
                        .collect(),
                    _ => vec![Verdict::Reject(sieve_refusal(
                        refused[0].as_deref().unwrap_or(""),
                    ))],
                };
            }
        }
        let mut waits = Vec::with_capacity(copies.len());
        for (copy, members) in copies {
            let telemetry = shell.telemetry.clone();
            let accepted = self.parts.accepted.clone();
            let proto = self.service.name();
            let from = envelope.from.clone();
            let to = members.clone();
            let client = self.ip;
            let user = self.authenticated.clone();
            let checks = checks.clone();
            let dkim_signed = dkim_signed.clone();
            let durable = Box::new(move |queue_id| {
                accepted.fetch_add(1, Ordering::Relaxed);
                telemetry.accepted(
                    &Accepted {
                        proto,
                        queue_id,
                        from: &from,
                        to: &to,
                        size,
                        client,
                        user: user.as_deref(),
                        checks,
                        dkim_signed,
                    },
                    data_end.elapsed(),
                );
            });
            waits.push(enqueue(
                &self.parts.queue,
                &self.parts.wakeup,
                &envelope.from,
                &members,
                now,
                copy,
                durable,
            ));
        }
        // Submitted: the writer need not wait for this session any more.
        self.transaction.incoming = None;
        let mut verdict = Verdict::Accept;
        for rx in waits {
            let this = match rx.await {
                Ok(Ok(_)) => Verdict::Accept,
                // RFC 3463 X.3.1: the disk filled between RCPT and the end of the data.
                Ok(Err(e)) if e.is_out_of_space() => {
                    tracing::warn!(event = "queue_full", error = %e);
                    Verdict::Reject(Reply::insufficient_storage())
                }
                Ok(Err(e)) => {
                    tracing::error!(event = "queue_error", error = %e);
                    Verdict::Reject(Reply::new(451, (4, 3, 0), "queue error, try again later"))
                }
                Err(_) => {
                    Verdict::Reject(Reply::new(451, (4, 3, 0), "queue closed, try again later"))
                }
            };
            if verdict == Verdict::Accept {
                verdict = this;
            }
        }
        if verdict == Verdict::Accept
            && matches!(self.service, Service::Submission | Service::Submissions)
            && let Some(user) = &self.authenticated
        {
            // docs/spam.md 3: replies from people our users write to are welcome.
            let cache = shell.directory.cache();
            let remote: Vec<String> = recipients
                .iter()
                .filter(|r| !cache.is_user(r))
                .cloned()
                .collect();
            self.parts.filter.sent(user, &remote);
        }
        if self.service == Service::Lmtp && refused.len() == replies {
            // RFC 2033 4.2: one reply per recipient, in order.
            return refused
                .iter()
                .map(|r| match r {
                    Some(reason) => Verdict::Reject(sieve_refusal(reason)),
                    None => verdict.clone(),
                })
                .collect();
        }
        vec![verdict; replies]
    }

    /// Per RCPT: the reason its rules reject this message, when every one of its targets is
    /// a local user whose active script rejects it (no action taken: a dry run). Only for
    /// mail arriving from outside (SMTP, LMTP), not for submission.
    fn refused_by_rules(
        &self,
        shell: &Shell,
        envelope: &smtp::Envelope,
        targets: &[Vec<String>],
        copies: &[(Vec<u8>, Vec<String>)],
        user_copy: &std::collections::HashMap<String, usize>,
        session: &str,
    ) -> Vec<Option<String>> {
        let Some(rules) = &self.parts.rules else {
            return vec![None; targets.len()];
        };
        if !matches!(self.service, Service::Smtp | Service::Lmtp) {
            return vec![None; targets.len()];
        }
        let cache = shell.directory.cache();
        targets
            .iter()
            .map(|users| {
                let mut reason = None;
                for user in users {
                    if !cache.is_user(user) {
                        return None;
                    }
                    let rules_envelope = mailboxes::rules::Envelope {
                        sender: envelope.from.clone(),
                        recipient: user.clone(),
                    };
                    // The copy this user gets (its own spam fields), for spamtest.
                    let message = &copies
                        .get(user_copy.get(user).copied().unwrap_or(0))
                        .map_or(&[][..], |(m, _)| m.as_slice());
                    reason = Some(rules.would_reject(session, user, &rules_envelope, message)?);
                }
                reason
            })
            .collect()
    }

    /// A message another node of the cluster handed over (LMTP with `XORIGIN`): straight
    /// into the store, one reply per recipient (the seed's version 2: no second queue on
    /// the way). A recipient is refused (4xx, the origin retries) unless this node owns it
    /// at the epoch the origin routed with; a copy this node already stored for the same
    /// origin message is acknowledged without storing it again (`cluster::handover`).
    async fn accept_handed_over(
        &mut self,
        shell: &Arc<Shell>,
        envelope: &smtp::Envelope,
        origin: &str,
        content: Vec<u8>,
    ) -> Vec<Verdict> {
        self.transaction.incoming = None;
        self.transaction.targets.clear();
        let Some(handover) = &self.parts.handover else {
            return vec![
                Verdict::Reject(Reply::new(451, (4, 3, 0), "not a cluster node"));
                envelope.recipients.len()
            ];
        };
        let now = delivery::now_ms();
        let id = format!("{:x}.{:x}", now, self.session_id);
        let received = smtp::received_header(
            envelope,
            &shell.config.hostname,
            &id,
            &delivery::bounce::rfc5322_date(now),
        );
        let mut verdicts: Vec<Option<Verdict>> = vec![None; envelope.recipients.len()];
        let mut appends = Vec::new();
        let mut slots = Vec::new();
        for (i, recipient) in envelope.recipients.iter().enumerate() {
            let user = recipient.to_ascii_lowercase();
            let routed = envelope.epochs.get(i).copied().flatten();
            if let Err(epoch) = handover.owns(origin, &user, routed) {
                verdicts[i] = Some(Verdict::Reject(Reply::new(
                    451,
                    (4, 4, 0),
                    format!(
                        "stale route: the mailbox is not on this node at that epoch (ours {epoch})"
                    ),
                )));
                continue;
            }
            if handover.already_stored(origin, &user) {
                verdicts[i] = Some(Verdict::Accept);
                continue;
            }
            // The accepting node could not check the quota (the usage is here).
            self.transaction.size = content.len() as u64;
            if let Some(refusal) = self.over_quota(shell, &user) {
                verdicts[i] = Some(Verdict::Reject(refusal));
                continue;
            }
            let trace = delivery::final_delivery_fields(&envelope.from, &user);
            let mut message = Vec::with_capacity(received.len() + trace.len() + content.len());
            message.extend_from_slice(trace.as_bytes());
            message.extend_from_slice(received.as_bytes());
            message.extend_from_slice(&content);
            slots.push((i, user.clone()));
            appends.push((
                store::AppendRequest {
                    user,
                    folder: "INBOX".to_string(),
                    message: store::NewMessage {
                        internal_date: (now / 1000) as i64,
                        content: message,
                        ..store::NewMessage::default()
                    },
                },
                Some(mailboxes::rules::Envelope {
                    sender: envelope.from.clone(),
                    recipient: recipient.clone(),
                }),
            ));
        }
        if !appends.is_empty() {
            // One store commit with every other session's copies, then the record, then
            // these replies (`cluster::handover`).
            let announced = self.transaction.handover.take();
            let results = handover.store(origin, appends, announced).await;
            for (n, (i, user)) in slots.into_iter().enumerate() {
                verdicts[i] = Some(match results.get(n) {
                    Some(mailboxes::Deposited::Held) => Verdict::Reject(Reply::new(
                        451,
                        (4, 2, 0),
                        "mailbox is being moved, try again shortly",
                    )),
                    // Logged (`delivered`) and counted by the deposit.
                    Some(mailboxes::Deposited::Stored(_) | mailboxes::Deposited::Disposed) => {
                        Verdict::Accept
                    }
                    // RFC 5429 2.1: LMTP refuses the recipient; the origin bounces.
                    Some(mailboxes::Deposited::Rejected(reason)) => {
                        Verdict::Reject(sieve_refusal(reason))
                    }
                    // RFC 3463 X.3.1: no room on this node; the origin tries again.
                    Some(mailboxes::Deposited::Failed(e)) if e.is_out_of_space() => {
                        tracing::warn!(event = "store_full", to = %shown(&user), error = %e);
                        Verdict::Reject(Reply::insufficient_storage())
                    }
                    Some(mailboxes::Deposited::Failed(e)) => {
                        tracing::warn!(event = "store_error", to = %shown(&user), error = %e);
                        Verdict::Reject(Reply::new(451, (4, 3, 0), "store error, try again later"))
                    }
                    None => {
                        Verdict::Reject(Reply::new(451, (4, 3, 0), "store error, try again later"))
                    }
                });
            }
        }
        // Nothing to store (refused or duplicate): no commit should wait for it.
        self.transaction.handover = None;
        verdicts
            .into_iter()
            .map(|v| {
                v.unwrap_or_else(|| Verdict::Reject(Reply::new(451, (4, 3, 0), "try again later")))
            })
            .collect()
    }
}

/// RFC 5429 2.1: the refusal of a recipient whose rules reject the message.
fn sieve_refusal(reason: &str) -> Reply {
    Reply::new(550, (5, 7, 1), mailboxes::rules::refusal_text(reason))
}
