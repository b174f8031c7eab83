//! What every connection shares: a socket that can be upgraded to TLS in place (STARTTLS, STLS),
//! connection limits (in total and per client address) and the login check.

use std::collections::HashMap;
use std::io;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

use crate::throttle::Gate;

/// How long a client may take over a TLS handshake (implicit TLS, STARTTLS, STLS).
pub(crate) const TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(60);

/// A client connection, plain or TLS, and compressed after IMAP COMPRESS.
pub(crate) enum Stream {
    Plain(TcpStream),
    Tls(Box<tokio_rustls::server::TlsStream<TcpStream>>),
    /// RFC 4978 COMPRESS=DEFLATE over either.
    Deflated(Box<Deflated>),
    /// Gone: a failed TLS upgrade took the socket. Reads end, writes fail.
    Closed,
}

/// RFC 4978: raw DEFLATE (RFC 1951) both ways over the connection as it was. Every flush is
/// a sync flush, so each batch of responses reaches the client whole; what the client sends
/// is inflated as it is read, in the reader's chunks, so a small input that inflates to much
/// costs no more memory than any other input (the session's own limits bound it).
pub(crate) struct Deflated {
    read: async_compression::tokio::bufread::DeflateDecoder<
        tokio::io::BufReader<tokio::io::ReadHalf<Stream>>,
    >,
    write: async_compression::tokio::write::DeflateEncoder<tokio::io::WriteHalf<Stream>>,
    tls: bool,
}

impl Deflated {
    fn new(stream: Stream) -> Deflated {
        let tls = stream.is_tls();
        let (read, write) = tokio::io::split(stream);
        let mut decoder =
            async_compression::tokio::bufread::DeflateDecoder::new(tokio::io::BufReader::new(read));
        // One long stream: never stop at a member's end.
        decoder.multiple_members(true);
        Deflated {
            read: decoder,
            write: async_compression::tokio::write::DeflateEncoder::new(write),
            tls,
        }
    }
}

impl Stream {
    /// The TLS exporter value a node's pre-authentication is bound to; `None` in plaintext.
    pub(crate) fn tls_exporter(&self) -> Option<[u8; 32]> {
        match self {
            Stream::Tls(tls) => cluster::server_exporter(tls.get_ref().1),
            _ => None,
        }
    }

    /// Runs the TLS handshake on a plain connection (within `timeout`); a TLS one is returned
    /// unchanged.
    pub(crate) async fn upgrade(
        self,
        acceptor: &tokio_rustls::TlsAcceptor,
        timeout: Duration,
    ) -> io::Result<Stream> {
        match self {
            Stream::Plain(tcp) => {
                let tls = tokio::time::timeout(timeout, acceptor.accept(tcp))
                    .await
                    .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "TLS handshake"))??;
                Ok(Stream::Tls(Box::new(tls)))
            }
            Stream::Closed => Err(io::ErrorKind::NotConnected.into()),
            tls => Ok(tls),
        }
    }

    pub(crate) fn is_tls(&self) -> bool {
        match self {
            Stream::Tls(_) => true,
            Stream::Deflated(d) => d.tls,
            _ => false,
        }
    }

    /// RFC 4978: the same connection, compressed from here on.
    pub(crate) fn deflated(self) -> Stream {
        match self {
            Stream::Closed => Stream::Closed,
            Stream::Deflated(d) => Stream::Deflated(d),
            stream => Stream::Deflated(Box::new(Deflated::new(stream))),
        }
    }
}

impl AsyncRead for Stream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Stream::Tls(s) => Pin::new(s).poll_read(cx, buf),
            Stream::Deflated(d) => Pin::new(&mut d.read).poll_read(cx, buf),
            Stream::Closed => Poll::Ready(Ok(())),
        }
    }
}

impl AsyncWrite for Stream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Stream::Tls(s) => Pin::new(s).poll_write(cx, buf),
            Stream::Deflated(d) => Pin::new(&mut d.write).poll_write(cx, buf),
            Stream::Closed => Poll::Ready(Err(io::ErrorKind::NotConnected.into())),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_flush(cx),
            Stream::Tls(s) => Pin::new(s).poll_flush(cx),
            Stream::Deflated(d) => Pin::new(&mut d.write).poll_flush(cx),
            Stream::Closed => Poll::Ready(Ok(())),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Stream::Tls(s) => Pin::new(s).poll_shutdown(cx),
            Stream::Deflated(d) => Pin::new(&mut d.write).poll_shutdown(cx),
            Stream::Closed => Poll::Ready(Ok(())),
        }
    }
}

/// Resolves when the server starts shutting down (or the server is gone).
pub(crate) async fn stopping(shutdown: &mut tokio::sync::watch::Receiver<bool>) {
    // The borrow `wait_for` returns must not live across the caller's awaits.
    let _ = shutdown.wait_for(|stop| *stop).await.map(|_| ());
}

/// RFC 4616 2: SASL PLAIN may name an authorization identity. Acting as another user is not
/// offered, so only an empty one or the login name itself is acceptable; anything else must
/// fail the login, never be silently ignored.
pub(crate) fn authzid_allowed(authzid: &str, username: &str) -> bool {
    authzid.is_empty() || authzid.eq_ignore_ascii_case(username)
}

/// A node's pre-authentication (see `cluster.rs`), as checked on the owner.
pub(crate) enum Preauth {
    /// Valid on this connection, and the user's mail is here.
    Valid {
        user: String,
        client: IpAddr,
        /// `cluster:<node>`: who handed the session over.
        node: String,
    },
    /// Not valid (logged).
    Invalid,
    /// Valid, but the user's mail is not (or no longer) here: the text for the client.
    NotHere(String),
}

/// Checks a node's pre-authentication on this connection; `None` for an ordinary login.
pub(crate) fn preauth(
    conn: &crate::driver::Conn,
    proto: &'static str,
    authzid: &str,
    username: &str,
    password: &str,
) -> Option<Preauth> {
    let cluster = conn.ctx.cluster.as_ref()?;
    let checked = cluster.check_preauth(
        proto,
        authzid,
        username,
        password,
        conn.stream.tls_exporter(),
    )?;
    Some(match checked {
        Ok((user, client)) => match cluster.home(&conn.ctx.directory, &user) {
            cluster::Home::Local => Preauth::Valid {
                user,
                client,
                node: username.to_string(),
            },
            _ => Preauth::NotHere("mailbox is not on this node; log in again".into()),
        },
        Err(why) => {
            tracing::warn!(
                event = "cluster_preauth_refused",
                proto,
                node = %telemetry::shown(username),
                error = why
            );
            Preauth::Invalid
        }
    })
}

/// Why a login was not accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LoginRefused {
    /// Too many recent failures (of this user from this address, of this address, or of its
    /// network).
    Throttled,
    /// Unknown user or wrong password.
    BadCredentials,
    /// The directory could not answer, or too many logins are being checked.
    Unavailable,
}

impl LoginRefused {
    /// What a client is told about a temporary refusal (`None`: wrong credentials, which get
    /// the protocol's own failure answer).
    pub(crate) fn temporary(self) -> Option<&'static str> {
        match self {
            LoginRefused::Throttled => Some("too many failed logins, try later"),
            LoginRefused::Unavailable => Some("directory unavailable, try later"),
            LoginRefused::BadCredentials => None,
        }
    }
}

/// The one login check every protocol uses: the throttle (refuse, or count the attempt and
/// delay it), the password against the directory, the verdict back to the throttle. Logs the
/// refusals (`throttled`, `login result=failed|unavailable`); a caller that gets `Ok` logs the
/// login's outcome with [`Login::ok`] or [`Login::refused`] once it has admitted the session.
pub(crate) async fn check_login(
    ctx: &crate::Ctx,
    login: &Login<'_>,
    password: &str,
) -> Result<String, LoginRefused> {
    let (ip, username) = (login.ip, login.username);
    let (ticket, priority) = match ctx.throttle.gate(ip, username).await {
        Gate::Refuse(level) => {
            ctx.telemetry
                .throttled(login.proto, username, ip, level.name());
            login.attempt(ctx, None, directory::Attempt::Throttled);
            // A guesser that is refused at once just asks again: make it wait.
            tokio::time::sleep(ctx.live().config.tarpit_delay).await;
            return Err(LoginRefused::Throttled);
        }
        Gate::Check {
            delay,
            suspect,
            ticket,
        } => {
            if !delay.is_zero() {
                tokio::time::sleep(delay).await;
            }
            let priority = if suspect {
                directory::Priority::Suspect
            } else {
                directory::Priority::Normal
            };
            (ticket, priority)
        }
    };
    match ctx
        .directory
        .authenticate_with(username, password, priority)
        .await
    {
        Ok(Some(user)) => {
            ticket.succeeded();
            login.attempt(ctx, Some(&user), directory::Attempt::Ok);
            Ok(user)
        }
        Ok(None) => {
            ticket.failed();
            login.attempt(ctx, None, directory::Attempt::Failed);
            login.log(ctx, username, "failed");
            Err(LoginRefused::BadCredentials)
        }
        Err(e) => {
            ticket.abandoned();
            tracing::warn!(
                event = "directory_error",
                user = %telemetry::shown(username),
                error = %e
            );
            login.log(ctx, username, "unavailable");
            Err(LoginRefused::Unavailable)
        }
    }
}

/// Who is logging in, how and from where: what a `login` log line names.
pub(crate) struct Login<'a> {
    pub(crate) proto: &'static str,
    pub(crate) mechanism: &'static str,
    pub(crate) username: &'a str,
    pub(crate) ip: IpAddr,
}

impl Login<'_> {
    /// The session is open as `user`; its last login is recorded (`user list`).
    pub(crate) fn ok(&self, ctx: &crate::Ctx, user: &str) {
        self.log(ctx, user, "ok");
        ctx.directory.note_login(user);
    }

    /// The password was right but the session was not opened (too many sessions, the
    /// account is being deleted, the maildrop is locked).
    pub(crate) fn refused(&self, ctx: &crate::Ctx, user: &str) {
        self.log(ctx, user, "refused");
    }

    /// The password was right and the session was handed to the user's node.
    pub(crate) fn proxied(&self, ctx: &crate::Ctx, user: &str, node: &str) {
        ctx.telemetry
            .login_cluster(self.proto, user, self.mechanism, "proxied", self.ip, node);
        ctx.directory.note_login(user);
    }

    /// The password was right but the user's node is down or does not answer.
    pub(crate) fn unavailable(&self, ctx: &crate::Ctx, user: &str, why: &str) {
        ctx.telemetry.login_cluster(
            self.proto,
            user,
            self.mechanism,
            "unavailable",
            self.ip,
            why,
        );
    }

    /// Adds the attempt to the user's login history (the web view's account page): `user`
    /// when the password was right, else the name given when it is an existing user's
    /// address (guesses at unknown names have no history to join).
    fn attempt(&self, ctx: &crate::Ctx, user: Option<&str>, result: directory::Attempt) {
        let user = match user {
            Some(user) => user.to_string(),
            None if ctx.directory.cache().is_user(self.username) => {
                self.username.to_ascii_lowercase()
            }
            None => return,
        };
        ctx.directory
            .note_attempt(&user, self.ip, self.proto, result);
    }

    /// Refused before the password was checked (an authorization identity we do not allow).
    pub(crate) fn failed(&self, ctx: &crate::Ctx) {
        self.log(ctx, self.username, "failed");
    }

    fn log(&self, ctx: &crate::Ctx, user: &str, result: &'static str) {
        ctx.telemetry
            .login(self.proto, user, self.mechanism, result, self.ip);
    }
}

/// Connection counts, in total and per client address, shared by every listener.
pub(crate) struct ConnectionLimits {
    /// Both may change on reload (SIGHUP); connections already open stay.
    connections_max: std::sync::atomic::AtomicUsize,
    connections_per_ip_max: std::sync::atomic::AtomicUsize,
    open: Mutex<(usize, HashMap<IpAddr, usize>)>,
}

/// Why a connection was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refused {
    Total,
    PerIp,
}

/// What a connection holds for its whole life, wherever it runs (its task, the parking
/// lot): its place among the connections, and the log line of its end.
pub(crate) struct Held {
    _slot: ConnectionSlot,
    _open: telemetry::OpenConnection,
}

impl Held {
    pub(crate) fn new(slot: ConnectionSlot, open: telemetry::OpenConnection) -> Held {
        Held {
            _slot: slot,
            _open: open,
        }
    }
}

/// Holds one connection's place; released on drop.
pub(crate) struct ConnectionSlot {
    limits: Arc<ConnectionLimits>,
    ip: IpAddr,
}

impl ConnectionLimits {
    pub(crate) fn new(connections_max: usize, connections_per_ip_max: usize) -> Arc<Self> {
        Arc::new(ConnectionLimits {
            connections_max: connections_max.into(),
            connections_per_ip_max: connections_per_ip_max.into(),
            open: Mutex::new((0, HashMap::new())),
        })
    }

    #[cfg(test)]
    pub(crate) fn admit(self: &Arc<Self>, ip: IpAddr) -> Result<ConnectionSlot, Refused> {
        self.admit_from(ip, true)
    }

    /// [`ConnectionLimits::admit`]; `per_ip: false` for another node of the cluster, whose
    /// proxied sessions and hand-overs all come from its one address (they still count in
    /// the total).
    pub(crate) fn admit_from(
        self: &Arc<Self>,
        ip: IpAddr,
        per_ip: bool,
    ) -> Result<ConnectionSlot, Refused> {
        let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        if open.0 >= self.connections_max.load(Ordering::Relaxed) {
            return Err(Refused::Total);
        }
        let from_ip = open.1.entry(ip).or_insert(0);
        if per_ip && *from_ip >= self.connections_per_ip_max.load(Ordering::Relaxed) {
            return Err(Refused::PerIp);
        }
        let per_ip = from_ip;
        *per_ip += 1;
        open.0 += 1;
        Ok(ConnectionSlot {
            limits: self.clone(),
            ip,
        })
    }

    /// New limits for the next connections (a reload).
    pub(crate) fn set_max(&self, connections_max: usize, connections_per_ip_max: usize) {
        self.connections_max
            .store(connections_max, Ordering::Relaxed);
        self.connections_per_ip_max
            .store(connections_per_ip_max, Ordering::Relaxed);
    }

    pub(crate) fn open(&self) -> usize {
        self.open.lock().unwrap_or_else(|p| p.into_inner()).0
    }
}

impl Drop for ConnectionSlot {
    fn drop(&mut self) {
        let mut open = self.limits.open.lock().unwrap_or_else(|p| p.into_inner());
        open.0 = open.0.saturating_sub(1);
        if let Some(n) = open.1.get_mut(&self.ip) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                open.1.remove(&self.ip);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_count_in_total_and_per_ip() {
        let limits = ConnectionLimits::new(3, 2);
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let b: IpAddr = "10.0.0.2".parse().unwrap();
        let a1 = limits.admit(a).unwrap();
        let _a2 = limits.admit(a).unwrap();
        assert_eq!(limits.admit(a).err(), Some(Refused::PerIp));
        let _b1 = limits.admit(b).unwrap();
        assert_eq!(limits.admit(b).err(), Some(Refused::Total));
        drop(a1);
        assert_eq!(limits.open(), 2);
        assert!(limits.admit(b).is_ok());
        // Another cluster node's address is not held to the per-address limit, only the total.
        let limits = ConnectionLimits::new(3, 1);
        let _n1 = limits.admit_from(a, false).unwrap();
        let _n2 = limits.admit_from(a, false).unwrap();
        assert_eq!(limits.admit(a).err(), Some(Refused::PerIp));
        let _n3 = limits.admit_from(a, false).unwrap();
        assert_eq!(limits.admit_from(a, false).err(), Some(Refused::Total));
    }
}
