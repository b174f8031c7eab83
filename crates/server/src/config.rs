//! Everything the connection shell (and the node around it) is configured with, resolved from
//! the configuration file and the command line by the CLI; the embedded defaults; and the
//! check of what a start would refuse.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Result;

use crate::service::Service;
use crate::throttle::ThrottleConfig;
use crate::tls::{self, TlsSource};

/// Direct delivery to recipient domains' exchangers.
#[derive(Clone, Debug)]
pub struct Direct {
    /// Name servers to ask (`ip:port`); empty: the system's (`/etc/resolv.conf`).
    pub dns_servers: Vec<SocketAddr>,
    /// The exchangers' SMTP port: 25 on the internet; another only on test networks.
    pub mx_port: u16,
    /// MTA-STS and DANE for the sessions to exchangers (RFC 8461, RFC 7672).
    pub transport: transport_policy::Config,
}

/// Everything `serve` needs, resolved from the configuration file and the command line.
#[derive(Clone, Debug)]
pub struct ServerConfig {
    pub hostname: String,
    pub data_dir: PathBuf,
    pub listeners: Vec<(Service, SocketAddr)>,
    pub tls: TlsSource,
    /// Allow AUTH, USER/PASS on connections without TLS (tests, trusted networks).
    pub auth_without_tls: bool,
    pub connections_max: usize,
    pub connections_per_ip_max: usize,
    pub message_bytes_max: u64,
    pub recipients_max: usize,
    /// IMAP sessions one user may have open at once.
    pub imap_sessions_per_user_max: usize,
    /// Memory for the header fields IMAP SEARCH keeps (all sessions together).
    pub imap_header_cache_bytes_max: usize,
    /// Memory for folder views SELECT shares between sessions.
    pub imap_view_cache_bytes_max: usize,
    /// Failed-login limits per user and address, per address, per network.
    pub throttle: ThrottleConfig,
    /// Password verifications at once, the argon2 memory one may use, and how many may
    /// wait (see `directory::Options`).
    pub hash_concurrency_max: usize,
    pub hash_memory_bytes_max: usize,
    pub hash_queue_max: usize,
    /// The shortest new password, in characters (see `directory::Options`).
    pub password_length_min: usize,
    /// Users' Sieve rules: the bounds of a script and of one run (`[server] sieve_*_max`,
    /// docs/limits.md "Sieve"), and scripts per user.
    pub sieve: sieve::Limits,
    pub sieve_scripts_max: usize,
    /// Message bytes held in memory by every connection together (SMTP/LMTP message
    /// content, IMAP literals). Past it, SMTP answers 452 4.3.1 and IMAP `NO [LIMIT]`.
    pub inflight_bytes_max: u64,
    /// Free space kept on the data directory's file system (docs/limits.md): below it SMTP
    /// and LMTP answer 452 4.3.1 at MAIL and RCPT, IMAP APPEND `NO`, delivery pauses, and
    /// `/healthz` answers 503; all of it ends by itself when space comes back.
    pub disk_reserve_bytes: u64,
    /// Total time from connect to a successful login (submission, POP3, IMAP, ManageSieve).
    pub login_deadline: Duration,
    /// Total time for one command line (and an IMAP command's literals) to arrive, from
    /// its first byte.
    pub command_deadline: Duration,
    /// Total time for a message transfer (SMTP DATA, BDAT; IMAP literals earn time the same
    /// way): this, plus one second per `transfer_rate_min` bytes received, at most
    /// `transfer_deadline_max`.
    pub transfer_deadline: Duration,
    pub transfer_rate_min: u64,
    pub transfer_deadline_max: Duration,
    /// The longest IMAP IDLE (RFC 9051 6.3.13).
    pub idle_deadline: Duration,
    /// Name servers (`ip:port`) for SPF/DKIM/DMARC and direct delivery; empty: the system's
    /// (`/etc/resolv.conf`).
    pub dns_servers: Vec<SocketAddr>,
    /// Check SPF, DKIM and DMARC of mail arriving on the MX port and record them in an
    /// Authentication-Results header field (RFC 8601).
    pub sender_checks: bool,
    /// Refuse (550 5.7.1) mail whose DMARC check fails under a `p=reject` policy (RFC 7489
    /// 6.6.2); off: only record the result.
    pub dmarc_enforce: bool,
    /// Refuse unauthenticated MX mail naming one of our domains in MAIL FROM or From: unless
    /// SPF or DKIM passes for that domain.
    pub local_sender_check: bool,
    /// Unknown recipients an SMTP session may name before each further RCPT waits
    /// `tarpit_delay`; at twice as many the session is closed (421 4.7.0).
    pub recipients_unknown_max: usize,
    pub tarpit_delay: Duration,
    pub delivery_threads: usize,
    /// The smarthost for mail to other domains. Without one, `direct` decides.
    pub relay: Option<delivery::Relay>,
    /// Deliver mail for other domains to their MX hosts (DNS); without a relay and without
    /// this, such mail waits in the deferred queue.
    pub direct: Option<Direct>,
    pub queue: queue::QueueConfig,
    pub store: store::StoreConfig,
    /// The spam filter, blocklists and milters (`[spam]`, docs/spam.md).
    pub spam: filter::Config,
    /// Serve Prometheus metrics at `/metrics` and a health check at `/healthz` here.
    pub metrics: Option<SocketAddr>,
    /// Serve the web view here (`[server] web`; default 127.0.0.1:8080).
    pub web: Option<SocketAddr>,
    /// `[server] https`: the web view, the autoconfiguration documents and the MTA-STS
    /// policy over TLS, and ACME's TLS-ALPN-01 challenges (RFC 8737); `None`: off.
    pub https: Option<SocketAddr>,
    /// `[server] http`: ACME's HTTP-01 challenges (RFC 8555 8.3) and Thunderbird's
    /// autoconfig; everything else is redirected to HTTPS. `None`: off.
    pub http: Option<SocketAddr>,
    /// The MTA-STS policy we publish (RFC 8461); `None`: none.
    pub mta_sts: Option<MtaSts>,
    /// Certificates by ACME (`[acme]`, docs/certificates.md): with it, [`ServerConfig::tls`]
    /// is [`TlsSource::Acme`]. `None`: no ACME.
    pub acme: Option<acme::Config>,
    /// The web view over HTTPS with the server's certificate (`[server] web_tls`).
    pub web_tls: bool,
    /// Logged-in web sessions at once (`web_sessions_max`).
    pub web_sessions_max: usize,
    /// The largest web request body (`web_request_bytes_max`).
    pub web_request_bytes_max: usize,
    /// Web connections at once (`web_connections_max`).
    pub web_connections_max: usize,
    /// IMAP connections compressed at once (`imap_compress_connections_max`, RFC 4978):
    /// each holds a DEFLATE compressor and decompressor, about 300 KiB.
    pub imap_compress_connections_max: usize,
    /// Where mail to `postmaster@` a local domain goes when the domain has neither a user
    /// nor an alias of that name (RFC 5321 4.5.1); `None`: the domain's first user.
    pub postmaster: Option<String>,
    /// Where the directory is; `None`: `directory.db` (SQLite) in the data directory.
    pub directory: Option<directory::Location>,
    /// This node of a cluster (needs a shared PostgreSQL directory); `None`: a single node.
    pub cluster: Option<cluster::ClusterConfig>,
    /// Copies handed over by other nodes whose keys this node's store keeps (docs/cluster.md,
    /// "Duplicates"); the oldest are forgotten past this.
    pub cluster_delivered_max: usize,
    /// Copies of each node's engines' files (`[cluster] replicas`): 2 streams every change
    /// to a partner before it is acknowledged (docs/replication.md).
    pub cluster_replicas: u8,
    /// Where this node's replication listener binds (`[cluster] replication`), so its
    /// partner can stream to it.
    pub cluster_replication: Option<String>,
    /// This process serves another node's files on its replica's machine after a take-over
    /// (`serve --host-node NODE`): it registers the addresses it bound for that node.
    pub cluster_hosted: bool,
    /// The configuration file this server was read from (a hosted node's process is started
    /// with the same one).
    pub config_file: Option<PathBuf>,
}

impl ServerConfig {
    /// The embedded defaults: unprivileged ports, a self-signed certificate in the data
    /// directory, LMTP on loopback only (it takes mail for local users from anyone who can
    /// connect, so it is for MTAs on this host or a trusted network).
    pub fn defaults(data_dir: PathBuf) -> ServerConfig {
        let hostname = default_hostname();
        let any = |port: u16| SocketAddr::from(([0, 0, 0, 0], port));
        ServerConfig {
            tls: TlsSource::SelfSigned {
                dir: data_dir.join("tls"),
                hostname: hostname.clone(),
            },
            hostname,
            listeners: vec![
                (Service::Smtp, any(2525)),
                (Service::Submission, any(5587)),
                (Service::Submissions, any(5465)),
                (Service::Lmtp, SocketAddr::from(([127, 0, 0, 1], 2424))),
                (Service::Pop3, any(1110)),
                (Service::Pop3s, any(1995)),
                (Service::Imap, any(1143)),
                (Service::Imaps, any(1993)),
                // RFC 5804 1.8's port: unprivileged already.
                (Service::ManageSieve, any(4190)),
            ],
            data_dir,
            auth_without_tls: false,
            connections_max: 4096,
            connections_per_ip_max: 64,
            message_bytes_max: 50 << 20,
            recipients_max: 100,
            imap_sessions_per_user_max: 50,
            imap_header_cache_bytes_max: 64 << 20,
            imap_view_cache_bytes_max: 64 << 20,
            throttle: ThrottleConfig::default(),
            hash_concurrency_max: directory::Options::default().hash_concurrency_max,
            hash_memory_bytes_max: directory::Options::default().hash_memory_bytes_max,
            hash_queue_max: directory::Options::default().hash_queue_max,
            password_length_min: directory::PASSWORD_LENGTH_MIN_DEFAULT,
            sieve: sieve::Limits::default(),
            sieve_scripts_max: directory::Options::default().sieve_scripts_max,
            inflight_bytes_max: 128 << 20,
            disk_reserve_bytes: DISK_RESERVE_BYTES,
            login_deadline: Duration::from_secs(60),
            command_deadline: Duration::from_secs(60),
            transfer_deadline: Duration::from_secs(5 * 60),
            transfer_rate_min: 1024,
            transfer_deadline_max: Duration::from_secs(60 * 60),
            idle_deadline: Duration::from_secs(30 * 60),
            recipients_unknown_max: 10,
            tarpit_delay: Duration::from_secs(2),
            dns_servers: Vec::new(),
            sender_checks: true,
            dmarc_enforce: true,
            local_sender_check: true,
            delivery_threads: 2,
            relay: None,
            direct: None,
            queue: queue::QueueConfig::default(),
            store: store::StoreConfig::default(),
            spam: filter::Config::default(),
            metrics: None,
            web: Some(SocketAddr::from(([127, 0, 0, 1], 8080))),
            https: None,
            http: None,
            mta_sts: None,
            acme: None,
            web_tls: false,
            web_sessions_max: 10_000,
            web_request_bytes_max: 64 << 10,
            web_connections_max: 1024,
            imap_compress_connections_max: 1000,
            postmaster: None,
            directory: None,
            cluster: None,
            cluster_delivered_max: 1_000_000,
            cluster_replicas: 1,
            cluster_replication: None,
            cluster_hosted: false,
            config_file: None,
        }
    }
}

/// The MTA-STS policy we publish for every domain of ours (RFC 8461 3.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MtaSts {
    pub mode: transport_policy::Mode,
    /// How long senders may cache it (`max_age`).
    pub max_age: Duration,
}

/// A week: long enough that a sender keeps enforcing across an outage of our policy host,
/// short enough that a change reaches senders soon (RFC 8461 3.2 allows up to a year).
pub const MTA_STS_MAX_AGE: Duration = Duration::from_secs(7 * 86400);

/// The default free-space reserve: room for the messages in flight when it is crossed, and
/// for what opening, recovering, checkpointing and checking the engines need (at most a few
/// MiB, docs/storage.md "A full disk"), on any disk a mail server runs on.
pub(crate) const DISK_RESERVE_BYTES: u64 = 32 << 20;

fn default_hostname() -> String {
    std::fs::read_to_string("/etc/hostname")
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "localhost".to_string())
}

/// Checks what `start` would refuse without starting anything: settings that contradict
/// each other, and a configured certificate and key that do not load or do not match. (A
/// self-signed pair is not generated here.)
pub fn validate(config: &ServerConfig) -> Result<()> {
    if config.inflight_bytes_max < config.message_bytes_max {
        anyhow::bail!(
            "inflight_bytes_max ({}) must be at least message_bytes_max ({})",
            config.inflight_bytes_max,
            config.message_bytes_max
        );
    }
    if let TlsSource::Files { .. } = config.tls {
        tls::acceptor(&config.tls)?;
    }
    Ok(())
}

/// Raises the open-file limit to the hard limit: every connection is a descriptor, and the
/// usual soft limit (1024) is below `connections_max`.
pub fn raise_file_limit() -> u64 {
    use rustix::process::{Resource, getrlimit, setrlimit};
    let limit = getrlimit(Resource::Nofile);
    if let Some(hard) = limit.maximum
        && limit.current.is_some_and(|soft| soft < hard)
    {
        let raised = rustix::process::Rlimit {
            current: Some(hard),
            maximum: Some(hard),
        };
        if setrlimit(Resource::Nofile, raised).is_ok() {
            return hard;
        }
    }
    limit.current.unwrap_or(u64::MAX)
}
