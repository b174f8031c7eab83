//! Mail handed to the node that owns the recipient (issue 20, the seed's version 2): from the
//! accepting node's queue straight to the owner's LMTP listener, over persistent pooled
//! connections, one reply per recipient.
//!
//! Per message: `MAIL FROM:<s> XORIGIN=<our node>:<queue id>`, one `RCPT TO:<user>
//! XEPOCH=<owner epoch>` per recipient, then the content in one `BDAT <n> LAST` (RFC 3030:
//! no dot-stuffing on either side), all pipelined (RFC 2920) in one write; then the replies:
//! MAIL's, each RCPT's, and after the content one per accepted recipient (RFC 2033 4.2).
//! The owner stores the copies before it answers, refuses (4xx) a recipient routed with a
//! stale epoch, and answers `250` without storing again for a copy it already has from the
//! same origin message, so a retry after a lost reply delivers once (`dedup.rs` there).
//!
//! A connection that fails makes every recipient of its message a temporary failure and is
//! dropped; connections idle longer than [`IDLE_MAX`] are not reused (the owner may have
//! closed them).

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tokio::io::{AsyncBufReadExt as _, AsyncReadExt as _, AsyncWriteExt as _, BufReader};
use tokio::net::TcpStream;

/// Connect and LHLO.
const OPEN_TIMEOUT: Duration = Duration::from_secs(3);
/// A transaction: this, plus a second per [`RATE_MIN`] bytes of content.
const TRANSACTION_TIMEOUT: Duration = Duration::from_secs(30);
const RATE_MIN: u64 = 1 << 20;
/// The owner answers MAIL at once (the store commit comes after the content): a pooled
/// connection to an owner that stopped (open socket, no answer) is given up after this.
const FIRST_REPLY_TIMEOUT: Duration = Duration::from_secs(5);
/// A pooled connection idle longer than this is closed instead of reused.
const IDLE_MAX: Duration = Duration::from_secs(60);
/// Pooled connections per node.
const POOLED_MAX: usize = 32;
/// Longest reply line read from an owner.
const LINE_MAX: usize = 4096;

/// What became of one recipient.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Handed {
    Delivered,
    /// Try again soon: the owner is down, did not answer, or refused for now (4xx).
    Temporary(String),
    /// The owner refused for good (5xx).
    Permanent(String),
}

/// One recipient of a handed-over message: the user and the owner epoch it was routed with.
#[derive(Debug, Clone)]
pub struct PeerRecipient {
    pub user: String,
    pub epoch: i64,
}

/// What delivery threads need to hand copies over: the connections, the runtime to run them
/// on, and which queued messages wait for which node.
pub struct PeerPath {
    pub peers: Peers,
    pub runtime: tokio::runtime::Handle,
    waiting: Mutex<HashMap<String, HashSet<queue::MessageId>>>,
    /// Owners that did not answer a hand-over, skipped for a while (`cluster::Suspects`).
    suspects: cluster::Suspects,
    /// Owners a hand-over could not reach (no connection, or it broke): the prober
    /// (`route::wake_on_return`) tries each until it answers, then wakes its copies.
    unreachable: Mutex<HashSet<String>>,
}

impl PeerPath {
    pub fn new(peers: Peers, runtime: tokio::runtime::Handle) -> PeerPath {
        PeerPath {
            peers,
            runtime,
            waiting: Mutex::new(HashMap::new()),
            suspects: cluster::Suspects::default(),
            unreachable: Mutex::new(HashSet::new()),
        }
    }

    /// A hand-over to `node` failed on the way (`451 4.4.1` no connection or greeting,
    /// `451 4.4.2` the connection broke or went silent), not by the owner's answer.
    pub(crate) fn unreachable(&self, node: &str) {
        self.unreachable
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(node.to_string());
    }

    /// Whether a hand-over could not reach `node` and no probe has reached it since: its
    /// copies wait for the prober instead of each trying (and blocking a delivery thread
    /// for up to `OPEN_TIMEOUT`).
    pub(crate) fn is_unreachable(&self, node: &str) -> bool {
        self.unreachable
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains(node)
    }

    /// The owners a hand-over could not reach since they last answered.
    pub fn unreachable_nodes(&self) -> Vec<String> {
        let unreachable = self.unreachable.lock().unwrap_or_else(|p| p.into_inner());
        unreachable.iter().cloned().collect()
    }

    /// `node` answered again (the prober reached it): no longer suspect or unreachable;
    /// the messages waiting for it, to retry at once.
    pub fn reached(&self, node: &str) -> Vec<queue::MessageId> {
        self.take_waiting(node)
    }

    /// `node` did not answer (connect, greeting or first reply): skip it for a while, so
    /// every batch does not wait for it again.
    pub(crate) fn suspect(&self, node: &str) {
        self.suspects.suspect(node);
    }

    /// Whether `node` failed to answer a moment ago.
    pub(crate) fn is_suspect(&self, node: &str) -> bool {
        self.suspects.is_suspect(node)
    }

    /// Message `id` has a copy waiting for `node`.
    pub(crate) fn waiting(&self, node: &str, id: queue::MessageId) {
        self.waiting
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(node.to_string())
            .or_default()
            .insert(id);
    }

    /// The messages waiting for `node` (which just came back): the server retries them at
    /// once instead of at their next short-schedule attempt.
    pub fn take_waiting(&self, node: &str) -> Vec<queue::MessageId> {
        self.suspects.clear(node);
        self.unreachable
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(node);
        self.waiting
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(node)
            .map(|ids| ids.into_iter().collect())
            .unwrap_or_default()
    }
}

/// Pooled LMTP connections to the other nodes.
pub struct Peers {
    /// Our node name (the `XORIGIN`).
    node: String,
    /// Our host name (LHLO).
    hostname: String,
    idle: Mutex<HashMap<String, Vec<(Connection, Instant)>>>,
    traffic: Traffic,
}

/// What the handovers put on the wire (LMTP bytes, without TCP/IP headers) and how many
/// connections they opened, since the start: `<data_dir>/stats` shows them, so the
/// benchmarks can give bytes between nodes per message (docs/benchmarks.md, issue 20).
#[derive(Debug, Default)]
pub struct Traffic {
    pub sent: AtomicU64,
    pub received: AtomicU64,
    pub connections: AtomicU64,
}

struct Connection {
    reader: BufReader<TcpStream>,
}

impl Peers {
    pub fn new(node: &str, hostname: &str) -> Peers {
        Peers {
            node: node.to_string(),
            hostname: hostname.to_string(),
            idle: Mutex::new(HashMap::new()),
            traffic: Traffic::default(),
        }
    }

    /// Bytes sent and received and connections opened so far.
    pub fn traffic(&self) -> &Traffic {
        &self.traffic
    }

    fn checkout(&self, address: &str) -> Option<Connection> {
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        let pool = idle.get_mut(address)?;
        while let Some((connection, since)) = pool.pop() {
            if since.elapsed() < IDLE_MAX {
                return Some(connection);
            }
        }
        None
    }

    fn checkin(&self, address: &str, connection: Connection) {
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        let pool = idle.entry(address.to_string()).or_default();
        if pool.len() < POOLED_MAX {
            pool.push((connection, Instant::now()));
        }
    }

    /// Hands a message to the owner at `address` (its LMTP listener); one outcome per
    /// recipient, in order. `origin_id` names the message on this node for good (the
    /// owner's duplicate check).
    pub async fn hand_over(
        &self,
        address: &str,
        origin_id: &str,
        sender: &str,
        recipients: &[PeerRecipient],
        content: &[u8],
    ) -> Vec<Handed> {
        let reused = self.checkout(address);
        let fresh = reused.is_none();
        let mut connection = match reused {
            Some(connection) => connection,
            None => match self.open(address).await {
                Ok(connection) => connection,
                Err(why) => return vec![Handed::Temporary(why); recipients.len()],
            },
        };
        let limit = TRANSACTION_TIMEOUT + Duration::from_secs(content.len() as u64 / RATE_MIN);
        let mut result = tokio::time::timeout(
            limit,
            self.transaction(&mut connection, origin_id, sender, recipients, content),
        )
        .await
        .unwrap_or_else(|_| Err("no answer in time".to_string()));
        // A pooled connection the owner closed while idle: once more on a fresh one (nothing
        // was stored, since no reply came).
        if !fresh && matches!(&result, Err(why) if why.starts_with("closed")) {
            connection = match self.open(address).await {
                Ok(connection) => connection,
                Err(why) => return vec![Handed::Temporary(why); recipients.len()],
            };
            result = tokio::time::timeout(
                limit,
                self.transaction(&mut connection, origin_id, sender, recipients, content),
            )
            .await
            .unwrap_or_else(|_| Err("no answer in time".to_string()));
        }
        match result {
            Ok(outcomes) => {
                self.checkin(address, connection);
                outcomes
            }
            Err(why) => {
                vec![Handed::Temporary(format!("451 4.4.2 {address}: {why}")); recipients.len()]
            }
        }
    }

    async fn open(&self, address: &str) -> Result<Connection, String> {
        let opened = tokio::time::timeout(OPEN_TIMEOUT, async {
            let tcp = TcpStream::connect(address)
                .await
                .map_err(|e| format!("451 4.4.1 {address}: {e}"))?;
            let _ = tcp.set_nodelay(true);
            self.traffic.connections.fetch_add(1, Ordering::Relaxed);
            let mut connection = Connection {
                reader: BufReader::new(tcp),
            };
            let greeting = self.reply(&mut connection).await?;
            if greeting.code != 220 {
                return Err(format!("451 4.4.1 {address}: greeting {}", greeting.text));
            }
            self.write(
                &mut connection,
                format!("LHLO {}\r\n", self.hostname).as_bytes(),
            )
            .await?;
            let lhlo = self.reply(&mut connection).await?;
            if lhlo.code != 250
                || !lhlo.text.contains("XMAILSTOW-ROUTE")
                || !lhlo.text.contains("CHUNKING")
            {
                return Err(format!(
                    "451 4.4.1 {address}: not a mailstow cluster node's LMTP listener"
                ));
            }
            Ok(connection)
        })
        .await;
        opened.unwrap_or_else(|_| Err(format!("451 4.4.1 {address}: no answer in time")))
    }

    async fn transaction(
        &self,
        connection: &mut Connection,
        origin_id: &str,
        sender: &str,
        recipients: &[PeerRecipient],
        content: &[u8],
    ) -> Result<Vec<Handed>, String> {
        let mut out = format!(
            "MAIL FROM:<{sender}> XORIGIN={}:{origin_id} BODY=BINARYMIME\r\n",
            self.node
        );
        for recipient in recipients {
            out.push_str(&format!(
                "RCPT TO:<{}> XEPOCH={}\r\n",
                recipient.user, recipient.epoch
            ));
        }
        out.push_str(&format!("BDAT {} LAST\r\n", content.len()));
        let mut bytes = out.into_bytes();
        bytes.extend_from_slice(content);
        self.write(connection, &bytes).await?;
        let mail = tokio::time::timeout(FIRST_REPLY_TIMEOUT, self.reply(connection))
            .await
            .map_err(|_| "no answer in time".to_string())??;
        let mut rcpt = Vec::with_capacity(recipients.len());
        for _ in recipients {
            rcpt.push(self.reply(connection).await?);
        }
        let accepted: Vec<usize> = (0..recipients.len())
            .filter(|&i| mail.code == 250 && rcpt[i].code == 250)
            .collect();
        let mut outcomes: Vec<Handed> = rcpt
            .iter()
            .map(|reply| {
                if mail.code != 250 {
                    mail.outcome()
                } else {
                    reply.outcome()
                }
            })
            .collect();
        if accepted.is_empty() {
            // The content was read and refused in one reply (503 or the like).
            self.reply(connection).await?;
            return Ok(outcomes);
        }
        for i in accepted {
            outcomes[i] = self.reply(connection).await?.outcome();
        }
        Ok(outcomes)
    }

    async fn write(&self, connection: &mut Connection, bytes: &[u8]) -> Result<(), String> {
        connection.write(bytes).await?;
        self.traffic
            .sent
            .fetch_add(bytes.len() as u64, Ordering::Relaxed);
        Ok(())
    }

    async fn reply(&self, connection: &mut Connection) -> Result<Reply, String> {
        let reply = connection.reply().await?;
        self.traffic
            .received
            .fetch_add(reply.wire_bytes, Ordering::Relaxed);
        Ok(reply)
    }
}

struct Reply {
    code: u16,
    /// Every line's text, joined by newlines.
    text: String,
    /// The reply's bytes as received.
    wire_bytes: u64,
}

impl Reply {
    fn outcome(&self) -> Handed {
        let line = format!("{} {}", self.code, self.text.replace('\n', " "));
        match self.code {
            200..=299 => Handed::Delivered,
            500..=599 => Handed::Permanent(line),
            _ => Handed::Temporary(line),
        }
    }
}

impl Connection {
    async fn write(&mut self, bytes: &[u8]) -> Result<(), String> {
        let stream = self.reader.get_mut();
        stream
            .write_all(bytes)
            .await
            .map_err(|e| format!("closed: {e}"))?;
        stream.flush().await.map_err(|e| format!("closed: {e}"))
    }

    /// One reply, multi-line replies joined (RFC 5321 4.2.1).
    async fn reply(&mut self) -> Result<Reply, String> {
        let mut text = String::new();
        let mut wire_bytes = 0;
        loop {
            let mut line = Vec::new();
            let read = (&mut self.reader)
                .take(LINE_MAX as u64)
                .read_until(b'\n', &mut line)
                .await
                .map_err(|e| format!("closed: {e}"))?;
            if read == 0 {
                return Err("closed by the owner".into());
            }
            wire_bytes += read as u64;
            let line = String::from_utf8_lossy(&line);
            let line = line.trim_end();
            let code: u16 = line
                .get(..3)
                .and_then(|c| c.parse().ok())
                .ok_or_else(|| format!("bad reply line {line:?}"))?;
            if !text.is_empty() {
                text.push('\n');
            }
            text.push_str(line.get(4..).unwrap_or(""));
            if line.as_bytes().get(3) != Some(&b'-') {
                return Ok(Reply {
                    code,
                    text,
                    wire_bytes,
                });
            }
        }
    }
}
