//! One IMAP connection: the `imap::Session` under the connection driver. Logins are checked
//! against the directory; the session's storage steps (`Event::Storage`) run against the
//! store on the blocking pool; a session in IDLE also wakes when the store commits a change
//! to its user's folders (the store's observer → `mailboxes::Sessions`).

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use imap::{AuthResult, Event};
use limits::Deadlines;

use crate::driver::{Conn, Protocol, Step};
use crate::login::{Login, Preauth, authzid_allowed, check_login, preauth};
use crate::shell::Shell;

/// Subscriptions live in the directory; sessions call in from the blocking pool.
struct DirectorySubscriptions {
    directory: directory::Directory,
    runtime: tokio::runtime::Handle,
}

impl imap::Subscriptions for DirectorySubscriptions {
    fn list(&self, user: &str) -> Result<Vec<String>, String> {
        self.runtime
            .block_on(self.directory.subscriptions(user))
            .map_err(|e| e.to_string())
    }

    fn set(&self, user: &str, mailbox: &str, subscribed: bool) -> Result<(), String> {
        self.runtime
            .block_on(self.directory.set_subscribed(user, mailbox, subscribed))
            .map_err(|e| e.to_string())
    }
}

impl imap::SpecialUses for DirectorySubscriptions {
    fn list(&self, user: &str) -> Result<Vec<(String, String)>, String> {
        self.runtime
            .block_on(self.directory.special_uses(user))
            .map_err(|e| e.to_string())
    }

    fn set(&self, user: &str, mailbox: &str, attributes: &[String]) -> Result<(), String> {
        self.runtime
            .block_on(self.directory.set_special_uses(user, mailbox, attributes))
            .map_err(|e| e.to_string())
    }

    fn renamed(&self, user: &str, from: &str, to: &str) -> Result<(), String> {
        self.runtime
            .block_on(self.directory.special_uses_renamed(user, from, to))
            .map_err(|e| e.to_string())
    }
}

/// Runs one storage step of the session on the blocking pool (its answer to
/// `Event::Storage`): the store and the directory's parts are its backend, and the clock's
/// time its `now`.
async fn run_storage(parts: &Arc<ImapParts>, session: imap::Session) -> Option<imap::Session> {
    let parts = parts.clone();
    let runtime = tokio::runtime::Handle::current();
    tokio::task::spawn_blocking(move || {
        let mut session = session;
        let subscriptions = DirectorySubscriptions {
            directory: parts.directory.clone(),
            runtime,
        };
        let quotas = crate::quota::DirectoryQuotas {
            directory: &parts.directory,
            telemetry: &parts.telemetry,
            space: &parts.space,
        };
        let backend = imap::Backend {
            store: &*parts.store,
            subscriptions: &subscriptions,
            special_uses: &subscriptions,
            quotas: &quotas,
            filing: &Filing(&parts.filter),
        };
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |since| since.as_secs() as i64);
        session.run(&backend, now);
        session
    })
    .await
    .ok()
}

/// What IMAP connections need beside the shell: the store, subscriptions and quotas from
/// the directory, the gate (a held mailbox is refused at login), the moves (a move's delta
/// session freezes the user here) and the places for compressed connections.
pub(crate) struct ImapParts {
    pub(crate) store: Arc<store::Store>,
    pub(crate) directory: directory::Directory,
    pub(crate) telemetry: Arc<telemetry::Telemetry>,
    pub(crate) gate: Arc<mailboxes::Gate>,
    pub(crate) moves: Option<Arc<cluster::Moves>>,
    /// Places for compressed connections (`imap_compress_connections_max`).
    pub(crate) compressed: Arc<tokio::sync::Semaphore>,
    /// The data directory's free-space reserve: APPEND, COPY and MOVE are refused below it.
    pub(crate) space: Arc<disk::SpaceReserve>,
    /// Learns from moves into and out of Junk (docs/spam.md 3).
    pub(crate) filter: Arc<filter::Filter>,
}

/// COPY and MOVE reported to the spam filter's trainer.
struct Filing<'a>(&'a filter::Filter);

impl imap::Filing for Filing<'_> {
    fn filed(&self, user: &str, from: &str, to: &str, uids: &[u32]) {
        self.0.filed(filter::Filed {
            user: user.to_string(),
            from: from.to_string(),
            to: to.to_string(),
            uids: uids.to_vec(),
        });
    }
}

/// An IMAP session and its shell. The session is `None` only while a storage step runs it
/// on the blocking pool (and for good if that task died).
pub(crate) struct Imap {
    parts: Arc<ImapParts>,
    session: Option<imap::Session>,
    ip: IpAddr,
    /// The connection handed to the user's node (cluster).
    /// Boxed: rare, and large next to an idle session.
    handover: Option<Box<cluster::Handover>>,
    /// Its place among the compressed connections, once compressed (RFC 4978).
    compressed: Option<tokio::sync::OwnedSemaphorePermit>,
}

impl Imap {
    pub(crate) fn new(shell: &Shell, parts: Arc<ImapParts>, peer: SocketAddr, tls: bool) -> Imap {
        let config = shell.live().imap.clone();
        Imap {
            parts,
            session: Some(imap::Session::new(config, tls)),
            ip: peer.ip(),
            handover: None,
            compressed: None,
        }
    }

    /// A parked session woken ([`crate::park`]).
    fn woken(parts: Arc<ImapParts>, session: imap::Hibernated, ip: IpAddr) -> Imap {
        Imap {
            parts,
            session: Some(session.wake()),
            ip,
            handover: None,
            compressed: None,
        }
    }

    fn session(&mut self) -> Option<&mut imap::Session> {
        self.session.as_mut()
    }
}

impl Protocol for Imap {
    async fn step(&mut self, conn: &mut Conn) -> Step {
        // A session in IDLE is stepped when its user's mail changed (or its client spoke):
        // it looks at the store for what to tell (RFC 2177).
        if let Some(session) = self.session() {
            session.mail_changed();
        }
        loop {
            let Some(session) = self.session.as_mut() else {
                return Step::Close;
            };
            let Some(event) = session.poll() else {
                break;
            };
            match event {
                Event::Reply(bytes) => {
                    conn.out.extend_from_slice(&bytes);
                    if conn.flush().await.is_err() {
                        return Step::Close;
                    }
                }
                Event::Storage => {
                    let Some(session) = self.session.take() else {
                        return Step::Close;
                    };
                    self.session = run_storage(&self.parts, session).await;
                }
                Event::StartTls => {
                    if conn.start_tls().await.is_err() {
                        return Step::Close;
                    }
                    session.tls_started();
                }
                Event::Compress => {
                    // A place among the compressed connections, held for this one's life.
                    self.compressed = self.parts.compressed.clone().try_acquire_owned().ok();
                    if self.compressed.is_none() {
                        tracing::info!(event = "refused", proto = "imap", client = %self.ip, reason = "imap_compress_connections_max");
                    }
                    session.compress_result(self.compressed.is_some());
                }
                Event::Deflate => {
                    if conn.start_compression().await.is_err() {
                        return Step::Close;
                    }
                }
                Event::Auth {
                    mechanism,
                    username,
                    password,
                    authzid,
                } => {
                    let attempt = Login {
                        proto: "imap",
                        mechanism,
                        username: &username,
                        ip: self.ip,
                    };
                    if let Some(preauth) = preauth(
                        &conn.shell,
                        conn.stream.tls_exporter(),
                        "imap",
                        &authzid,
                        &username,
                        &password,
                    ) {
                        let result = match preauth {
                            Preauth::Valid { user, client, node } => {
                                match node.strip_prefix(cluster::MOVE_AUTHCID_PREFIX) {
                                    // A move's delta session: admitted once the user is
                                    // frozen here (`moves.rs`).
                                    Some(target) => {
                                        let frozen = match &self.parts.moves {
                                            Some(moves) => {
                                                cluster::moves::freeze_here(moves, &user, target)
                                                    .await
                                            }
                                            None => Err("not a cluster node".to_string()),
                                        };
                                        match frozen {
                                            Ok(()) => enter(
                                                conn,
                                                &self.parts,
                                                &attempt,
                                                user,
                                                Some((client, &node)),
                                            ),
                                            Err(text) => AuthResult::Temporary(text),
                                        }
                                    }
                                    None => enter(
                                        conn,
                                        &self.parts,
                                        &attempt,
                                        user,
                                        Some((client, &node)),
                                    ),
                                }
                            }
                            Preauth::Invalid => AuthResult::BadCredentials,
                            Preauth::NotHere(text) => AuthResult::Temporary(text),
                        };
                        session.auth_result(result);
                        continue;
                    }
                    let result = if !authzid_allowed(&authzid, &username) {
                        attempt.failed(&conn.shell);
                        AuthResult::BadCredentials
                    } else {
                        let tag = session.auth_tag().unwrap_or("*").to_string();
                        match login(conn, &self.parts, &attempt, &password, &tag, self.ip).await {
                            Ok(result) => result,
                            Err(handover) => {
                                let (_, to_owner) = session.hand_over().unwrap_or_default();
                                self.handover = Some(Box::new(cluster::Handover {
                                    to_owner,
                                    ..handover
                                }));
                                return Step::Proxy;
                            }
                        }
                    };
                    session.auth_result(result);
                }
                Event::Close => return Step::Close,
            }
        }
        let Some(session) = self.session.as_ref() else {
            return Step::Close;
        };
        if session.is_closed() {
            return Step::Close;
        }
        if !session.wants_input() {
            // The answer to a decision is pending: poll again.
            return Step::Again;
        }
        Step::Read
    }

    fn feed(&mut self, bytes: &[u8]) {
        if let Some(session) = self.session() {
            session.feed(bytes);
        }
    }

    fn timeout(&self) -> Duration {
        self.session
            .as_ref()
            .map_or(Duration::ZERO, imap::Session::timeout)
    }

    fn deadlines(&self) -> Deadlines {
        self.session
            .as_ref()
            .map(imap::Session::deadlines)
            .unwrap_or_default()
    }

    fn timed_out(&mut self) {
        if let Some(session) = self.session() {
            session.timed_out();
        }
    }

    fn deadline_passed(&mut self) {
        tracing::debug!(event = "deadline", proto = "imap", client = %self.ip);
        if let Some(session) = self.session() {
            session.deadline_passed();
        }
    }

    fn shutting_down(&mut self) {
        if let Some(session) = self.session() {
            session.shutting_down();
        }
    }

    fn revoked(&mut self, why: mailboxes::Ending) {
        if let Some(session) = self.session() {
            match why {
                mailboxes::Ending::Removed => session.revoked(),
                mailboxes::Ending::Moving => session.moving(),
            }
        }
    }

    fn take_handover(&mut self) -> Option<cluster::Handover> {
        self.handover.take().map(|h| *h)
    }

    fn wants_changes(&self) -> bool {
        // Only while idling: otherwise updates wait for the client's next command (RFC 9051
        // 5.3).
        self.session.as_ref().is_some_and(imap::Session::is_idle)
    }

    fn hibernate(&mut self) -> Option<Box<dyn FnOnce() -> Imap + Send>> {
        if self.handover.is_some() || self.compressed.is_some() {
            return None;
        }
        match self.session.take()?.hibernate() {
            Ok(hibernated) => {
                let (parts, ip) = (self.parts.clone(), self.ip);
                Some(Box::new(move || Imap::woken(parts, hibernated, ip)))
            }
            Err(session) => {
                self.session = Some(session);
                None
            }
        }
    }
}

/// Checks the password, then enters the session here, or (`Err`) hands the connection to
/// the user's node in a cluster.
async fn login(
    conn: &mut Conn,
    parts: &ImapParts,
    attempt: &Login<'_>,
    password: &str,
    tag: &str,
    client: IpAddr,
) -> Result<AuthResult, cluster::Handover> {
    let shell = conn.shell.clone();
    let user = match check_login(&shell, attempt, password).await {
        Ok(user) => user,
        Err(refused) => {
            return Ok(match refused.temporary() {
                Some(text) => AuthResult::Temporary(text.into()),
                None => AuthResult::BadCredentials,
            });
        }
    };
    if let Some(cluster) = &shell.cluster {
        match cluster.home(&shell.directory, &user) {
            cluster::Home::Local => {}
            cluster::Home::Unavailable(text) => {
                attempt.unavailable(&shell, &user, &text);
                return Ok(AuthResult::Temporary(text));
            }
            cluster::Home::Node(owner) => {
                return match cluster.open_imap(&owner, &user, client, tag).await {
                    Ok((upstream, to_client)) => {
                        attempt.proxied(&shell, &user, &owner.name);
                        Err(cluster::Handover {
                            upstream,
                            to_client,
                            to_owner: Vec::new(),
                        })
                    }
                    Err(text) => {
                        attempt.unavailable(&shell, &user, &text);
                        Ok(AuthResult::Temporary(text))
                    }
                };
            }
        }
    }
    Ok(enter(conn, parts, attempt, user, None))
}

/// A logged-in user's session starts here, within the per-user session limit. `via`: the
/// client's address and the node that handed the session over.
fn enter(
    conn: &mut Conn,
    parts: &ImapParts,
    attempt: &Login<'_>,
    user: String,
    via: Option<(IpAddr, &str)>,
) -> AuthResult {
    let shell = conn.shell.clone();
    let entered = shell.sessions.enter(&user, mailboxes::Protocol::Imap);
    match (&entered, via) {
        (Ok(_), Some((client, node))) => {
            shell
                .telemetry
                .login_cluster("imap", &user, "cluster", "ok", client, node);
        }
        (Ok(_), None) => attempt.ok(&shell, &user),
        (Err(_), _) => attempt.refused(&shell, &user),
    }
    match entered {
        // Checked once the session joined the user: a move's freeze either ends this
        // session or is seen here. A move's own session is exempt.
        Ok(_)
            if !via.is_some_and(|(_, node)| node.starts_with(cluster::MOVE_AUTHCID_PREFIX))
                && parts.gate.held(&user) =>
        {
            AuthResult::Temporary("mailbox is being moved, try again shortly".into())
        }
        Ok(member) => {
            conn.member = Some(member);
            AuthResult::Success { user }
        }
        Err(mailboxes::Refused::TooManySessions) => AuthResult::TooManySessions,
        Err(mailboxes::Refused::Revoked) => AuthResult::Temporary("account unavailable".into()),
    }
}
