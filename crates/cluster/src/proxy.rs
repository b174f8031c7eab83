//! IMAP, POP3 and ManageSieve sessions handed to the node that owns the user (issue 20; the seed's
//! interface module handing a client to the mailbox's server): the connection to the owner,
//! opened and pre-authenticated here; the server's connection shell then splices the
//! client's bytes to it.
//!
//! **Owner down.** The directory's leases say which nodes are up; a login for a user whose
//! owner is down is answered `NO [UNAVAILABLE]` / `-ERR [SYS/TEMP]` at once. An owner whose
//! lease is still valid but that does not answer (stopped, hung) costs one
//! [`PROXY_OPEN_TIMEOUT`]; then it is *suspect* for [`SUSPECT_FOR`], and logins for its users
//! fail at once until its lease shows it again (or the suspicion ends).
//!
//! **Splice.** After the owner's answer to the pre-authentication (relayed to the client
//! under the client's tag), bytes are copied both ways until either side closes, the server
//! shuts down, or the owner's lease runs out. The owner's session enforces every limit and
//! deadline of the logged-in state (IDLE included); the proxying node only moves bytes.

use std::net::IpAddr;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt as _, AsyncReadExt as _, AsyncWriteExt as _, BufReader};
use tokio::net::TcpStream;

use crate::node::Cluster;
use crate::preauth::{EXPORTER_LABEL, client_exporter};

/// Connect, greeting, STARTTLS, handshake and login towards an owner, all together.
pub const PROXY_OPEN_TIMEOUT: Duration = Duration::from_secs(3);
/// Longest line of an owner's answer to the pre-authentication.
const OWNER_LINE_MAX: usize = 8 << 10;
/// Every read or write of a move's IMAP session (`moves.rs`).
const MOVE_IO_TIMEOUT: Duration = Duration::from_secs(60);

impl Cluster {
    /// An IMAP client logged in on `owner` as `user` with our pre-authentication, for a
    /// move (`moves.rs`): with `freeze`, as `cluster-move:<we>`, which the owner admits
    /// only once it froze the user.
    pub async fn connect_for_move(
        &self,
        owner: &directory::NodeInfo,
        user: &str,
        freeze: bool,
    ) -> Result<imap_client::Client, String> {
        let (host, port) = owner
            .imap
            .rsplit_once(':')
            .and_then(|(h, p)| {
                Some((
                    h.trim_start_matches('[').trim_end_matches(']'),
                    p.parse().ok()?,
                ))
            })
            .ok_or_else(|| format!("bad IMAP address {} of node {}", owner.imap, owner.name))?;
        let mut config = imap_client::Config::new(host, port, user, "");
        config.tls = imap_client::Tls::StartTls;
        config.accept_invalid_certs = true;
        config.timeout = MOVE_IO_TIMEOUT;
        config.use_binary = false;
        let here = IpAddr::from([0u8, 0, 0, 0]);
        imap_client::Client::connect_plain_bound(&config, EXPORTER_LABEL, |binding| {
            self.plain_fields(freeze, "imap", user, here, &binding.unwrap_or([0; 32]))
        })
        .await
        .map_err(|e| format!("IMAP to {}: {e}", owner.name))
    }

    /// Opens a pre-authenticated IMAP session for `user` on `owner`. Returns the connection
    /// and the owner's answer to the login, retagged with the client's `tag`.
    pub async fn open_imap(
        &self,
        owner: &directory::NodeInfo,
        user: &str,
        client: IpAddr,
        tag: &str,
    ) -> Result<(Upstream, Vec<u8>), String> {
        let opened = tokio::time::timeout(PROXY_OPEN_TIMEOUT, async {
            let mut plain = Lines::connect(&owner.imap).await?;
            plain.expect_prefix("* OK").await?;
            plain.send(b"M1 STARTTLS\r\n").await?;
            plain.tagged("M1").await?;
            let (mut tls, binding) = self.upgrade(plain, owner).await?;
            let response = self.plain_response("imap", user, client, &binding);
            tls.send(format!("M2 AUTHENTICATE PLAIN {response}\r\n").as_bytes())
                .await?;
            let (untagged, last) = tls.until_tagged("M2").await?;
            let status = last.get(3..).unwrap_or("");
            if !status.starts_with("OK") {
                return Err(format!("the owner refused: {}", last.trim_end()));
            }
            let mut answer = untagged;
            answer.extend_from_slice(tag.as_bytes());
            answer.push(b' ');
            answer.extend_from_slice(status.as_bytes());
            Ok((tls.into_upstream(owner), answer))
        })
        .await;
        self.opened(owner, opened)
    }

    /// Opens a pre-authenticated POP3 session for `user` on `owner`. Returns the connection
    /// and the owner's `+OK` to the login.
    pub async fn open_pop3(
        &self,
        owner: &directory::NodeInfo,
        user: &str,
        client: IpAddr,
    ) -> Result<(Upstream, Vec<u8>), String> {
        let opened = tokio::time::timeout(PROXY_OPEN_TIMEOUT, async {
            let mut plain = Lines::connect(&owner.pop3).await?;
            plain.expect_prefix("+OK").await?;
            plain.send(b"STLS\r\n").await?;
            plain.expect_prefix("+OK").await?;
            let (mut tls, binding) = self.upgrade(plain, owner).await?;
            let response = self.plain_response("pop3", user, client, &binding);
            tls.send(format!("AUTH PLAIN {response}\r\n").as_bytes())
                .await?;
            let line = tls.line().await?;
            if !line.starts_with("+OK") {
                return Err(format!("the owner refused: {}", line.trim_end()));
            }
            Ok((tls.into_upstream(owner), line.into_bytes()))
        })
        .await;
        self.opened(owner, opened)
    }

    /// Opens a pre-authenticated ManageSieve session (RFC 5804) for `user` on `owner`, at
    /// the ManageSieve address it registered. Returns the connection and the owner's `OK` to
    /// the login.
    pub async fn open_managesieve(
        &self,
        owner: &directory::NodeInfo,
        user: &str,
        client: IpAddr,
    ) -> Result<(Upstream, Vec<u8>), String> {
        let Some(address) = owner.managesieve.as_deref() else {
            tracing::warn!(
                event = "cluster_proxy_refused",
                node = %owner.name,
                error = "no ManageSieve address registered (node add --managesieve)"
            );
            return Err(format!(
                "mailbox node {} takes no ManageSieve logins",
                owner.name
            ));
        };
        let opened = tokio::time::timeout(PROXY_OPEN_TIMEOUT, async {
            let mut plain = Lines::connect(address).await?;
            plain.sieve_status().await?;
            plain.send(b"STARTTLS\r\n").await?;
            plain.sieve_status().await?;
            let (mut tls, binding) = self.upgrade(plain, owner).await?;
            // RFC 5804 2.2: the capabilities again after the handshake.
            tls.sieve_status().await?;
            let response = self.plain_response("managesieve", user, client, &binding);
            tls.send(format!("AUTHENTICATE \"PLAIN\" \"{response}\"\r\n").as_bytes())
                .await?;
            let line = tls.sieve_status().await.map_err(|why| {
                format!(
                    "the owner refused: {}",
                    why.trim_start_matches("unexpected answer: ")
                )
            })?;
            Ok((tls.into_upstream(owner), line.into_bytes()))
        })
        .await;
        self.opened(owner, opened)
    }

    fn opened(
        &self,
        owner: &directory::NodeInfo,
        opened: Result<Result<(Upstream, Vec<u8>), String>, tokio::time::error::Elapsed>,
    ) -> Result<(Upstream, Vec<u8>), String> {
        match opened {
            Ok(Ok(done)) => Ok(done),
            Ok(Err(why)) => {
                if why.starts_with("the owner refused") {
                    tracing::warn!(event = "cluster_proxy_refused", node = %owner.name, error = %why);
                } else {
                    self.suspects.suspect(&owner.name);
                    tracing::warn!(event = "cluster_proxy_failed", node = %owner.name, error = %why);
                }
                Err(format!("mailbox node {} is not available", owner.name))
            }
            Err(_) => {
                self.suspects.suspect(&owner.name);
                tracing::warn!(event = "cluster_proxy_failed", node = %owner.name, error = "no answer in time");
                Err(format!("mailbox node {} does not answer", owner.name))
            }
        }
    }

    /// A TLS client connection to another node over `tcp` (its certificate unverified, as
    /// for the pre-authentication; the web view's forwarding, `web_cluster.rs`).
    pub async fn tls_connect(
        &self,
        tcp: TcpStream,
    ) -> Result<tokio_rustls::client::TlsStream<TcpStream>, String> {
        let name = rustls_pki_types::ServerName::try_from("mailstow-node".to_string())
            .map_err(|e| e.to_string())?;
        tokio_rustls::TlsConnector::from(self.tls.clone())
            .connect(name, tcp)
            .await
            .map_err(|e| e.to_string())
    }

    async fn upgrade(
        &self,
        plain: Lines<TcpStream>,
        owner: &directory::NodeInfo,
    ) -> Result<(Lines<tokio_rustls::client::TlsStream<TcpStream>>, [u8; 32]), String> {
        if !plain.reader.buffer().is_empty() {
            // RFC 3207 / 9051 6.2.1: nothing may follow the STARTTLS answer in plaintext.
            return Err("the owner sent data after its STARTTLS answer".into());
        }
        let tcp = plain.reader.into_inner();
        let name = rustls_pki_types::ServerName::try_from(owner.name.clone())
            .or_else(|_| rustls_pki_types::ServerName::try_from("mailstow-node".to_string()))
            .map_err(|e| e.to_string())?;
        let tls = tokio_rustls::TlsConnector::from(self.tls.clone())
            .connect(name, tcp)
            .await
            .map_err(|e| format!("TLS: {e}"))?;
        let binding = client_exporter(tls.get_ref().1).ok_or("no TLS exporter value")?;
        Ok((
            Lines {
                reader: BufReader::new(tls),
            },
            binding,
        ))
    }
}

/// A line-oriented reader/writer for the few lines of a pre-authentication.
struct Lines<S> {
    reader: BufReader<S>,
}

impl Lines<TcpStream> {
    async fn connect(address: &str) -> Result<Lines<TcpStream>, String> {
        let tcp = TcpStream::connect(address)
            .await
            .map_err(|e| format!("connect {address}: {e}"))?;
        let _ = tcp.set_nodelay(true);
        Ok(Lines {
            reader: BufReader::new(tcp),
        })
    }
}

impl<S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin> Lines<S> {
    async fn send(&mut self, bytes: &[u8]) -> Result<(), String> {
        let stream = self.reader.get_mut();
        stream.write_all(bytes).await.map_err(|e| e.to_string())?;
        stream.flush().await.map_err(|e| e.to_string())
    }

    async fn line(&mut self) -> Result<String, String> {
        let mut line = Vec::new();
        let read = (&mut self.reader)
            .take(OWNER_LINE_MAX as u64)
            .read_until(b'\n', &mut line)
            .await
            .map_err(|e| e.to_string())?;
        if read == 0 || !line.ends_with(b"\n") {
            return Err("the owner closed the connection or sent an overlong line".into());
        }
        String::from_utf8(line).map_err(|_| "the owner sent a line that is not UTF-8".into())
    }

    async fn expect_prefix(&mut self, prefix: &str) -> Result<String, String> {
        let line = self.line().await?;
        if line.starts_with(prefix) {
            Ok(line)
        } else {
            Err(format!("unexpected answer: {}", line.trim_end()))
        }
    }

    /// A ManageSieve response (RFC 5804 1.2): lines up to the one starting `OK`, `NO` or
    /// `BYE` (at most a few: the capabilities), which must be `OK`; returns it.
    async fn sieve_status(&mut self) -> Result<String, String> {
        let mut lines = 0;
        loop {
            let line = self.line().await?;
            if line.starts_with("OK") {
                return Ok(line);
            }
            if line.starts_with("NO") || line.starts_with("BYE") {
                return Err(format!("unexpected answer: {}", line.trim_end()));
            }
            lines += 1;
            if lines > 64 {
                return Err("the owner's answer is too long".into());
            }
        }
    }

    /// Lines up to the one tagged `tag`, which must be OK.
    async fn tagged(&mut self, tag: &str) -> Result<(), String> {
        let (_, last) = self.until_tagged(tag).await?;
        if last[tag.len()..].trim_start().starts_with("OK") {
            Ok(())
        } else {
            Err(format!("unexpected answer: {}", last.trim_end()))
        }
    }

    /// The untagged lines (at most a few) and the tagged one.
    async fn until_tagged(&mut self, tag: &str) -> Result<(Vec<u8>, String), String> {
        let mut untagged = Vec::new();
        loop {
            let line = self.line().await?;
            if line.starts_with(tag) && line.as_bytes().get(tag.len()) == Some(&b' ') {
                return Ok((untagged, line));
            }
            if untagged.len() + line.len() > OWNER_LINE_MAX {
                return Err("the owner's answer is too long".into());
            }
            untagged.extend_from_slice(line.as_bytes());
        }
    }
}

impl Lines<tokio_rustls::client::TlsStream<TcpStream>> {
    fn into_upstream(self, owner: &directory::NodeInfo) -> Upstream {
        Upstream {
            // Nothing is buffered: the owner answers the login, then waits for the client.
            stream: self.reader.into_inner(),
            node: owner.name.clone(),
        }
    }
}

/// A pre-authenticated connection to the owner.
pub struct Upstream {
    pub stream: tokio_rustls::client::TlsStream<TcpStream>,
    pub node: String,
}

/// A client connection handed to the owner: what to send each side first, then the splice.
pub struct Handover {
    pub upstream: Upstream,
    /// The owner's answer to the login, for the client.
    pub to_client: Vec<u8>,
    /// What the client sent after its login, for the owner.
    pub to_owner: Vec<u8>,
}
