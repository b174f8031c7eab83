//! This node in a cluster: who we are, the secret the nodes share, and where a user's
//! mailbox is (here, on a node that is up, or unavailable), from the directory cache and
//! the leases it holds.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use crate::suspects::Suspects;

/// How often a node renews its lease, and how long a lease lasts: a node that stops
/// renewing is down for every other node within `LEASE_TTL` (plus their 1 s poll).
pub const LEASE_RENEW: Duration = Duration::from_secs(2);
pub const LEASE_TTL: Duration = Duration::from_secs(6);

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
pub struct Cluster {
    pub node: String,
    /// The key of pre-authentication tokens and forwarded web requests, from the secret.
    pub(crate) key: [u8; 32],
    /// Owners that did not answer a proxied login, and until when they are not tried.
    pub(crate) suspects: Suspects,
    /// How this node connects to another node's TLS (its certificate unverified: the nodes'
    /// certificates are often self-signed).
    pub(crate) tls: Arc<rustls::ClientConfig>,
    /// This node may not serve its own users: its lease lapsed by its own clock, or another
    /// machine took it over (docs/replication.md, "Failover").
    fenced: std::sync::atomic::AtomicBool,
}

/// Where a logged-in user's mail is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Home {
    /// Here.
    Local,
    /// On this node, which is up (as far as we know).
    Node(Box<directory::NodeInfo>),
    /// On a node that is down, or does not answer: the text for the client.
    Unavailable(String),
}

impl Cluster {
    pub fn new(config: &ClusterConfig, tls: Arc<rustls::ClientConfig>) -> Cluster {
        Cluster {
            node: config.node.clone(),
            key: blake3::derive_key("mailstow cluster pre-authentication v1", &config.secret),
            suspects: Suspects::default(),
            tls,
            fenced: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// Where `user` (canonical) lives, from the directory cache (no I/O).
    pub fn home(&self, directory: &directory::Directory, user: &str) -> Home {
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
            if self.is_fenced() {
                return Home::Unavailable(format!(
                    "node {node} may not serve now (its lease has lapsed), try again shortly"
                ));
            }
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
        if self.suspects.is_suspect(&node) {
            return Home::Unavailable(format!("mailbox node {node} does not answer"));
        }
        Home::Node(Box::new(info))
    }

    /// Whether `ip` is one of the other nodes' (their LMTP, IMAP, POP3, web or ManageSieve
    /// address), so a
    /// connection from it is a proxied session or a hand-over, not one client.
    pub fn is_node_address(&self, directory: &directory::Directory, ip: IpAddr) -> bool {
        directory.cache().nodes().iter().any(|node| {
            let web = node.web.as_ref();
            let managesieve = node.managesieve.as_ref();
            [
                Some(&node.lmtp),
                Some(&node.imap),
                Some(&node.pop3),
                web,
                managesieve,
            ]
            .into_iter()
            .flatten()
            .any(|address| {
                address
                    .parse::<std::net::SocketAddr>()
                    .is_ok_and(|a| a.ip() == ip)
            })
        })
    }

    /// Fences this node (`true`): its own users are told it is unavailable until lifted.
    pub fn set_fenced(&self, fenced: bool) {
        self.fenced
            .store(fenced, std::sync::atomic::Ordering::SeqCst);
    }

    pub fn is_fenced(&self) -> bool {
        self.fenced.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// `node` did not answer a proxied login: its users are told at once for a while.
    pub fn suspect(&self, node: &str) {
        self.suspects.suspect(node);
    }

    /// The nodes whose users are told at once that they do not answer.
    pub fn suspected(&self) -> Vec<String> {
        self.suspects.nodes()
    }

    /// `node` answered (a probe reached it): its users' logins are proxied again at once,
    /// not after `SUSPECT_FOR`.
    pub fn reached(&self, node: &str) {
        self.suspects.clear(node);
    }
}
