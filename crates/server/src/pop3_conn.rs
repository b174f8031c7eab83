//! One POP3 connection: the `pop3::Session` under the connection driver, with logins checked
//! against the directory, the maildrop locked exclusively (RFC 1939 8: one session per
//! maildrop) and opened from the store's index, and QUIT's deletions applied with the store's
//! constant-time expunge.

use std::collections::HashSet;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use limits::Deadlines;
use pop3::{AuthResult, Event, Maildrop};
use store::Mailstore as _;

use crate::driver::{Conn, Protocol, Step};
use crate::login::{Login, Preauth, authzid_allowed, check_login, preauth};
use crate::shell::Shell;

const FOLDER: &str = "INBOX";

/// Users whose maildrop a session holds.
#[derive(Default)]
pub(crate) struct Maildrops(Arc<Mutex<HashSet<String>>>);

/// The exclusive lock on one maildrop; released on drop, however the session ends.
struct MaildropLock {
    held: Arc<Mutex<HashSet<String>>>,
    user: String,
}

impl Maildrops {
    fn lock(&self, user: &str) -> Option<MaildropLock> {
        let mut held = self.0.lock().unwrap_or_else(|p| p.into_inner());
        held.insert(user.to_string()).then(|| MaildropLock {
            held: self.0.clone(),
            user: user.to_string(),
        })
    }
}

impl Drop for MaildropLock {
    fn drop(&mut self) {
        self.held
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&self.user);
    }
}

/// What POP3 connections need beside the shell: the store (the maildrop is INBOX), the
/// maildrops held, and the gate (a held mailbox is not opened).
pub(crate) struct Pop3Parts {
    pub(crate) store: Arc<store::Store>,
    pub(crate) maildrops: Maildrops,
    pub(crate) gate: Arc<mailboxes::Gate>,
}

/// A POP3 session and its shell.
pub(crate) struct Pop3 {
    parts: Arc<Pop3Parts>,
    session: pop3::Session,
    ip: IpAddr,
    /// The logged-in user and their maildrop lock.
    lock: Option<(String, MaildropLock)>,
    /// The connection handed to the user's node (cluster).
    handover: Option<cluster::Handover>,
}

impl Pop3 {
    pub(crate) fn new(shell: &Shell, parts: Arc<Pop3Parts>, peer: SocketAddr, tls: bool) -> Pop3 {
        Pop3 {
            parts,
            session: pop3::Session::new(shell.live().pop3.clone(), tls),
            ip: peer.ip(),
            lock: None,
            handover: None,
        }
    }
}

impl Protocol for Pop3 {
    async fn step(&mut self, conn: &mut Conn) -> Step {
        while let Some(event) = self.session.poll() {
            match event {
                Event::Reply(bytes) => {
                    // RFC 1939 6: a session that signed off (QUIT, with or without UPDATE)
                    // frees its maildrop before its last reply is written, so a client that
                    // logs in again the moment it reads `+OK` finds it free.
                    if self.session.is_closed() {
                        self.lock = None;
                    }
                    conn.out.extend_from_slice(&bytes)
                }
                Event::StartTls => {
                    if conn.start_tls().await.is_err() {
                        return Step::Close;
                    }
                    self.session.tls_started();
                }
                Event::Auth {
                    mechanism,
                    username,
                    password,
                    authzid,
                } => {
                    if conn.flush().await.is_err() {
                        return Step::Close;
                    }
                    let attempt = Login {
                        proto: "pop3",
                        mechanism,
                        username: &username,
                        ip: self.ip,
                    };
                    if let Some(preauth) = preauth(
                        &conn.shell,
                        conn.stream.tls_exporter(),
                        "pop3",
                        &authzid,
                        &username,
                        &password,
                    ) {
                        let result = match preauth {
                            Preauth::Valid { user, client, node } => {
                                self.open(conn, &attempt, user, Some((client, &node))).await
                            }
                            Preauth::Invalid => AuthResult::BadCredentials,
                            Preauth::NotHere(text) => AuthResult::Temporary(text),
                        };
                        self.session.auth_result(result);
                        continue;
                    }
                    if !authzid_allowed(&authzid, &username) {
                        attempt.failed(&conn.shell);
                        self.session.auth_result(AuthResult::BadCredentials);
                        continue;
                    }
                    match self.login(conn, &attempt, &password).await {
                        Ok(result) => self.session.auth_result(result),
                        Err(handover) => {
                            let to_owner = self.session.hand_over().unwrap_or_default();
                            self.handover = Some(cluster::Handover {
                                to_owner,
                                ..handover
                            });
                            return Step::Proxy;
                        }
                    }
                }
                Event::Retrieve { uid, .. } => {
                    let Some((user, _)) = &self.lock else {
                        self.session.retrieve_result(Err("not logged in".into()));
                        continue;
                    };
                    let store = self.parts.store.clone();
                    let user = user.clone();
                    let content =
                        tokio::task::spawn_blocking(move || store.read(&user, FOLDER, uid)).await;
                    self.session.retrieve_result(match content {
                        Ok(Ok(bytes)) => Ok(bytes),
                        Ok(Err(e)) => Err(e.to_string()),
                        Err(e) => Err(e.to_string()),
                    });
                }
                Event::Update { expunge } => {
                    let Some((user, _)) = &self.lock else {
                        self.session.update_result(Err("not logged in".into()));
                        continue;
                    };
                    let store = self.parts.store.clone();
                    let user = user.clone();
                    let result = tokio::task::spawn_blocking(move || {
                        store.expunge(&user, FOLDER, &expunge).map(|_| ())
                    })
                    .await;
                    // RFC 1939 6: the UPDATE state ends the session. The maildrop is free
                    // before QUIT's answer is written, so a client that reconnects the
                    // moment it reads `+OK` (here or through another node) finds it free.
                    self.lock = None;
                    self.session.update_result(match result {
                        Ok(Ok(())) => Ok(()),
                        Ok(Err(e)) => Err(e.to_string()),
                        Err(e) => Err(e.to_string()),
                    });
                }
                Event::Close => return Step::Close,
            }
        }
        if self.session.wants_input() {
            Step::Read
        } else {
            tracing::warn!(event = "session_stuck", proto = "pop3", client = %self.ip);
            Step::Close
        }
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
        tracing::debug!(event = "deadline", proto = "pop3", client = %self.ip);
        self.session.deadline_passed();
    }

    fn shutting_down(&mut self) {
        self.session.shutting_down();
    }

    fn revoked(&mut self, why: mailboxes::Ending) {
        match why {
            mailboxes::Ending::Removed => self.session.revoked(),
            mailboxes::Ending::Moving => self.session.moving(),
        }
    }

    fn take_handover(&mut self) -> Option<cluster::Handover> {
        self.handover.take()
    }
}

impl Pop3 {
    /// Checks the password, then opens the maildrop here, or (`Err`) on the user's node in a
    /// cluster.
    async fn login(
        &mut self,
        conn: &mut Conn,
        attempt: &Login<'_>,
        password: &str,
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
                    return match cluster.open_pop3(&owner, &user, self.ip).await {
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
        Ok(self.open(conn, attempt, user, None).await)
    }

    /// Takes the maildrop lock and opens INBOX from the index for a logged-in user.
    async fn open(
        &mut self,
        conn: &mut Conn,
        attempt: &Login<'_>,
        user: String,
        via: Option<(IpAddr, &str)>,
    ) -> AuthResult {
        let shell = conn.shell.clone();
        let Ok(member) = shell.sessions.enter(&user, mailboxes::Protocol::Pop3) else {
            attempt.refused(&shell, &user);
            return AuthResult::Temporary("account unavailable".into());
        };
        // After joining the user: a move's freeze either ends this session or is seen here
        // (a move never uses POP3, so no exemption).
        if self.parts.gate.held(&user) {
            attempt.unavailable(&shell, &user, "mailbox is being moved");
            return AuthResult::Temporary("mailbox is being moved, try again shortly".into());
        }
        let Some(held) = self.parts.maildrops.lock(&user) else {
            attempt.refused(&shell, &user);
            return AuthResult::InUse;
        };
        let store = self.parts.store.clone();
        let who = user.clone();
        let view = tokio::task::spawn_blocking(move || store.open_folder(&who, FOLDER)).await;
        let maildrop = match view {
            Ok(Ok(view)) => Maildrop {
                uidvalidity: view.status.uidvalidity,
                messages: view.messages.iter().map(|m| (m.uid, m.size)).collect(),
            },
            // No mail delivered yet: an empty maildrop. UIDVALIDITY 0 is never a real one,
            // and no UIDL is shown for an empty drop.
            Ok(Err(e)) if e.is_not_found() => Maildrop {
                uidvalidity: 0,
                messages: Vec::new(),
            },
            Ok(Err(e)) => {
                attempt.refused(&shell, &user);
                return AuthResult::Temporary(e.to_string());
            }
            Err(e) => {
                attempt.refused(&shell, &user);
                return AuthResult::Temporary(e.to_string());
            }
        };
        match via {
            // Handed over by another node: log the client's address and that node.
            Some((client, node)) => {
                shell
                    .telemetry
                    .login_cluster("pop3", &user, "cluster", "ok", client, node);
            }
            None => attempt.ok(&shell, &user),
        }
        conn.member = Some(member);
        self.lock = Some((user, held));
        AuthResult::Success { maildrop }
    }
}
