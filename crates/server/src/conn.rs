//! What every connection shares: a socket that can be upgraded to TLS in place (STARTTLS, STLS),
//! connection limits (in total and per client address) and failed-authentication throttling.

use std::collections::HashMap;
use std::io;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

/// How long a client may take over a TLS handshake (implicit TLS, STARTTLS, STLS).
pub(crate) const TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(60);

/// A client connection, plain or TLS.
pub(crate) enum Stream {
    Plain(TcpStream),
    Tls(Box<tokio_rustls::server::TlsStream<TcpStream>>),
}

impl Stream {
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
            tls => Ok(tls),
        }
    }

    pub(crate) fn is_tls(&self) -> bool {
        matches!(self, Stream::Tls(_))
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
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_flush(cx),
            Stream::Tls(s) => Pin::new(s).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Stream::Tls(s) => Pin::new(s).poll_shutdown(cx),
        }
    }
}

/// What waiting for the client produced.
pub(crate) enum Input {
    Bytes(usize),
    /// The session's own timeout passed with nothing read.
    TimedOut,
    /// The client closed the connection, or it failed.
    Closed,
    /// The server is shutting down; `goodbye` was sent.
    Stopping,
}

/// After the replies are flushed: reads what the client sends next into `buf`, within the
/// session's `timeout`, unless the server starts shutting down first, in which case `goodbye`
/// is sent (best effort) instead.
pub(crate) async fn next_input(
    stream: &mut Stream,
    buf: &mut [u8],
    timeout: Duration,
    shutdown: &mut tokio::sync::watch::Receiver<bool>,
    goodbye: &[u8],
) -> Input {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    tokio::select! {
        read = tokio::time::timeout(timeout, stream.read(buf)) => match read {
            Err(_) => Input::TimedOut,
            Ok(Ok(0)) | Ok(Err(_)) => Input::Closed,
            Ok(Ok(n)) => Input::Bytes(n),
        },
        () = stopping(shutdown) => {
            let _ = tokio::time::timeout(Duration::from_secs(1), stream.write_all(goodbye)).await;
            Input::Stopping
        }
    }
}

/// Resolves when the server starts shutting down (or the server is gone).
pub(crate) async fn stopping(shutdown: &mut tokio::sync::watch::Receiver<bool>) {
    // The borrow `wait_for` returns must not live across the caller's awaits.
    let _ = shutdown.wait_for(|stop| *stop).await.map(|_| ());
}

/// Writes `out` (and empties it) within `timeout`: a client that stops reading our replies
/// must not hold the task forever.
pub(crate) async fn flush(
    stream: &mut Stream,
    out: &mut Vec<u8>,
    timeout: Duration,
) -> io::Result<()> {
    use tokio::io::AsyncWriteExt as _;
    if out.is_empty() {
        return Ok(());
    }
    let result = tokio::time::timeout(timeout, async {
        stream.write_all(out).await?;
        stream.flush().await
    })
    .await
    .unwrap_or_else(|_| Err(io::ErrorKind::TimedOut.into()));
    out.clear();
    result
}

/// RFC 4616 2: SASL PLAIN may name an authorization identity. Acting as another user is not
/// offered, so only an empty one or the login name itself is acceptable; anything else must
/// fail the login, never be silently ignored.
pub(crate) fn authzid_allowed(authzid: &str, username: &str) -> bool {
    authzid.is_empty() || authzid.eq_ignore_ascii_case(username)
}

/// Why a login was not accepted.
pub(crate) enum LoginRefused {
    /// Too many recent failures from this address.
    Throttled,
    /// Unknown user or wrong password.
    BadCredentials,
    /// The directory could not answer.
    Unavailable,
}

/// The one login check every protocol uses: the per-address throttle (refuse, or delay after
/// failures), the password against the directory, then the throttle told how it went.
/// Returns the canonical user.
pub(crate) async fn check_login(
    throttle: &AuthThrottle,
    directory: &directory::Directory,
    ip: IpAddr,
    username: &str,
    password: &str,
) -> Result<String, LoginRefused> {
    match throttle.gate(ip) {
        Gate::Refuse => return Err(LoginRefused::Throttled),
        Gate::Check(delay) => tokio::time::sleep(delay).await,
    }
    match directory.authenticate(username, password).await {
        Ok(Some(user)) => {
            throttle.succeeded(ip);
            Ok(user)
        }
        Ok(None) => {
            throttle.failed(ip);
            Err(LoginRefused::BadCredentials)
        }
        Err(e) => {
            tracing::warn!("directory: {e}");
            Err(LoginRefused::Unavailable)
        }
    }
}

/// Connection counts, in total and per client address, shared by every listener.
pub(crate) struct ConnectionLimits {
    connections_max: usize,
    connections_per_ip_max: usize,
    open: Mutex<(usize, HashMap<IpAddr, usize>)>,
}

/// Why a connection was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refused {
    Total,
    PerIp,
}

/// Holds one connection's place; released on drop.
pub(crate) struct ConnectionSlot {
    limits: Arc<ConnectionLimits>,
    ip: IpAddr,
}

impl ConnectionLimits {
    pub(crate) fn new(connections_max: usize, connections_per_ip_max: usize) -> Arc<Self> {
        Arc::new(ConnectionLimits {
            connections_max,
            connections_per_ip_max,
            open: Mutex::new((0, HashMap::new())),
        })
    }

    pub(crate) fn admit(self: &Arc<Self>, ip: IpAddr) -> Result<ConnectionSlot, Refused> {
        let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        if open.0 >= self.connections_max {
            return Err(Refused::Total);
        }
        let per_ip = open.1.entry(ip).or_insert(0);
        if *per_ip >= self.connections_per_ip_max {
            return Err(Refused::PerIp);
        }
        *per_ip += 1;
        open.0 += 1;
        Ok(ConnectionSlot {
            limits: self.clone(),
            ip,
        })
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

/// Failed logins per client address. Each failure in the window delays the next answer a
/// little more; past `failures_max` the address gets a temporary refusal without the password
/// being checked, until the window passes. Password guessing then costs the guesser, not us
/// (an argon2 verification is ~20 ms of CPU).
pub(crate) struct AuthThrottle {
    failures_max: u32,
    window: Duration,
    failures: Mutex<HashMap<IpAddr, (u32, Instant)>>,
}

/// What the throttle says before a login attempt.
pub(crate) enum Gate {
    /// Check the password after this delay.
    Check(Duration),
    /// Too many failures: answer "try later" without checking.
    Refuse,
}

/// Entries kept at most; beyond it the oldest half is dropped (a spray from many addresses
/// must not grow the map without bound).
const THROTTLE_ENTRIES_MAX: usize = 65_536;

impl AuthThrottle {
    pub(crate) fn new(failures_max: u32, window: Duration) -> Self {
        AuthThrottle {
            failures_max,
            window,
            failures: Mutex::new(HashMap::new()),
        }
    }

    pub(crate) fn gate(&self, ip: IpAddr) -> Gate {
        let mut map = self.failures.lock().unwrap_or_else(|p| p.into_inner());
        match map.get(&ip) {
            Some(&(_, since)) if since.elapsed() > self.window => {
                map.remove(&ip);
                Gate::Check(Duration::ZERO)
            }
            Some(&(n, _)) if n >= self.failures_max => Gate::Refuse,
            Some(&(n, _)) => Gate::Check(Duration::from_millis(250) * n.min(8)),
            None => Gate::Check(Duration::ZERO),
        }
    }

    pub(crate) fn failed(&self, ip: IpAddr) {
        let mut map = self.failures.lock().unwrap_or_else(|p| p.into_inner());
        if map.len() >= THROTTLE_ENTRIES_MAX {
            let mut by_age: Vec<(IpAddr, Instant)> = map.iter().map(|(ip, v)| (*ip, v.1)).collect();
            by_age.sort_by_key(|e| e.1);
            for (old, _) in by_age.into_iter().take(THROTTLE_ENTRIES_MAX / 2) {
                map.remove(&old);
            }
        }
        let entry = map.entry(ip).or_insert((0, Instant::now()));
        entry.0 += 1;
    }

    pub(crate) fn succeeded(&self, ip: IpAddr) {
        self.failures
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&ip);
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
    }

    #[test]
    fn throttle_delays_then_refuses_then_forgets() {
        let throttle = AuthThrottle::new(3, Duration::from_millis(50));
        let ip: IpAddr = "10.0.0.1".parse().unwrap();
        assert!(matches!(throttle.gate(ip), Gate::Check(d) if d.is_zero()));
        throttle.failed(ip);
        assert!(matches!(throttle.gate(ip), Gate::Check(d) if !d.is_zero()));
        throttle.failed(ip);
        throttle.failed(ip);
        assert!(matches!(throttle.gate(ip), Gate::Refuse));
        std::thread::sleep(Duration::from_millis(60));
        assert!(matches!(throttle.gate(ip), Gate::Check(d) if d.is_zero()));
        throttle.failed(ip);
        throttle.succeeded(ip);
        assert!(matches!(throttle.gate(ip), Gate::Check(d) if d.is_zero()));
    }
}
