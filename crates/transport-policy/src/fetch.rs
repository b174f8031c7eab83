//! Fetching a domain's MTA-STS policy (RFC 8461 3.3): `GET /.well-known/mta-sts.txt` from
//! `mta-sts.DOMAIN` over HTTPS, the certificate verified by WebPKI for that name; no
//! redirects; `200` and `text/plain` only; the body bounded.
//!
//! One request per connection is all this needs, so it is a small HTTP/1.1 client over
//! tokio-rustls (`Connection: close`; a `Content-Length`, chunked or connection-delimited
//! body) rather than a general one.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;

use crate::report::ResultType;
use crate::sts::{POLICY_BYTES_MAX, Policy, PolicyError};

/// Largest response head (status line and fields) read.
pub const RESPONSE_HEAD_BYTES_MAX: usize = 8 * 1024;

/// Why no policy came from the policy host.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    #[error("connecting to {0}: {1}")]
    Connect(SocketAddr, String),
    /// The certificate did not verify for `mta-sts.DOMAIN` (TLS-RPT `sts-webpki-invalid`).
    #[error("policy host certificate: {0}")]
    Certificate(rustls::Error),
    #[error("TLS: {0}")]
    Tls(String),
    #[error("HTTP: {0}")]
    Http(String),
    /// RFC 8461 3.3: a redirect is not followed.
    #[error("HTTP status {0} (redirects are not followed)")]
    Status(u16),
    #[error("media type {0:?} is not text/plain")]
    ContentType(String),
    #[error("policy is longer than {POLICY_BYTES_MAX} bytes")]
    TooLong,
    #[error("fetching the policy timed out")]
    Timeout,
    #[error("{0}")]
    Policy(#[from] PolicyError),
}

impl FetchError {
    /// RFC 8460 4.3.2.2: how TLS-RPT names this failure.
    pub fn result_type(&self) -> ResultType {
        match self {
            FetchError::Certificate(_) => ResultType::StsWebpkiInvalid,
            FetchError::Policy(_) | FetchError::ContentType(_) | FetchError::TooLong => {
                ResultType::StsPolicyInvalid
            }
            _ => ResultType::StsPolicyFetchError,
        }
    }
}

/// Fetches policies with one TLS client configuration.
#[derive(Clone)]
pub struct Fetcher {
    tls: Arc<rustls::ClientConfig>,
    timeout: Duration,
}

impl Fetcher {
    /// `roots`: the trust anchors for policy hosts (the Mozilla roots, plus any the operator
    /// added); `timeout` bounds one whole fetch.
    pub fn new(roots: rustls::RootCertStore, timeout: Duration) -> Fetcher {
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let tls = match rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
        {
            Ok(builder) => builder.with_root_certificates(roots).with_no_client_auth(),
            Err(_) => rustls::ClientConfig::builder()
                .with_root_certificates(roots)
                .with_no_client_auth(),
        };
        Fetcher {
            tls: Arc::new(tls),
            timeout,
        }
    }

    /// Fetches and parses `domain`'s policy from `address` (where `mta-sts.DOMAIN` resolved).
    pub async fn fetch(&self, domain: &str, address: SocketAddr) -> Result<Policy, FetchError> {
        tokio::time::timeout(self.timeout, self.fetch_unbounded(domain, address))
            .await
            .map_err(|_| FetchError::Timeout)?
    }

    async fn fetch_unbounded(
        &self,
        domain: &str,
        address: SocketAddr,
    ) -> Result<Policy, FetchError> {
        let host = format!(
            "mta-sts.{}",
            domain.trim_end_matches('.').to_ascii_lowercase()
        );
        let name = rustls_pki_types::ServerName::try_from(host.clone())
            .map_err(|e| FetchError::Http(format!("policy host {host:?}: {e}")))?;
        let tcp = TcpStream::connect(address)
            .await
            .map_err(|e| FetchError::Connect(address, e.to_string()))?;
        let _ = tcp.set_nodelay(true);
        let mut tls = tokio_rustls::TlsConnector::from(self.tls.clone())
            .connect(name, tcp)
            .await
            .map_err(tls_error)?;
        let request = format!(
            "GET /.well-known/mta-sts.txt HTTP/1.1\r\nHost: {host}\r\nAccept: text/plain\r\nUser-Agent: mailstow\r\nConnection: close\r\n\r\n"
        );
        tls.write_all(request.as_bytes()).await.map_err(http)?;
        tls.flush().await.map_err(http)?;
        let body = read_response(&mut tls).await?;
        Ok(Policy::parse(&body)?)
    }
}

fn tls_error(e: std::io::Error) -> FetchError {
    match e
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<rustls::Error>())
    {
        Some(error @ rustls::Error::InvalidCertificate(_)) => {
            FetchError::Certificate(error.clone())
        }
        _ => FetchError::Tls(e.to_string()),
    }
}

fn http(e: std::io::Error) -> FetchError {
    FetchError::Http(e.to_string())
}

/// Reads one HTTP/1.1 response (RFC 9112) and returns its body if it is a `200` with
/// `text/plain`, at most [`POLICY_BYTES_MAX`] bytes.
async fn read_response<R: AsyncRead + Unpin>(stream: &mut R) -> Result<Vec<u8>, FetchError> {
    let mut buffer = Vec::with_capacity(4096);
    let head_end = loop {
        if let Some(end) = find(&buffer, b"\r\n\r\n") {
            break end + 4;
        }
        if buffer.len() > RESPONSE_HEAD_BYTES_MAX {
            return Err(FetchError::Http("response head too long".into()));
        }
        let mut chunk = [0u8; 4096];
        let read = stream.read(&mut chunk).await.map_err(http)?;
        if read == 0 {
            return Err(FetchError::Http(
                "connection closed in the response head".into(),
            ));
        }
        buffer.extend_from_slice(&chunk[..read]);
    };
    let head = std::str::from_utf8(&buffer[..head_end])
        .map_err(|_| FetchError::Http("response head is not text".into()))?;
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or("");
    // RFC 9112 4: HTTP-version SP status-code SP [reason-phrase].
    let mut parts = status_line.splitn(3, ' ');
    let version = parts.next().unwrap_or("");
    let status: u16 = parts
        .next()
        .and_then(|code| code.parse().ok())
        .filter(|_| version.starts_with("HTTP/1."))
        .ok_or_else(|| FetchError::Http(format!("bad status line {:?}", truncated(status_line))))?;
    if status != 200 {
        return Err(FetchError::Status(status));
    }
    let mut content_type = None;
    let mut content_length = None;
    let mut chunked = false;
    for line in lines.filter(|l| !l.is_empty()) {
        let (field, value) = line
            .split_once(':')
            .ok_or_else(|| FetchError::Http(format!("bad header line {:?}", truncated(line))))?;
        let value = value.trim();
        match field.to_ascii_lowercase().as_str() {
            "content-type" => content_type = Some(value.to_string()),
            "content-length" => {
                let length: usize = value
                    .parse()
                    .map_err(|_| FetchError::Http(format!("bad Content-Length {value:?}")))?;
                if content_length.is_some_and(|seen| seen != length) {
                    return Err(FetchError::Http("conflicting Content-Length".into()));
                }
                content_length = Some(length);
            }
            "transfer-encoding" => chunked = value.to_ascii_lowercase().ends_with("chunked"),
            _ => {}
        }
    }
    // RFC 8461 3.2: the policy's media type is text/plain (parameters such as charset allowed).
    let media_type = content_type.unwrap_or_default();
    let essence = media_type.split(';').next().unwrap_or("").trim();
    if !essence.eq_ignore_ascii_case("text/plain") {
        return Err(FetchError::ContentType(truncated(&media_type)));
    }
    let already = buffer.split_off(head_end);
    if chunked {
        return read_chunked(stream, already).await;
    }
    match content_length {
        Some(length) if length > POLICY_BYTES_MAX => Err(FetchError::TooLong),
        Some(length) => {
            let mut body = already;
            if body.len() > length {
                body.truncate(length);
            }
            let missing = length - body.len();
            let start = body.len();
            body.resize(length, 0);
            if missing > 0 {
                stream.read_exact(&mut body[start..]).await.map_err(http)?;
            }
            Ok(body)
        }
        None => {
            // Delimited by the connection's end.
            let mut body = already;
            read_to_end_bounded(stream, &mut body).await?;
            Ok(body)
        }
    }
}

async fn read_to_end_bounded<R: AsyncRead + Unpin>(
    stream: &mut R,
    body: &mut Vec<u8>,
) -> Result<(), FetchError> {
    loop {
        if body.len() > POLICY_BYTES_MAX {
            return Err(FetchError::TooLong);
        }
        let mut chunk = [0u8; 4096];
        match stream.read(&mut chunk).await {
            Ok(0) => return Ok(()),
            Ok(read) => body.extend_from_slice(&chunk[..read]),
            // A server that closes without TLS close_notify: the body so far is all there is
            // (a cut policy fails to parse or names fewer exchangers; it is never longer).
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(()),
            Err(e) => return Err(http(e)),
        }
    }
}

/// RFC 9112 7.1: chunk-size [ext] CRLF data CRLF ... 0 CRLF [trailers] CRLF; only as much as a
/// policy may be is read.
async fn read_chunked<R: AsyncRead + Unpin>(
    stream: &mut R,
    mut raw: Vec<u8>,
) -> Result<Vec<u8>, FetchError> {
    let mut body = Vec::new();
    let mut at = 0;
    loop {
        let line_end = loop {
            if let Some(end) = find(&raw[at..], b"\r\n") {
                break at + end;
            }
            fill(stream, &mut raw).await?;
        };
        let size_text = std::str::from_utf8(&raw[at..line_end]).unwrap_or("");
        let size_text = size_text.split(';').next().unwrap_or("").trim();
        let size = usize::from_str_radix(size_text, 16)
            .map_err(|_| FetchError::Http(format!("bad chunk size {:?}", truncated(size_text))))?;
        at = line_end + 2;
        if size == 0 {
            // Trailers are not needed; the body is complete.
            return Ok(body);
        }
        if body.len() + size > POLICY_BYTES_MAX {
            return Err(FetchError::TooLong);
        }
        while raw.len() < at + size + 2 {
            fill(stream, &mut raw).await?;
        }
        body.extend_from_slice(&raw[at..at + size]);
        if &raw[at + size..at + size + 2] != b"\r\n" {
            return Err(FetchError::Http("chunk not followed by CRLF".into()));
        }
        at += size + 2;
    }
}

async fn fill<R: AsyncRead + Unpin>(stream: &mut R, raw: &mut Vec<u8>) -> Result<(), FetchError> {
    // Chunk framing adds little to a bounded body.
    if raw.len() > 2 * POLICY_BYTES_MAX + RESPONSE_HEAD_BYTES_MAX {
        return Err(FetchError::TooLong);
    }
    let mut chunk = [0u8; 4096];
    let read = stream.read(&mut chunk).await.map_err(http)?;
    if read == 0 {
        return Err(FetchError::Http(
            "connection closed in a chunked body".into(),
        ));
    }
    raw.extend_from_slice(&chunk[..read]);
    Ok(())
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

fn truncated(text: &str) -> String {
    text.chars().take(80).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn parse(response: &[u8]) -> Result<Vec<u8>, FetchError> {
        let mut reader = response;
        read_response(&mut reader).await
    }

    #[tokio::test]
    async fn bodies_by_length_chunks_and_close() {
        let policy = b"version: STSv1\r\nmode: testing\r\nmx: a.example\r\nmax_age: 60\r\n";
        let by_length = [
            format!("HTTP/1.1 200 OK\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\n\r\n", policy.len()).as_bytes(),
            policy,
        ]
        .concat();
        assert_eq!(parse(&by_length).await.unwrap(), policy);
        let chunked = [
            b"HTTP/1.1 200 OK\r\nContent-Type: TEXT/PLAIN\r\nTransfer-Encoding: chunked\r\n\r\n10;x=y\r\n".as_slice(),
            &policy[..16],
            b"\r\n",
            format!("{:x}\r\n", policy.len() - 16).as_bytes(),
            &policy[16..],
            b"\r\n0\r\n\r\n",
        ]
        .concat();
        assert_eq!(parse(&chunked).await.unwrap(), policy);
        let closed = [
            b"HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\n".as_slice(),
            policy,
        ]
        .concat();
        assert_eq!(parse(&closed).await.unwrap(), policy);
    }

    #[tokio::test]
    async fn wrong_responses_are_refused() {
        assert!(matches!(
            parse(b"HTTP/1.1 301 Moved\r\nLocation: https://elsewhere/\r\n\r\n").await,
            Err(FetchError::Status(301))
        ));
        assert!(matches!(
            parse(b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 0\r\n\r\n").await,
            Err(FetchError::ContentType(_))
        ));
        assert!(matches!(
            parse(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n").await,
            Err(FetchError::ContentType(_))
        ));
        assert!(matches!(
            parse(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 999999\r\n\r\n")
                .await,
            Err(FetchError::TooLong)
        ));
        let endless = [
            b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\n".as_slice(),
            &vec![b'a'; POLICY_BYTES_MAX + 10],
        ]
        .concat();
        assert!(matches!(parse(&endless).await, Err(FetchError::TooLong)));
        let big_chunk = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\nFFFFFFF\r\n";
        assert!(matches!(parse(big_chunk).await, Err(FetchError::TooLong)));
        assert!(matches!(
            parse(b"SMTP 220 hello\r\n\r\n").await,
            Err(FetchError::Http(_))
        ));
        assert!(matches!(
            parse(&vec![b'x'; 20_000]).await,
            Err(FetchError::Http(_))
        ));
        assert!(matches!(
            parse(
                b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 10\r\n\r\nshort"
            )
            .await,
            Err(FetchError::Http(_))
        ));
    }
}
