//! One SMTP, submission or LMTP connection: socket ↔ `smtp::Session`, and the session's
//! decisions answered from the directory, the queue and the store.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use smtp::{AuthResult, Event, Reply, Verdict};
use tokio::io::AsyncWriteExt as _;

use crate::conn::{
    Input, LoginRefused, Stream, TLS_HANDSHAKE_TIMEOUT, check_login, flush, next_input,
};
use crate::{Ctx, Service, delivery};

/// Bytes read from the socket at a time.
const READ_CHUNK: usize = 64 << 10;
/// A client that does not take our replies within this long is gone (RFC 5321 4.5.3.2 gives
/// the client's timeouts; ours for writing mirror the command timeout).
const WRITE_TIMEOUT: Duration = Duration::from_secs(300);

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
}

pub(crate) async fn run(
    ctx: Arc<Ctx>,
    service: Service,
    stream: Stream,
    peer: SocketAddr,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
) {
    let mut stream = stream;
    let config = match service {
        Service::Lmtp => ctx.lmtp.clone(),
        Service::Submission | Service::Submissions => ctx.submission.clone(),
        _ => ctx.smtp.clone(),
    };
    let session_id = ctx.sessions.fetch_add(1, Ordering::Relaxed);
    let mut session = smtp::Session::new(
        config,
        smtp::Peer {
            ip: peer.ip(),
            tls: stream.is_tls(),
        },
    );
    let mut shell = Shell {
        ctx: &ctx,
        ip: peer.ip(),
        session_id,
        lmtp: service == Service::Lmtp,
        authenticated: None,
        transaction: Transaction::default(),
    };
    let mut out: Vec<u8> = Vec::new();
    let mut buf = vec![0u8; READ_CHUNK];
    // RFC 5321 3.8: a server that must shut down may close with 421.
    let goodbye = format!("421 4.3.2 {} shutting down\r\n", ctx.config.hostname);
    loop {
        while let Some(event) = session.poll() {
            match event {
                Event::Reply(bytes) => out.extend_from_slice(&bytes),
                Event::StartTls => {
                    if flush(&mut stream, &mut out, WRITE_TIMEOUT).await.is_err() {
                        return;
                    }
                    stream = match stream.upgrade(&ctx.tls, TLS_HANDSHAKE_TIMEOUT).await {
                        Ok(s) => s,
                        Err(_) => return,
                    };
                    session.tls_started();
                    shell.transaction = Transaction::default();
                }
                Event::Auth {
                    username,
                    password,
                    authzid,
                    ..
                } => {
                    // The client waits for this answer anyway; send what is pending first.
                    if flush(&mut stream, &mut out, WRITE_TIMEOUT).await.is_err() {
                        return;
                    }
                    let result = if !crate::conn::authzid_allowed(&authzid, &username) {
                        AuthResult::Failed
                    } else {
                        shell.authenticate(&username, &password).await
                    };
                    session.auth_result(result);
                }
                Event::MailFrom { from, size, .. } => {
                    shell.transaction = Transaction {
                        size: size.unwrap_or(0),
                        ..Transaction::default()
                    };
                    session.mail_result(shell.sender(&from, service));
                }
                Event::RcptTo { to, .. } => {
                    let verdict = shell.recipient(&to, service).await;
                    session.rcpt_result(verdict);
                }
                Event::Message { envelope, content } => {
                    if flush(&mut stream, &mut out, WRITE_TIMEOUT).await.is_err() {
                        return;
                    }
                    let verdicts = shell.accept_message(&envelope, content).await;
                    session.message_result(verdicts);
                }
                Event::Close => {
                    let _ = flush(&mut stream, &mut out, WRITE_TIMEOUT).await;
                    let _ = stream.shutdown().await;
                    return;
                }
            }
        }
        if flush(&mut stream, &mut out, WRITE_TIMEOUT).await.is_err() {
            return;
        }
        if !session.wants_input() {
            // Nothing to read and nothing to answer: the session is stuck, which it never
            // should be; end the connection instead of spinning.
            tracing::warn!("smtp session {session_id}: no progress possible, closing");
            return;
        }
        match next_input(
            &mut stream,
            &mut buf,
            session.timeout(),
            &mut shutdown,
            goodbye.as_ref(),
        )
        .await
        {
            Input::Bytes(n) => session.feed(&buf[..n]),
            Input::TimedOut => session.timed_out(),
            Input::Closed | Input::Stopping => return,
        }
    }
}

struct Shell<'a> {
    ctx: &'a Arc<Ctx>,
    ip: IpAddr,
    session_id: u64,
    lmtp: bool,
    authenticated: Option<String>,
    transaction: Transaction,
}

impl Shell<'_> {
    async fn authenticate(&mut self, username: &str, password: &str) -> AuthResult {
        let ctx = self.ctx;
        match check_login(&ctx.throttle, &ctx.directory, self.ip, username, password).await {
            Ok(user) => {
                self.authenticated = Some(user.clone());
                AuthResult::Success { user }
            }
            Err(LoginRefused::BadCredentials) => AuthResult::Failed,
            Err(LoginRefused::Throttled | LoginRefused::Unavailable) => {
                AuthResult::TemporaryFailure
            }
        }
    }

    /// MAIL policy. On submission the sender must be the authenticated user, or an address
    /// that delivers to that user (an alias of theirs): a logged-in account must not send as
    /// somebody else (Postfix's `reject_sender_login_mismatch`). The null sender is allowed
    /// (RFC 5321 4.5.5: notifications). MX and LMTP senders are not ours to vouch for.
    fn sender(&self, from: &str, service: Service) -> Verdict {
        if !matches!(service, Service::Submission | Service::Submissions) || from.is_empty() {
            return Verdict::Accept;
        }
        let Some(user) = &self.authenticated else {
            // The session refuses MAIL before AUTH on submission; never reached.
            return Verdict::Accept;
        };
        if from.eq_ignore_ascii_case(user) {
            return Verdict::Accept;
        }
        match self.ctx.directory.cache().resolve(from) {
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
    /// from authenticated clients (no open relay); LMTP takes local recipients only.
    async fn recipient(&mut self, to: &str, service: Service) -> Verdict {
        let cache = self.ctx.directory.cache();
        let targets = match cache.resolve(to) {
            directory::Resolution::UnknownUser => {
                return Verdict::Reject(Reply::new(
                    550,
                    (5, 1, 1),
                    "mailbox unavailable: no such user",
                ));
            }
            directory::Resolution::NotLocal => {
                if service == Service::Lmtp || self.authenticated.is_none() {
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
                            if let Some(reject) = self.over_quota(&user).await {
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
        if self.transaction.incoming.is_none() {
            self.transaction.incoming = Some(self.ctx.queue.incoming());
        }
        Verdict::Accept
    }

    /// RFC 3463 4.2.2 (mailbox full, temporary) and 5.2.2 (the message alone exceeds it).
    async fn over_quota(&self, user: &str) -> Option<Reply> {
        let quota = self.ctx.directory.cache().quota(user)?;
        let store = self.ctx.store.clone();
        let who = user.to_string();
        let used = tokio::task::spawn_blocking(move || {
            store
                .list_folders(&who)
                .iter()
                .filter_map(|f| store.status(&who, f).ok())
                .map(|s| s.bytes)
                .sum::<u64>()
        })
        .await
        .unwrap_or(0);
        if self.transaction.size > quota {
            Some(Reply::new(
                552,
                (5, 2, 2),
                "message exceeds the mailbox quota",
            ))
        } else if used.saturating_add(self.transaction.size) >= quota {
            Some(Reply::new(452, (4, 2, 2), "mailbox full"))
        } else {
            None
        }
    }

    /// Adds the Received header and makes the message durable in the queue; only the queue's
    /// commit callback produces the `250` (guarantee 1).
    async fn accept_message(
        &mut self,
        envelope: &smtp::Envelope,
        content: Vec<u8>,
    ) -> Vec<Verdict> {
        let accepted = envelope.recipients.len();
        let targets = std::mem::take(&mut self.transaction.targets);
        let mut recipients: Vec<String> = targets.into_iter().flatten().collect();
        recipients.sort();
        recipients.dedup();
        let now = delivery::now_ms();
        let id = format!("{:x}.{:x}", now, self.session_id);
        let received = smtp::received_header(
            envelope,
            &self.ctx.config.hostname,
            &id,
            &crate::bounce::rfc5322_date(now),
        );
        let mut message = Vec::with_capacity(received.len() + content.len());
        message.extend_from_slice(received.as_bytes());
        message.extend_from_slice(&content);
        let queued = queue::Envelope {
            sender: envelope.from.clone(),
            recipients: recipients
                .into_iter()
                .map(|address| queue::Recipient {
                    address,
                    status: queue::RecipientStatus::Pending,
                    last_error: None,
                })
                .collect(),
            arrival_ms: now,
        };
        let (tx, rx) = tokio::sync::oneshot::channel();
        let wakeup = self.ctx.wakeup.clone();
        self.ctx.queue.enqueue_with(
            queued,
            message,
            Box::new(move |result| {
                if result.is_ok() {
                    wakeup.notify();
                }
                let _ = tx.send(result);
            }),
        );
        // Submitted: the writer need not wait for this session any more.
        self.transaction.incoming = None;
        let verdict = match rx.await {
            Ok(Ok(_)) => {
                self.ctx.accepted.fetch_add(1, Ordering::Relaxed);
                Verdict::Accept
            }
            Ok(Err(e)) => {
                tracing::error!("queue: {e}");
                Verdict::Reject(Reply::new(451, (4, 3, 0), "queue error, try again later"))
            }
            Err(_) => Verdict::Reject(Reply::new(451, (4, 3, 0), "queue closed, try again later")),
        };
        // LMTP (RFC 2033 4.2): one reply per accepted recipient; all share the commit.
        let replies = if self.lmtp { accepted.max(1) } else { 1 };
        vec![verdict; replies]
    }
}
