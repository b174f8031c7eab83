//! A client connection's byte stream: plain, TLS (upgraded in place for STARTTLS and STLS),
//! or compressed after IMAP COMPRESS; and the shutdown signal every wait listens to.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

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
