//! One IMAP connection: socket ↔ `imap::Session`. Logins are checked against the directory;
//! commands run against the store on the blocking pool; a session in IDLE also wakes when
//! the store commits a change to its user's folders (the store's observer → [`Users`]).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use imap::{AuthResult, Event};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::sync::watch;

use crate::Ctx;
use crate::conn::{LoginRefused, Stream, TLS_HANDSHAKE_TIMEOUT, check_login, flush, stopping};

const READ_CHUNK: usize = 64 << 10;
const WRITE_TIMEOUT: Duration = Duration::from_secs(600);

/// Logged-in users: how many sessions each has, and a change counter IDLE waits on.
#[derive(Clone)]
pub(crate) struct Users(Arc<UsersInner>);

struct UsersInner {
    sessions_max: usize,
    map: Mutex<HashMap<String, UserEntry>>,
}

struct UserEntry {
    sessions: usize,
    changed: watch::Sender<u64>,
}

/// One session's place among its user's sessions; leaves on drop.
pub(crate) struct Membership {
    users: Users,
    user: String,
    changes: watch::Receiver<u64>,
}

impl Users {
    pub(crate) fn new(sessions_max: usize) -> Users {
        Users(Arc::new(UsersInner {
            sessions_max,
            map: Mutex::new(HashMap::new()),
        }))
    }

    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<String, UserEntry>> {
        self.0.map.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Called by the store after every committed change to `user`'s folders.
    pub(crate) fn changed(&self, user: &str) {
        if let Some(entry) = self.map().get(user) {
            entry.changed.send_modify(|n| *n = n.wrapping_add(1));
        }
    }

    fn enter(&self, user: &str) -> Option<Membership> {
        let mut map = self.map();
        let entry = map.entry(user.to_string()).or_insert_with(|| UserEntry {
            sessions: 0,
            changed: watch::channel(0).0,
        });
        if entry.sessions >= self.0.sessions_max {
            return None;
        }
        entry.sessions += 1;
        Some(Membership {
            users: self.clone(),
            user: user.to_string(),
            changes: entry.changed.subscribe(),
        })
    }
}

impl Drop for Membership {
    fn drop(&mut self) {
        let mut map = self.users.map();
        if let Some(entry) = map.get_mut(&self.user) {
            entry.sessions -= 1;
            if entry.sessions == 0 {
                map.remove(&self.user);
            }
        }
    }
}

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

/// Runs the session on the blocking pool until it needs the shell: a full chunk of output,
/// a decision, or input. `quiet` is true when it stopped because it needs input.
async fn poll(ctx: &Arc<Ctx>, session: imap::Session) -> Option<(imap::Session, Vec<Event>, bool)> {
    let ctx = ctx.clone();
    let runtime = tokio::runtime::Handle::current();
    tokio::task::spawn_blocking(move || {
        let mut session = session;
        let subscriptions = DirectorySubscriptions {
            directory: ctx.directory.clone(),
            runtime,
        };
        let backend = imap::Backend {
            store: &ctx.store,
            subscriptions: &subscriptions,
            headers: &ctx.imap_headers,
            views: &ctx.imap_views,
        };
        let mut events = Vec::new();
        let mut bytes = 0;
        loop {
            let Some(event) = session.poll(&backend) else {
                return (session, events, true);
            };
            let decision = !matches!(event, Event::Write(_));
            if let Event::Write(w) = &event {
                bytes += w.len();
            }
            events.push(event);
            if decision || bytes >= ctx.imap.output_chunk_bytes {
                return (session, events, false);
            }
        }
    })
    .await
    .ok()
}

pub(crate) async fn run(
    ctx: Arc<Ctx>,
    stream: Stream,
    peer: SocketAddr,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut stream = stream;
    let mut session = imap::Session::new(ctx.imap.clone(), stream.is_tls());
    let mut membership: Option<Membership> = None;
    let mut buf = vec![0u8; READ_CHUNK];
    let mut out: Vec<u8> = Vec::new();
    loop {
        let Some((s, events, quiet)) = poll(&ctx, session).await else {
            return;
        };
        session = s;
        for event in events {
            match event {
                Event::Write(bytes) => {
                    out.extend_from_slice(&bytes);
                    if flush(&mut stream, &mut out, WRITE_TIMEOUT).await.is_err() {
                        return;
                    }
                }
                Event::StartTls => {
                    if flush(&mut stream, &mut out, WRITE_TIMEOUT).await.is_err() {
                        return;
                    }
                    stream = match stream.upgrade(&ctx.tls, TLS_HANDSHAKE_TIMEOUT).await {
                        Ok(s) => s,
                        Err(_) => return,
                    };
                    session.tls_started();
                }
                Event::Auth {
                    username,
                    password,
                    authzid,
                } => {
                    if !crate::conn::authzid_allowed(&authzid, &username) {
                        session.auth_result(AuthResult::BadCredentials);
                        continue;
                    }
                    let (result, member) = login(&ctx, peer, &username, &password).await;
                    if member.is_some() {
                        membership = member;
                    }
                    session.auth_result(result);
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
        if session.is_closed() {
            return;
        }
        if !quiet || !session.wants_input() {
            // More output, work, or the answer to a decision is pending: poll again.
            continue;
        }
        let idle = session.is_idle();
        let changes = membership.as_mut().map(|m| &mut m.changes);
        let timeout = session.timeout();
        let input = tokio::select! {
            read = tokio::time::timeout(timeout, stream.read(&mut buf)) => match read {
                Err(_) => Some(Input::TimedOut),
                Ok(Ok(0)) | Ok(Err(_)) => return,
                Ok(Ok(n)) => Some(Input::Bytes(n)),
            },
            () = changed(changes, idle) => None,
            () = stopping(&mut shutdown) => Some(Input::Stopping),
        };
        match input {
            Some(Input::Bytes(n)) => session.feed(&buf[..n]),
            Some(Input::TimedOut) => session.timed_out(),
            Some(Input::Stopping) => session.shutdown(),
            // A change while idling: the next poll pushes it.
            None => {}
        }
    }
}

enum Input {
    Bytes(usize),
    TimedOut,
    Stopping,
}

/// Resolves when the user's folders change, only while idling (otherwise updates wait for
/// the client's next command, RFC 9051 5.3).
async fn changed(changes: Option<&mut watch::Receiver<u64>>, idle: bool) {
    match changes {
        Some(rx) if idle => {
            if rx.changed().await.is_err() {
                std::future::pending::<()>().await
            }
        }
        _ => std::future::pending::<()>().await,
    }
}

/// Checks the password and the per-user session limit.
async fn login(
    ctx: &Arc<Ctx>,
    peer: SocketAddr,
    username: &str,
    password: &str,
) -> (AuthResult, Option<Membership>) {
    let user = match check_login(&ctx.throttle, &ctx.directory, peer.ip(), username, password).await
    {
        Ok(user) => user,
        Err(LoginRefused::BadCredentials) => return (AuthResult::BadCredentials, None),
        Err(LoginRefused::Throttled) => {
            return (
                AuthResult::Temporary("too many failed logins, try later".into()),
                None,
            );
        }
        Err(LoginRefused::Unavailable) => {
            return (AuthResult::Temporary("directory unavailable".into()), None);
        }
    };
    match ctx.imap_users.enter(&user) {
        Some(member) => (AuthResult::Success { user }, Some(member)),
        None => (AuthResult::TooManySessions, None),
    }
}
