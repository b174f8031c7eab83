//! The cluster seen from one node: who we are, the secret the nodes share, and IMAP and POP3
//! sessions proxied to the node that owns the user (issue 20; the seed's interface module
//! handing a client to the mailbox's server).
//!
//! **Pre-authentication.** A node that accepted a client's login (the password checked
//! against its directory cache, throttled like any login) opens a connection to the owner's
//! IMAP or POP3 port, upgrades it with STARTTLS, and logs in with `AUTHENTICATE PLAIN` (IMAP)
//! or `AUTH PLAIN` (POP3) as authorization identity the user, authentication identity
//! `cluster:<our node>`, and as password a token: `v1.<unix seconds>.<client address>.<mac>`,
//! the MAC a keyed BLAKE3 of those fields, the user, the protocol and the TLS exporter value
//! of that very connection (RFC 5705 / RFC 9266's `tls-exporter`), under a key derived from
//! the cluster secret. The owner checks the MAC against its own side of the same TLS
//! connection and the time (±[`TOKEN_SKEW_MAX`]). So the user's password never travels
//! again, a token is useless on any other connection (a relay in the middle has two TLS
//! sessions with two exporter values), and nothing but a holder of the secret can make one.
//! The owner's certificate is not verified (the nodes' certificates are often self-signed):
//! an active attacker on the nodes' network could pose as an owner towards a proxying node,
//! not as a proxying node towards an owner.
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

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use tokio::io::{AsyncBufReadExt as _, AsyncReadExt as _, AsyncWriteExt as _, BufReader};
use tokio::net::TcpStream;

/// The `authcid` prefix of a node's pre-authentication.
const AUTHCID_PREFIX: &str = "cluster:";
/// The `authcid` prefix of a move's pre-authentication (`moves.rs`): admitted only once the
/// owner froze the user; its token is MACed for the protocol `<proto>-move`.
pub(crate) const MOVE_AUTHCID_PREFIX: &str = "cluster-move:";
/// How far a token's time may be from ours.
pub(crate) const TOKEN_SKEW_MAX: u64 = 120;
/// Connect, greeting, STARTTLS, handshake and login towards an owner, all together.
pub(crate) const PROXY_OPEN_TIMEOUT: Duration = Duration::from_secs(3);
/// How long an owner that did not answer is not tried again (unless its lease is renewed).
pub(crate) const SUSPECT_FOR: Duration = Duration::from_secs(5);
/// Longest line of an owner's answer to the pre-authentication.
const OWNER_LINE_MAX: usize = 8 << 10;
/// How often a node renews its lease, and how long a lease lasts: a node that stops
/// renewing is down for every other node within `LEASE_TTL` (plus their 1 s poll).
pub(crate) const LEASE_RENEW: Duration = Duration::from_secs(2);
pub(crate) const LEASE_TTL: Duration = Duration::from_secs(6);
/// Every read or write of a move's IMAP session (`moves.rs`).
const MOVE_IO_TIMEOUT: Duration = Duration::from_secs(60);
/// The TLS exporter label (RFC 5705 4: labels beginning with "EXPERIMENTAL").
const EXPORTER_LABEL: &[u8] = b"EXPERIMENTAL-mailstow-cluster-preauth";

/// This node in a cluster (`[cluster]` of the configuration).
#[derive(Clone)]
pub struct ClusterConfig {
    /// Our name in the directory's `nodes` table.
    pub node: String,
    /// The secret every node shares (the contents of `secret_file`).
    pub secret: Vec<u8>,
}

impl std::fmt::Debug for ClusterConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterConfig")
            .field("node", &self.node)
            .field("secret", &format_args!("<{} bytes>", self.secret.len()))
            .finish()
    }
}

/// The cluster state of a running node.
pub(crate) struct Cluster {
    pub(crate) node: String,
    key: [u8; 32],
    /// Owners that did not answer, and until when they are not tried.
    suspects: Mutex<HashMap<String, Instant>>,
    tls: Arc<rustls::ClientConfig>,
}

/// Where a logged-in user's mail is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Home {
    /// Here.
    Local,
    /// On this node, which is up (as far as we know).
    Node(directory::NodeInfo),
    /// On a node that is down, or does not answer: the text for the client.
    Unavailable(String),
}

impl Cluster {
    pub(crate) fn new(config: &ClusterConfig, tls: Arc<rustls::ClientConfig>) -> Cluster {
        Cluster {
            node: config.node.clone(),
            key: blake3::derive_key("mailstow cluster pre-authentication v1", &config.secret),
            suspects: Mutex::new(HashMap::new()),
            tls,
        }
    }

    /// Where `user` (canonical) lives, from the directory cache (no I/O).
    pub(crate) fn home(&self, directory: &directory::Directory, user: &str) -> Home {
        let cache = directory.cache();
        let Some(owner) = cache.owner(user) else {
            return Home::Local;
        };
        let Some(node) = owner.node else {
            // In a cluster every user has a node (the first node added takes those a single
            // server had); one without is nowhere's, not everyone's.
            return Home::Unavailable("mailbox has no node".into());
        };
        if node == self.node {
            return Home::Local;
        }
        if owner.frozen {
            return Home::Unavailable("mailbox is being moved, try again shortly".into());
        }
        let Some(info) = cache.node(&node) else {
            return Home::Unavailable(format!("mailbox node {node} is unknown"));
        };
        if !info.up {
            return Home::Unavailable(format!("mailbox node {node} is down"));
        }
        if self.is_suspect(&node) {
            return Home::Unavailable(format!("mailbox node {node} does not answer"));
        }
        Home::Node(info)
    }

    /// Whether `ip` is one of the other nodes' (their LMTP, IMAP or POP3 address), so a
    /// connection from it is a proxied session or a hand-over, not one client.
    pub(crate) fn is_node_address(&self, directory: &directory::Directory, ip: IpAddr) -> bool {
        directory.cache().nodes().iter().any(|node| {
            let web = node.web.as_ref();
            [Some(&node.lmtp), Some(&node.imap), Some(&node.pop3), web]
                .into_iter()
                .flatten()
                .any(|address| {
                    address
                        .parse::<std::net::SocketAddr>()
                        .is_ok_and(|a| a.ip() == ip)
                })
        })
    }

    fn is_suspect(&self, node: &str) -> bool {
        let mut suspects = self.suspects.lock().unwrap_or_else(|p| p.into_inner());
        match suspects.get(node) {
            Some(until) if *until > Instant::now() => true,
            Some(_) => {
                suspects.remove(node);
                false
            }
            None => false,
        }
    }

    pub(crate) fn suspect(&self, node: &str) {
        self.suspects
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(node.to_string(), Instant::now() + SUSPECT_FOR);
    }

    pub(crate) fn mac(
        &self,
        proto: &str,
        user: &str,
        from_node: &str,
        ip: &str,
        at: u64,
        binding: &[u8],
    ) -> blake3::Hash {
        let mut hasher = blake3::Hasher::new_keyed(&self.key);
        for field in [
            proto.as_bytes(),
            user.as_bytes(),
            from_node.as_bytes(),
            ip.as_bytes(),
        ] {
            hasher.update(&(field.len() as u64).to_le_bytes());
            hasher.update(field);
        }
        hasher.update(&at.to_le_bytes());
        hasher.update(binding);
        hasher.finalize()
    }

    /// The SASL PLAIN response that logs `user` in on an owner over the TLS connection whose
    /// exporter value is `binding`.
    fn plain_response(&self, proto: &str, user: &str, client: IpAddr, binding: &[u8]) -> String {
        let (authzid, authcid, token) = self.plain_fields(false, proto, user, client, binding);
        let plain = format!("{authzid}\0{authcid}\0{token}");
        base64::engine::general_purpose::STANDARD.encode(plain)
    }

    /// (authzid, authcid, token) of a pre-authentication, or with `moving` of a move's.
    fn plain_fields(
        &self,
        moving: bool,
        proto: &str,
        user: &str,
        client: IpAddr,
        binding: &[u8],
    ) -> (String, String, String) {
        let at = unix_now();
        let ip = client.to_string();
        let (proto, prefix) = if moving {
            (format!("{proto}-move"), MOVE_AUTHCID_PREFIX)
        } else {
            (proto.to_string(), AUTHCID_PREFIX)
        };
        let mac = self.mac(&proto, user, &self.node, &ip, at, binding);
        (
            user.to_string(),
            format!("{prefix}{}", self.node),
            format!("v1.{at}.{ip}.{}", mac.to_hex()),
        )
    }

    /// An IMAP client logged in on `owner` as `user` with our pre-authentication, for a
    /// move (`moves.rs`): with `freeze`, as `cluster-move:<we>`, which the owner admits
    /// only once it froze the user.
    pub(crate) async fn connect_for_move(
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

    /// Checks a node's pre-authentication (an AUTH event whose `username` is
    /// `cluster:<node>`): `Some(Ok((user, client address)))` if it is valid on this
    /// connection, `Some(Err(why))` if it is a pre-authentication but not a valid one, `None`
    /// if it is an ordinary login.
    pub(crate) fn check_preauth(
        &self,
        proto: &str,
        authzid: &str,
        username: &str,
        password: &str,
        binding: Option<[u8; 32]>,
    ) -> Option<Result<(String, IpAddr), &'static str>> {
        let (from_node, proto) = match username.strip_prefix(MOVE_AUTHCID_PREFIX) {
            Some(node) => (node, format!("{proto}-move")),
            None => (username.strip_prefix(AUTHCID_PREFIX)?, proto.to_string()),
        };
        let proto = proto.as_str();
        Some((|| {
            let binding = binding.ok_or("pre-authentication needs TLS")?;
            let mut parts = password.splitn(4, '.');
            let (Some("v1"), Some(at), Some(_), Some(_)) =
                (parts.next(), parts.next(), parts.next(), parts.next())
            else {
                return Err("malformed token");
            };
            // The address may itself contain dots: the MAC is the last field.
            let rest = &password[3 + at.len() + 1..];
            let (ip, mac) = rest.rsplit_once('.').ok_or("malformed token")?;
            let at: u64 = at.parse().map_err(|_| "malformed token")?;
            if unix_now().abs_diff(at) > TOKEN_SKEW_MAX {
                return Err("token too old or from the future");
            }
            let client: IpAddr = ip.parse().map_err(|_| "malformed token")?;
            let mac = blake3::Hash::from_hex(mac).map_err(|_| "malformed token")?;
            let user = authzid.to_ascii_lowercase();
            // blake3::Hash compares in constant time.
            if mac != self.mac(proto, &user, from_node, ip, at, &binding) {
                return Err("bad token");
            }
            Ok((user, client))
        })())
    }

    /// Opens a pre-authenticated IMAP session for `user` on `owner`. Returns the connection
    /// and the owner's answer to the login, retagged with the client's `tag`.
    pub(crate) async fn open_imap(
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
    pub(crate) async fn open_pop3(
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
                    self.suspect(&owner.name);
                    tracing::warn!(event = "cluster_proxy_failed", node = %owner.name, error = %why);
                }
                Err(format!("mailbox node {} is not available", owner.name))
            }
            Err(_) => {
                self.suspect(&owner.name);
                tracing::warn!(event = "cluster_proxy_failed", node = %owner.name, error = "no answer in time");
                Err(format!("mailbox node {} does not answer", owner.name))
            }
        }
    }

    /// A TLS client connection to another node over `tcp` (its certificate unverified, as
    /// for the pre-authentication; the web view's forwarding, `web_cluster.rs`).
    pub(crate) async fn tls_connect(
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

/// The TLS exporter value both ends of a pre-authentication compute: the owner's side.
pub(crate) fn server_exporter(connection: &rustls::ServerConnection) -> Option<[u8; 32]> {
    connection
        .export_keying_material([0u8; 32], EXPORTER_LABEL, None)
        .ok()
}

/// The proxying node's side.
fn client_exporter(connection: &rustls::ClientConnection) -> Option<[u8; 32]> {
    connection
        .export_keying_material([0u8; 32], EXPORTER_LABEL, None)
        .ok()
}

pub(crate) fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
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
pub(crate) struct Upstream {
    pub(crate) stream: tokio_rustls::client::TlsStream<TcpStream>,
    pub(crate) node: String,
}

/// A client connection handed to the owner: what to send each side first, then the splice.
pub(crate) struct Handover {
    pub(crate) upstream: Upstream,
    /// The owner's answer to the login, for the client.
    pub(crate) to_client: Vec<u8>,
    /// What the client sent after its login, for the owner.
    pub(crate) to_owner: Vec<u8>,
}

/// How often a splice looks at the owner's lease.
const LEASE_CHECK: Duration = Duration::from_secs(1);

/// Copies bytes both ways until either side closes, the server shuts down, or the owner's
/// lease runs out.
pub(crate) async fn splice(
    conn: &mut crate::driver::Conn,
    handover: Handover,
    shutdown: &mut tokio::sync::watch::Receiver<bool>,
) {
    let Handover {
        mut upstream,
        to_client,
        to_owner,
    } = handover;
    conn.out.extend_from_slice(&to_client);
    if conn.flush().await.is_err() {
        return;
    }
    if !to_owner.is_empty() && upstream.stream.write_all(&to_owner).await.is_err() {
        return;
    }
    let directory = conn.ctx.directory.clone();
    let node = upstream.node.clone();
    let owner_down = async {
        let mut tick = tokio::time::interval(LEASE_CHECK);
        loop {
            tick.tick().await;
            if directory.cache().node(&node).is_none_or(|n| !n.up) {
                return;
            }
        }
    };
    tokio::select! {
        _ = tokio::io::copy_bidirectional(&mut conn.stream, &mut upstream.stream) => {}
        () = owner_down => {
            tracing::info!(event = "cluster_proxy_closed", node = %node, reason = "owner down");
        }
        () = crate::conn::stopping(shutdown) => {}
    }
    let _ = tokio::time::timeout(Duration::from_secs(1), upstream.stream.shutdown()).await;
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn cluster(node: &str, secret: &[u8]) -> Cluster {
        crate::tls::install_provider();
        let config = rustls::ClientConfig::builder()
            .with_root_certificates(rustls::RootCertStore::empty())
            .with_no_client_auth();
        Cluster::new(
            &ClusterConfig {
                node: node.into(),
                secret: secret.to_vec(),
            },
            Arc::new(config),
        )
    }

    fn parts(response: &str) -> (String, String, String) {
        let plain = base64::engine::general_purpose::STANDARD
            .decode(response)
            .unwrap();
        let plain = String::from_utf8(plain).unwrap();
        let mut fields = plain.split('\0').map(str::to_string);
        (
            fields.next().unwrap(),
            fields.next().unwrap(),
            fields.next().unwrap(),
        )
    }

    #[test]
    fn a_token_opens_only_its_own_connection_user_and_protocol() {
        let front = cluster("n1", b"shared secret");
        let owner = cluster("n2", b"shared secret");
        let ip: IpAddr = "2001:db8::7".parse().unwrap();
        let binding = [7u8; 32];
        let (authzid, authcid, token) =
            parts(&front.plain_response("imap", "a@example.org", ip, &binding));
        assert_eq!(authcid, "cluster:n1");
        let check = |proto, authzid: &str, binding| {
            owner.check_preauth(proto, authzid, &authcid, &token, binding)
        };
        assert_eq!(
            check("imap", &authzid, Some(binding)),
            Some(Ok(("a@example.org".to_string(), ip)))
        );
        assert_eq!(
            check("imap", &authzid, Some([8u8; 32])),
            Some(Err("bad token"))
        );
        assert_eq!(
            check("pop3", &authzid, Some(binding)),
            Some(Err("bad token"))
        );
        assert_eq!(
            check("imap", "b@example.org", Some(binding)),
            Some(Err("bad token"))
        );
        assert_eq!(
            check("imap", &authzid, None),
            Some(Err("pre-authentication needs TLS"))
        );
        // Another secret.
        let stranger = cluster("n2", b"another secret");
        assert_eq!(
            stranger.check_preauth("imap", &authzid, &authcid, &token, Some(binding)),
            Some(Err("bad token"))
        );
        // An ordinary login is not a pre-authentication.
        assert_eq!(
            owner.check_preauth("imap", "", "a@example.org", "pw", None),
            None
        );
        // Garbage.
        for bad in [
            "",
            "v1",
            "v1.x.1.2.3.4.ab",
            "v2.1.1.1.1.1.ab",
            "v1.1.1.1.1.1",
        ] {
            assert!(matches!(
                owner.check_preauth("imap", "a@example.org", "cluster:n1", bad, Some(binding)),
                Some(Err(_))
            ));
        }
    }

    #[test]
    fn a_move_token_is_only_a_move_token() {
        let target = cluster("n2", b"shared secret");
        let owner = cluster("n1", b"shared secret");
        let ip: IpAddr = "0.0.0.0".parse().unwrap();
        let binding = [3u8; 32];
        let (authzid, authcid, token) = target.plain_fields(true, "imap", "u@x", ip, &binding);
        assert_eq!(authcid, "cluster-move:n2");
        assert_eq!(
            owner.check_preauth("imap", &authzid, &authcid, &token, Some(binding)),
            Some(Ok(("u@x".to_string(), ip)))
        );
        // The same token under the proxy's authcid, or a proxy's token under the move's.
        assert_eq!(
            owner.check_preauth("imap", &authzid, "cluster:n2", &token, Some(binding)),
            Some(Err("bad token"))
        );
        let (_, _, proxy) = target.plain_fields(false, "imap", "u@x", ip, &binding);
        assert_eq!(
            owner.check_preauth("imap", &authzid, &authcid, &proxy, Some(binding)),
            Some(Err("bad token"))
        );
    }
}
