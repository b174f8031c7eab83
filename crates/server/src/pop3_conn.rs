//! One POP3 connection: socket ↔ `pop3::Session`, with logins checked against the directory,
//! the maildrop locked exclusively (RFC 1939 8: one session per maildrop) and opened from the
//! store's index, and QUIT's deletions applied with the store's constant-time expunge.

use std::collections::HashSet;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use pop3::{AuthResult, Event, Maildrop};
use tokio::io::AsyncWriteExt as _;

use crate::Ctx;
use crate::conn::{
    Input, LoginRefused, Stream, TLS_HANDSHAKE_TIMEOUT, check_login, flush, next_input,
};

const READ_CHUNK: usize = 16 << 10;
const WRITE_TIMEOUT: Duration = Duration::from_secs(600);
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

pub(crate) async fn run(
    ctx: Arc<Ctx>,
    stream: Stream,
    peer: SocketAddr,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
) {
    let mut stream = stream;
    let mut session = pop3::Session::new(ctx.pop3.clone(), stream.is_tls());
    let mut lock: Option<(String, MaildropLock)> = None;
    let mut out: Vec<u8> = Vec::new();
    let mut buf = vec![0u8; READ_CHUNK];
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
                }
                Event::Auth {
                    username,
                    password,
                    authzid,
                } => {
                    if flush(&mut stream, &mut out, WRITE_TIMEOUT).await.is_err() {
                        return;
                    }
                    if !crate::conn::authzid_allowed(&authzid, &username) {
                        session.auth_result(AuthResult::BadCredentials);
                        continue;
                    }
                    let (result, held) = login(&ctx, peer, &username, &password).await;
                    lock = held;
                    session.auth_result(result);
                }
                Event::Retrieve { uid, .. } => {
                    let Some((user, _)) = &lock else {
                        session.message(Err("not logged in".into()));
                        continue;
                    };
                    let store = ctx.store.clone();
                    let user = user.clone();
                    let content =
                        tokio::task::spawn_blocking(move || store.read(&user, FOLDER, uid)).await;
                    session.message(match content {
                        Ok(Ok(bytes)) => Ok(bytes),
                        Ok(Err(e)) => Err(e.to_string()),
                        Err(e) => Err(e.to_string()),
                    });
                }
                Event::Update { expunge } => {
                    let Some((user, _)) = &lock else {
                        session.update_result(Err("not logged in".into()));
                        continue;
                    };
                    let store = ctx.store.clone();
                    let user = user.clone();
                    let result = tokio::task::spawn_blocking(move || {
                        store.expunge(&user, FOLDER, &expunge).map(|_| ())
                    })
                    .await;
                    session.update_result(match result {
                        Ok(Ok(())) => Ok(()),
                        Ok(Err(e)) => Err(e.to_string()),
                        Err(e) => Err(e.to_string()),
                    });
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
            tracing::warn!("pop3 session: no progress possible, closing");
            return;
        }
        // Shutting down is not QUIT: nothing marked deleted is removed (RFC 1939 6).
        let goodbye = b"-ERR [SYS/TEMP] server shutting down\r\n";
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

/// Checks the password, takes the maildrop lock and opens INBOX from the index.
async fn login(
    ctx: &Arc<Ctx>,
    peer: SocketAddr,
    username: &str,
    password: &str,
) -> (AuthResult, Option<(String, MaildropLock)>) {
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
    let Some(held) = ctx.maildrops.lock(&user) else {
        return (AuthResult::InUse, None);
    };
    let store = ctx.store.clone();
    let who = user.clone();
    let view = tokio::task::spawn_blocking(move || store.open_folder(&who, FOLDER)).await;
    let maildrop = match view {
        Ok(Ok(view)) => Maildrop {
            uidvalidity: view.status.uidvalidity,
            messages: view.messages.iter().map(|m| (m.uid, m.size)).collect(),
        },
        // No mail delivered yet: an empty maildrop. UIDVALIDITY 0 is never a real one, and
        // no UIDL is shown for an empty drop.
        Ok(Err(e)) if e.is_not_found() => Maildrop {
            uidvalidity: 0,
            messages: Vec::new(),
        },
        Ok(Err(e)) => return (AuthResult::Temporary(e.to_string()), None),
        Err(e) => return (AuthResult::Temporary(e.to_string()), None),
    };
    (AuthResult::Success { maildrop }, Some((user, held)))
}
