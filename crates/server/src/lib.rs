//! `mailstow serve`: the tokio shell around the sans-IO protocol crates.
//!
//! Each listener accepts connections under shared limits and runs one task per connection that
//! moves bytes between the socket and a protocol session (`smtp::Session`, `pop3::Session`),
//! answering the session's decisions (authenticate, accept this recipient, make this message
//! durable) from the directory cache, the queue and the store. No protocol logic lives here.
//!
//! Data flow: SMTP/LMTP `DATA` → [`queue::Queue::enqueue_with`] → the reply `250` only from the
//! queue's commit callback (guarantee 1) → delivery threads (the `delivery` crate) → [`store::Store`] →
//! POP3. The queue and the store are synchronous engines; the async side reaches them through
//! callbacks (enqueue) and `spawn_blocking` (reads, expunges).

mod conn;
mod dkim;
mod driver;
mod imap_conn;
mod imap_store;
mod lock;
mod metrics;
mod park;
mod pop3_conn;
mod quota;
mod smtp_conn;
mod splice;
mod throttle;
mod tls;
mod web;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use anyhow::{Context, Result};
use tokio::net::TcpListener;

use delivery::Router;
pub use lock::DataDirLock;
pub use throttle::ThrottleConfig;
pub use tls::{Certificate, TlsSource};

/// Which protocol a listener speaks, and whether TLS starts at connect.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Service {
    Smtp,
    Submission,
    /// Submission over implicit TLS (RFC 8314 3.3).
    Submissions,
    Lmtp,
    Pop3,
    Pop3s,
    Imap,
    /// IMAP over implicit TLS (RFC 8314 3.3).
    Imaps,
}

impl Service {
    pub fn name(self) -> &'static str {
        match self {
            Service::Smtp => "smtp",
            Service::Submission => "submission",
            Service::Submissions => "submissions",
            Service::Lmtp => "lmtp",
            Service::Pop3 => "pop3",
            Service::Pop3s => "pop3s",
            Service::Imap => "imap",
            Service::Imaps => "imaps",
        }
    }

    /// What a refused connection is told before it is closed: SMTP's 421 (RFC 5321 3.1), or
    /// POP3's `-ERR [SYS/TEMP]` (RFC 3206).
    fn refusal(self, refused: conn::Refused, hostname: &str) -> String {
        let why = match refused {
            conn::Refused::Total => "too many connections",
            conn::Refused::PerIp => "too many connections from your address",
        };
        match self {
            Service::Pop3 | Service::Pop3s => format!("-ERR [SYS/TEMP] {why}, try again later\r\n"),
            // RFC 9051 7.1.5: BYE as the greeting refuses the connection.
            Service::Imap | Service::Imaps => {
                format!("* BYE [UNAVAILABLE] {why}, try again later\r\n")
            }
            _ => format!("421 4.7.0 {hostname} {why}, try again later\r\n"),
        }
    }

    /// What a client blocked for failed logins is told at connect (in plaintext, even on an
    /// implicit-TLS port: nothing more is spent on it).
    fn blocked(self, hostname: &str) -> String {
        let why = "too many failed logins from your address, try again later";
        match self {
            Service::Pop3 | Service::Pop3s => format!("-ERR [SYS/TEMP] {why}\r\n"),
            Service::Imap | Service::Imaps => format!("* BYE [UNAVAILABLE] {why}\r\n"),
            _ => format!("421 4.7.0 {hostname} {why}\r\n"),
        }
    }

    /// The services where clients log in (and can guess passwords).
    fn takes_logins(self) -> bool {
        !matches!(self, Service::Smtp | Service::Lmtp)
    }

    fn implicit_tls(self) -> bool {
        matches!(self, Service::Submissions | Service::Pop3s | Service::Imaps)
    }
}

/// Direct delivery to recipient domains' exchangers.
#[derive(Clone, Debug)]
pub struct Direct {
    /// Name servers to ask (`ip:port`); empty: the system's (`/etc/resolv.conf`).
    pub dns_servers: Vec<SocketAddr>,
    /// The exchangers' SMTP port: 25 on the internet; another only on test networks.
    pub mx_port: u16,
}

fn resolver(direct: &Direct) -> Result<hickory_resolver::TokioResolver> {
    // A slow or dead name server must not hold a delivery batch for long: 2 tries of 5 s.
    sender_auth::resolver(&direct.dns_servers, Duration::from_secs(5), 2)
        .context("building the DNS resolver")
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
    /// Message bytes held in memory by every connection together (SMTP/LMTP message
    /// content, IMAP literals). Past it, SMTP answers 452 4.3.1 and IMAP `NO [LIMIT]`.
    pub inflight_bytes_max: u64,
    /// Total time from connect to a successful login (submission, POP3, IMAP).
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
    /// Serve Prometheus metrics at `/metrics` and a health check at `/healthz` here.
    pub metrics: Option<SocketAddr>,
    /// Serve the web view here (`[server] web`; default 127.0.0.1:8080).
    pub web: Option<SocketAddr>,
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
    /// Copies handed over by other nodes that this node remembers having stored (see
    /// `dedup.rs`); the oldest are forgotten past this.
    pub cluster_delivered_max: usize,
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
            inflight_bytes_max: 128 << 20,
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
            metrics: None,
            web: Some(SocketAddr::from(([127, 0, 0, 1], 8080))),
            web_tls: false,
            web_sessions_max: 10_000,
            web_request_bytes_max: 64 << 10,
            web_connections_max: 1024,
            imap_compress_connections_max: 1000,
            postmaster: None,
            directory: None,
            cluster: None,
            cluster_delivered_max: 1_000_000,
        }
    }
}

fn default_hostname() -> String {
    std::fs::read_to_string("/etc/hostname")
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "localhost".to_string())
}

/// What every connection task shares.
pub(crate) struct Ctx {
    pub(crate) config: ServerConfig,
    pub(crate) queue: Arc<queue::Queue>,
    pub(crate) store: store::Store,
    pub(crate) directory: directory::Directory,
    /// What SIGHUP reloads: read it with [`Ctx::live`] where a setting is used.
    live: std::sync::RwLock<Arc<Live>>,
    pub(crate) limits: Arc<conn::ConnectionLimits>,
    pub(crate) throttle: Arc<throttle::Throttle>,
    /// Message bytes in memory, all connections together.
    pub(crate) inflight: Arc<limits::ByteBudget>,
    /// The one road into the store for new mail, and its gate (`mailboxes::Gate`): held
    /// shared by every writer of new mail, exclusively by whoever removes, renames or
    /// freezes a user's mail.
    pub(crate) deposit: Arc<mailboxes::Deposit>,
    /// Logged-in users of every protocol.
    pub(crate) sessions: mailboxes::Sessions,
    /// Where IMAP sessions in IDLE wait outside their tasks.
    pub(crate) parking: park::Parking,
    /// Removing and renaming users' mail.
    pub(crate) accounts: mailboxes::Accounts,
    /// SPF, DKIM and DMARC of MX mail (`None` when `sender_checks` is off).
    pub(crate) checker: Option<sender_auth::Checker>,
    /// DKIM signers made from the directory's keys, by (domain, selector).
    pub(crate) signers: dkim::Signers,
    pub(crate) wakeup: Arc<delivery::Wakeup>,
    pub(crate) maildrops: pop3_conn::Maildrops,
    /// Places for compressed IMAP connections (`imap_compress_connections_max`).
    pub(crate) imap_compressed: Arc<tokio::sync::Semaphore>,
    /// Numbers SMTP sessions (their Received ids).
    pub(crate) session_ids: AtomicU64,
    /// Messages made durable in the queue (SMTP and LMTP) since start.
    pub(crate) accepted: AtomicU64,
    pub(crate) delivered: Arc<AtomicU64>,
    /// The mail log and the metrics.
    pub(crate) telemetry: Arc<telemetry::Telemetry>,
    /// What `/healthz` answers.
    pub(crate) health: Arc<metrics::Health>,
    /// This node of a cluster.
    pub(crate) cluster: Option<Arc<cluster::Cluster>>,
    /// Hand-overs from other nodes, taken here (cluster only).
    pub(crate) handover: Option<Arc<cluster::HandOver>>,
    /// Mailbox moves, to and from this node (cluster only).
    pub(crate) moves: Option<Arc<cluster::Moves>>,
    /// The operator's commands (the admin socket and the web view's admin pages).
    pub(crate) operations: Arc<admin::Operations>,
}

impl Ctx {
    /// The settings in force now (a connection takes them when it opens and keeps them).
    pub(crate) fn live(&self) -> Arc<Live> {
        self.live.read().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

/// The settings SIGHUP can change without a restart, and what is built from them: the TLS
/// acceptor (certificate and key re-read on every reload) and the protocol sessions'
/// configurations. Sessions already open keep what they started with.
pub(crate) struct Live {
    pub(crate) config: ServerConfig,
    pub(crate) tls: tokio_rustls::TlsAcceptor,
    pub(crate) certificate: tls::Certificate,
    pub(crate) smtp: Arc<smtp::Config>,
    pub(crate) submission: Arc<smtp::Config>,
    pub(crate) lmtp: Arc<smtp::Config>,
    pub(crate) pop3: Arc<pop3::Config>,
    pub(crate) imap: Arc<imap::Config>,
}

impl Live {
    fn build(config: ServerConfig, inflight: &Arc<limits::ByteBudget>) -> Result<Live> {
        if config.inflight_bytes_max < config.message_bytes_max {
            anyhow::bail!(
                "inflight_bytes_max ({}) must be at least message_bytes_max ({}): a message \
                 of the largest size could never be received",
                config.inflight_bytes_max,
                config.message_bytes_max
            );
        }
        let (tls, certificate) = tls::load(&config.tls)?;
        let smtp_config = |mode: smtp::Mode| {
            Arc::new(smtp::Config {
                hostname: config.hostname.clone(),
                mode,
                message_bytes_max: config.message_bytes_max,
                recipients_max: config.recipients_max,
                tls_available: true,
                auth_without_tls: config.auth_without_tls,
                require_auth: mode == smtp::Mode::Submission,
                command_deadline: config.command_deadline,
                transfer_deadline: config.transfer_deadline,
                transfer_rate_min: config.transfer_rate_min,
                transfer_deadline_max: config.transfer_deadline_max,
                login_deadline: config.login_deadline,
                inflight: Some(inflight.clone()),
                ..smtp::Config::default()
            })
        };
        Ok(Live {
            tls,
            certificate,
            smtp: smtp_config(smtp::Mode::Mx),
            submission: smtp_config(smtp::Mode::Submission),
            lmtp: {
                let mut lmtp = (*smtp_config(smtp::Mode::Lmtp)).clone();
                lmtp.cluster_routes = config.cluster.is_some();
                Arc::new(lmtp)
            },
            pop3: Arc::new(pop3::Config {
                hostname: config.hostname.clone(),
                tls_available: true,
                plaintext_auth: config.auth_without_tls,
                login_deadline: config.login_deadline,
                command_deadline: config.command_deadline,
                ..pop3::Config::default()
            }),
            imap: Arc::new(imap::Config {
                hostname: config.hostname.clone(),
                plaintext_auth: config.auth_without_tls,
                starttls: true,
                literal_bytes_max: config.message_bytes_max,
                command_bytes_max: config.message_bytes_max + (16 << 20),
                login_deadline: config.login_deadline,
                command_deadline: config.command_deadline,
                transfer_rate_min: config.transfer_rate_min,
                command_deadline_max: config.transfer_deadline_max,
                idle_deadline: config.idle_deadline,
                inflight: Some(inflight.clone()),
                ..imap::Config::default()
            }),
            config,
        })
    }
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

/// A running server: its bound addresses, and how to stop it.
pub struct Running {
    pub addresses: Vec<(Service, SocketAddr)>,
    /// Where `/metrics` and `/healthz` are served, when configured.
    pub metrics: Option<SocketAddr>,
    /// Where the web view is served, when configured.
    pub web: Option<SocketAddr>,
    ctx: Arc<Ctx>,
    shutdown: tokio::sync::watch::Sender<bool>,
    done: tokio::task::JoinHandle<Result<()>>,
}

/// What [`Running::reload`] did.
#[derive(Debug)]
pub struct Reloaded {
    /// The certificate now served.
    pub certificate: Certificate,
    /// Settings now in force that differ from before (the certificate is re-read always).
    pub changed: Vec<&'static str>,
    /// Settings that differ in the new configuration but take effect only after a restart.
    pub restart_needed: Vec<&'static str>,
}

/// The names of the fields whose values differ (compared through `Debug`, which every
/// setting has and which shows everything a setting holds).
macro_rules! differing {
    ($a:expr, $b:expr, $($field:ident),* $(,)?) => {{
        let mut names: Vec<&'static str> = Vec::new();
        $(
            if format!("{:?}", $a.$field) != format!("{:?}", $b.$field) {
                names.push(stringify!($field));
            }
        )*
        names
    }};
}

/// The settings a reload applies: `into` takes them from `from`; everything else stays as
/// it was when the server started.
fn take_reloadable(from: &ServerConfig, into: &mut ServerConfig) {
    into.tls = match &from.tls {
        // The self-signed certificate names the host name in force, which a reload keeps.
        TlsSource::SelfSigned { dir, .. } => TlsSource::SelfSigned {
            dir: dir.clone(),
            hostname: into.hostname.clone(),
        },
        files => files.clone(),
    };
    into.auth_without_tls = from.auth_without_tls;
    into.connections_max = from.connections_max;
    into.connections_per_ip_max = from.connections_per_ip_max;
    into.message_bytes_max = from.message_bytes_max;
    into.recipients_max = from.recipients_max;
    into.throttle = from.throttle;
    into.login_deadline = from.login_deadline;
    into.command_deadline = from.command_deadline;
    into.transfer_deadline = from.transfer_deadline;
    into.transfer_rate_min = from.transfer_rate_min;
    into.transfer_deadline_max = from.transfer_deadline_max;
    into.idle_deadline = from.idle_deadline;
    into.dmarc_enforce = from.dmarc_enforce;
    into.local_sender_check = from.local_sender_check;
    into.recipients_unknown_max = from.recipients_unknown_max;
    into.tarpit_delay = from.tarpit_delay;
}

impl Running {
    /// The certificate served now.
    pub fn certificate(&self) -> Certificate {
        self.ctx.live().certificate.clone()
    }

    /// Applies a new configuration without dropping a session: re-reads the certificate and
    /// key, takes the new limits, deadlines and policies for new connections and logins,
    /// and names the settings that need a restart. On error (a certificate that does not
    /// load, limits that contradict each other) nothing changes.
    pub fn reload(&self, new: &ServerConfig) -> Result<Reloaded> {
        let ctx = &self.ctx;
        let before = ctx.live();
        let mut effective = ctx.config.clone();
        take_reloadable(new, &mut effective);
        let restart_needed = differing!(
            effective,
            new,
            hostname,
            data_dir,
            listeners,
            imap_sessions_per_user_max,
            imap_header_cache_bytes_max,
            imap_view_cache_bytes_max,
            hash_concurrency_max,
            hash_memory_bytes_max,
            hash_queue_max,
            inflight_bytes_max,
            dns_servers,
            sender_checks,
            delivery_threads,
            relay,
            direct,
            queue,
            store,
            metrics,
            postmaster,
        );
        let live = Live::build(effective, &ctx.inflight)?;
        let certificate = live.certificate.clone();
        let changed = differing!(
            before.config,
            live.config,
            tls,
            auth_without_tls,
            connections_max,
            connections_per_ip_max,
            message_bytes_max,
            recipients_max,
            throttle,
            login_deadline,
            command_deadline,
            transfer_deadline,
            transfer_rate_min,
            transfer_deadline_max,
            idle_deadline,
            dmarc_enforce,
            local_sender_check,
            recipients_unknown_max,
            tarpit_delay,
        );
        ctx.limits.set_max(
            live.config.connections_max,
            live.config.connections_per_ip_max,
        );
        ctx.throttle.set_config(live.config.throttle);
        *ctx.live.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(live);
        Ok(Reloaded {
            certificate,
            changed,
            restart_needed,
        })
    }

    /// Stops accepting, ends sessions, stops delivery and closes the queue and the store.
    pub async fn stop(self) -> Result<()> {
        let _ = self.shutdown.send(true);
        self.done.await.context("server task")?
    }
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

/// Opens the engines and the directory, binds every listener and starts serving. Returns once
/// every listener is bound.
pub async fn start(config: ServerConfig) -> Result<Running> {
    let inflight = limits::ByteBudget::new(config.inflight_bytes_max);
    // Checks the settings and builds TLS before anything is opened or bound.
    let live = Live::build(config.clone(), &inflight)?;
    std::fs::create_dir_all(&config.data_dir)
        .with_context(|| format!("creating {}", config.data_dir.display()))?;
    let data_lock = DataDirLock::acquire(&config.data_dir)?;
    let files = raise_file_limit();
    if (files as usize) < config.connections_max + 64 {
        tracing::warn!(
            event = "file_limit",
            open_files_max = files,
            connections_max = config.connections_max,
            msg = "the open-file limit is below connections_max + 64 (for the engines)"
        );
    }
    let disk: Arc<dyn disk::Disk> = Arc::new(disk::RealDisk);
    let queue_dir = config.data_dir.join("queue");
    let store_dir = config.data_dir.join("store");
    for dir in [&queue_dir, &store_dir] {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let (queue, queue_report) = queue::Queue::open(disk.clone(), &queue_dir, config.queue.clone())
        .context("opening the queue")?;
    let queue = Arc::new(queue);
    let store_config = store::StoreConfig {
        summary_cache_bytes_max: config.imap_header_cache_bytes_max,
        view_cache_bytes_max: config.imap_view_cache_bytes_max,
        ..config.store.clone()
    };
    let (store, _) =
        store::Store::open(disk.clone(), &store_dir, store_config).context("opening the store")?;
    let location = config
        .directory
        .clone()
        .unwrap_or_else(|| directory::Location::Sqlite(config.data_dir.join("directory.db")));
    if config.cluster.is_some() && !matches!(location, directory::Location::Postgres(_)) {
        anyhow::bail!(
            "[cluster] needs the directory every node shares: set [directory] url to a \
             postgres:// URL"
        );
    }
    let directory = directory::Directory::open_at(
        &location,
        directory::Options {
            hash_concurrency_max: config.hash_concurrency_max,
            hash_memory_bytes_max: config.hash_memory_bytes_max,
            hash_queue_max: config.hash_queue_max,
            postmaster: config.postmaster.clone(),
            ..directory::Options::default()
        },
    )
    .await
    .context("opening the directory")?;
    let refresher = directory.spawn_refresher(Duration::from_secs(2));
    let gate = Arc::new(match &config.cluster {
        Some(cluster) => mailboxes::Gate::cluster(cluster.node.clone(), directory.clone()),
        None => mailboxes::Gate::single(),
    });
    let telemetry = telemetry::Telemetry::new();
    let delivered = Arc::new(AtomicU64::new(0));
    let deposit = Arc::new(mailboxes::Deposit::new(
        store.clone(),
        gate.clone(),
        telemetry.clone(),
        delivered.clone(),
    ));
    let parking = park::Parking::default();
    let sessions = mailboxes::Sessions::new(config.imap_sessions_per_user_max, {
        let parking = parking.clone();
        Arc::new(move |user: &str| parking.wake_user(user))
    });
    let accounts = mailboxes::Accounts {
        directory: directory.clone(),
        store: store.clone(),
        sessions: sessions.clone(),
        gate: gate.clone(),
    };
    let (cluster, lease, handover, moves) = match &config.cluster {
        Some(cluster) => {
            if directory.cache().node(&cluster.node).is_none() {
                anyhow::bail!(
                    "node {} is not in the directory: add it with `mailstow node add`",
                    cluster.node
                );
            }
            let lease =
                directory.spawn_lease(&cluster.node, cluster::LEASE_RENEW, cluster::LEASE_TTL);
            let delivered = Arc::new(
                cluster::Delivered::open(
                    disk.clone(),
                    &config.data_dir,
                    delivery::RETRY_FOR + Duration::from_secs(86_400),
                    config.cluster_delivered_max,
                )
                .context("opening the record of handed-over mail (cluster-delivered)")?,
            );
            let handover = cluster::HandOver::new(
                cluster.node.clone(),
                directory.clone(),
                deposit.clone(),
                delivered,
            );
            let tls = Arc::new(delivery::outbound::opportunistic_client_config());
            let node = Arc::new(cluster::Cluster::new(cluster, tls));
            let moves = cluster::Moves::new(node.clone(), accounts.clone(), deposit.clone());
            (
                Some(node),
                Some(lease),
                Some(Arc::new(handover)),
                Some(Arc::new(moves)),
            )
        }
        None => (None, None, None, None),
    };
    tracing::info!(
        event = "queue_opened",
        pending = queue_report.pending,
        deferred = queue_report.deferred
    );

    let throttle = Arc::new(throttle::Throttle::new(config.throttle));
    let wakeup = Arc::new(delivery::Wakeup::default());
    let operations = Arc::new(admin::Operations {
        data_dir: config.data_dir.clone(),
        node_name: cluster
            .as_ref()
            .map_or_else(|| config.hostname.clone(), |c| c.node.clone()),
        queue: queue.clone(),
        store: store.clone(),
        directory: directory.clone(),
        accounts: accounts.clone(),
        deposit: deposit.clone(),
        wakeup: wakeup.clone(),
        telemetry: telemetry.clone(),
        logins: throttle.clone(),
    });
    let ctx = Arc::new(Ctx {
        queue: queue.clone(),
        store: store.clone(),
        directory: directory.clone(),
        live: std::sync::RwLock::new(Arc::new(live)),
        limits: conn::ConnectionLimits::new(config.connections_max, config.connections_per_ip_max),
        throttle: throttle.clone(),
        inflight: inflight.clone(),
        accounts,
        deposit,
        sessions,
        parking,
        checker: if config.sender_checks {
            Some(
                sender_auth::Checker::new(&config.dns_servers, &config.hostname)
                    .context("setting up the SPF/DKIM/DMARC checks")?,
            )
        } else {
            None
        },
        signers: dkim::Signers::default(),
        wakeup: wakeup.clone(),
        maildrops: pop3_conn::Maildrops::default(),
        imap_compressed: Arc::new(tokio::sync::Semaphore::new(
            config.imap_compress_connections_max,
        )),
        session_ids: AtomicU64::new(0),
        accepted: AtomicU64::new(0),
        delivered,
        telemetry,
        health: Arc::new(metrics::Health::default()),
        cluster,
        operations,
        handover,
        moves,
        config,
    });
    ctx.telemetry
        .register_engines(ctx.queue.clone(), ctx.store.clone(), {
            let parking = ctx.parking.clone();
            Box::new(move || parking.len())
        });

    // IMAP sessions in IDLE wake on their user's changes, whoever made them.
    let sessions = ctx.sessions.clone();
    ctx.store
        .set_observer(Arc::new(move |user: &str| sessions.changed(user)));

    let stop = Arc::new(AtomicBool::new(false));
    let router: Arc<dyn Router> = Arc::new(delivery::DirectoryRouter {
        directory: directory.clone(),
        node: ctx.cluster.as_ref().map(|c| c.node.clone()),
        gate: ctx.deposit.gate().clone(),
    });
    let peers = ctx.cluster.as_ref().map(|cluster| {
        Arc::new(delivery::peer::PeerPath::new(
            delivery::peer::Peers::new(&cluster.node, &ctx.config.hostname),
            tokio::runtime::Handle::current(),
        ))
    });
    let wake_task = peers.clone().map(|peers| {
        tokio::spawn(delivery::wake_on_return(
            ctx.directory.clone(),
            ctx.queue.clone(),
            ctx.wakeup.clone(),
            peers,
        ))
    });
    let path = match (&ctx.config.relay, &ctx.config.direct) {
        (Some(relay), _) => Some(delivery::Path::Relay(relay.clone())),
        (None, Some(direct)) => Some(delivery::Path::Mx(Box::new(delivery::outbound::Mx {
            resolver: resolver(direct)?,
            port: direct.mx_port,
        }))),
        (None, None) => None,
    };
    let outbound = path.map(|path| {
        Arc::new(delivery::Outbound {
            path,
            clients: delivery::outbound::Clients::new(),
            runtime: tokio::runtime::Handle::current(),
            hostname: ctx.config.hostname.clone(),
        })
    });
    let mut workers = Vec::new();
    for n in 0..ctx.config.delivery_threads.max(1) {
        let worker = delivery::Delivery {
            queue: queue.clone(),
            router: router.clone(),
            wakeup: ctx.wakeup.clone(),
            stop: stop.clone(),
            hostname: ctx.config.hostname.clone(),
            delivered: ctx.delivered.clone(),
            outbound: outbound.clone(),
            deposit: ctx.deposit.clone(),
            events: ctx.telemetry.clone(),
            peers: peers.clone(),
        };
        workers.push(
            std::thread::Builder::new()
                .name(format!("delivery-{n}"))
                .spawn(move || worker.run())
                .context("starting a delivery thread")?,
        );
    }

    let (shutdown, watch) = tokio::sync::watch::channel(false);
    let mut addresses = Vec::new();
    let mut accept_tasks = Vec::new();
    for &(service, address) in &ctx.config.listeners {
        let listener = TcpListener::bind(address)
            .await
            .with_context(|| format!("{}: cannot listen on {address}", service.name()))?;
        let bound = listener.local_addr()?;
        addresses.push((service, bound));
        accept_tasks.push(tokio::spawn(accept_loop(
            ctx.clone(),
            service,
            listener,
            watch.clone(),
        )));
    }

    let metrics = match ctx.config.metrics {
        Some(address) => {
            let (bound, task) =
                metrics::start(address, ctx.telemetry.clone(), ctx.health.clone()).await?;
            Some((bound, task))
        }
        None => None,
    };
    let metrics_address = metrics.as_ref().map(|(bound, _)| *bound);
    let web = match ctx.config.web {
        Some(address) => Some(web::start(ctx.clone(), address, ctx.config.web_tls).await?),
        None => None,
    };
    let web_address = web.as_ref().map(|(bound, _)| *bound);

    // Users deleted while no server ran, or whose removal a crash cut short.
    ctx.accounts.finish_deletions().await;
    // Renames a crash cut short, or begun by an offline `user rename` that did not finish.
    ctx.accounts.finish_renames().await;
    let admin_task =
        admin::socket::start(ctx.operations.clone()).context("starting the admin socket")?;
    let moves_task = ctx
        .moves
        .clone()
        .map(|moves| tokio::spawn(cluster::moves::watch(moves, watch.clone())));
    let stats_task = tokio::spawn(write_stats(ctx.clone(), peers.clone()));
    // The record of handed-over copies is written before each 250 and synced within
    // `SYNC_INTERVAL` (`cluster::handover`).
    let record_sync_task = ctx.handover.as_ref().map(|h| h.spawn_record_sync());
    // Every listener is bound and the engines are open.
    ctx.health.ready();
    let running_ctx = ctx.clone();
    let done = tokio::spawn(async move {
        let mut watch = watch;
        let _ = watch.wait_for(|stop| *stop).await;
        ctx.health.stopping();
        // Parked IMAP sessions run again to say goodbye.
        ctx.parking.close();
        for task in &accept_tasks {
            task.abort();
        }
        admin_task.abort();
        if let Some(task) = &moves_task {
            task.abort();
        }
        admin::socket::remove_socket(&ctx.config.data_dir);
        // Sessions see the shutdown through their own watch and close after their current
        // command; give them a moment.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        while ctx.limits.open() > 0 && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        refresher.abort();
        if let Some(lease) = &lease {
            lease.abort();
            // Down for the other nodes now, not when the lease would have run out: they stop
            // proxying to us at once (their users are told UNAVAILABLE, mail waits).
            if let Some(cluster) = &ctx.cluster
                && let Err(e) = ctx
                    .directory
                    .renew_lease(&cluster.node, Duration::ZERO)
                    .await
            {
                tracing::warn!(event = "directory_error", error = %e, msg = "could not give up the lease");
            }
        }
        if let Some(task) = &wake_task {
            task.abort();
        }
        stats_task.abort();
        if let Some(task) = &record_sync_task {
            task.abort();
        }
        if let Some((_, task)) = &metrics {
            task.abort();
        }
        if let Some((_, task)) = &web {
            task.abort();
        }
        stop.store(true, Ordering::Relaxed);
        ctx.wakeup.notify();
        tokio::task::spawn_blocking(move || {
            for worker in workers {
                let _ = worker.join();
            }
        })
        .await
        .ok();
        ctx.store.checkpoint().context("checkpointing the store")?;
        // Only now may another process open the engines.
        drop(data_lock);
        Ok(())
    });
    Ok(Running {
        addresses,
        metrics: metrics_address,
        web: web_address,
        ctx: running_ctx,
        shutdown,
        done,
    })
}

async fn accept_loop(
    ctx: Arc<Ctx>,
    service: Service,
    listener: TcpListener,
    shutdown: tokio::sync::watch::Receiver<bool>,
) {
    loop {
        let (socket, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(e) => {
                // EMFILE and friends: back off instead of spinning.
                tracing::warn!(event = "accept_error", proto = service.name(), error = %e);
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let _ = socket.set_nodelay(true);
        let ctx = ctx.clone();
        let shutdown = shutdown.clone();
        // Each connection is one task; what it holds while it waits for a client is its
        // memory (docs/benchmarks.md: 10,000 idle IMAP connections). So the parts of a
        // connection's life are boxed: the task holds only the part it is in, not the
        // largest of the TLS handshake and every protocol's driver.
        let task = async move {
            let mut stream = conn::Stream::Plain(socket);
            let from_node = ctx
                .cluster
                .as_ref()
                .is_some_and(|c| c.is_node_address(&ctx.directory, peer.ip()));
            let slot = match ctx.limits.admit_from(peer.ip(), !from_node) {
                Ok(slot) => slot,
                Err(refused) => {
                    use tokio::io::AsyncWriteExt as _;
                    let line = service.refusal(refused, &ctx.config.hostname);
                    ctx.telemetry
                        .refused_connection(service.name(), peer, line.trim_end());
                    let _ = tokio::time::timeout(
                        Duration::from_secs(5),
                        stream.write_all(line.as_bytes()),
                    )
                    .await;
                    return;
                }
            };
            // An address (or network) blocked for failed logins gets nothing more from the
            // login services: not a TLS handshake, not a session. The pause makes a guesser
            // that reconnects in a loop wait, holding one of its own connection slots.
            if service.takes_logins()
                && let Some(level) = ctx.throttle.address_blocked(peer.ip())
            {
                use tokio::io::AsyncWriteExt as _;
                let line = service.blocked(&ctx.config.hostname);
                ctx.telemetry.refused_connection(
                    service.name(),
                    peer,
                    &format!("{} ({} level)", line.trim_end(), level.name()),
                );
                tokio::time::sleep(ctx.live().config.tarpit_delay).await;
                let _ =
                    tokio::time::timeout(Duration::from_secs(5), stream.write_all(line.as_bytes()))
                        .await;
                return;
            }
            let open = ctx
                .telemetry
                .connection(service.name(), peer, service.implicit_tls());
            if service.implicit_tls() {
                let tls = ctx.live().tls.clone();
                stream = match Box::pin(stream.upgrade(&tls, conn::TLS_HANDSHAKE_TIMEOUT)).await {
                    Ok(tls) => tls,
                    Err(_) => return,
                };
            }
            let tls = stream.is_tls();
            let mut conn = driver::Conn::new(ctx.clone(), stream);
            conn.held = Some(conn::Held::new(slot, open));
            match service {
                Service::Pop3 | Service::Pop3s => {
                    let pop3 = pop3_conn::Pop3::new(&ctx, peer, tls);
                    Box::pin(driver::drive(pop3, conn, shutdown)).await
                }
                Service::Imap | Service::Imaps => {
                    let imap = imap_conn::Imap::new(&ctx, peer, tls);
                    Box::pin(driver::drive(imap, conn, shutdown)).await
                }
                _ => {
                    let smtp = smtp_conn::Smtp::new(&ctx, service, peer, tls);
                    Box::pin(driver::drive(smtp, conn, shutdown)).await
                }
            }
        };
        tokio::spawn(task);
    }
}

/// Where the server writes its counters once a second.
pub fn stats_path(data_dir: &std::path::Path) -> PathBuf {
    data_dir.join("stats")
}

/// Writes `<data_dir>/stats` once a second: `name value` lines that scripts and operators can
/// read without talking to the server (replaced atomically, never half written).
/// In a cluster, `peer_*` are the handovers' LMTP bytes sent and received and the
/// connections they opened.
async fn write_stats(ctx: Arc<Ctx>, peers: Option<Arc<delivery::peer::PeerPath>>) {
    let path = stats_path(&ctx.config.data_dir);
    let tmp = path.with_extension("tmp");
    loop {
        let queue = ctx.queue.stats();
        // Counters only: `Store::stats` would walk every folder under the writer lock.
        let store = ctx.store.io_counters();
        let peer = peers.as_ref().map_or((0, 0, 0), |p| {
            let t = p.peers.traffic();
            (
                t.sent.load(Ordering::Relaxed),
                t.received.load(Ordering::Relaxed),
                t.connections.load(Ordering::Relaxed),
            )
        });
        let text = format!(
            "accepted {}\ndelivered {}\nconnections {}\nqueue_pending {}\nqueue_deferred {}\n\
             queue_bounces {}\nqueue_fdatasyncs {}\nstore_data_syncs {}\nstore_journal_syncs {}\n\
             store_messages_appended {}\ninflight_bytes {}\ninflight_refusals {}\n\
             peer_bytes_sent {}\npeer_bytes_received {}\npeer_connections {}\n",
            ctx.accepted.load(Ordering::Relaxed),
            ctx.delivered.load(Ordering::Relaxed),
            ctx.limits.open(),
            queue.pending_messages,
            queue.deferred_messages,
            queue.bounces,
            queue.fdatasyncs,
            store.data_syncs,
            store.journal_syncs,
            store.messages_appended,
            ctx.inflight.reserved(),
            ctx.inflight.refusals(),
            peer.0,
            peer.1,
            peer.2,
        );
        if std::fs::write(&tmp, text).is_ok() {
            let _ = std::fs::rename(&tmp, &path);
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// Runs `start`, prints each listener's address, and serves until SIGTERM or SIGINT. On
/// SIGHUP it calls `reread` for the configuration (the caller re-reads its file and reopens
/// its log) and applies it with [`Running::reload`]; a configuration that fails keeps the
/// old one in force, and the log says why.
pub async fn serve(
    config: ServerConfig,
    mut reread: impl FnMut() -> Result<ServerConfig>,
) -> Result<()> {
    use tokio::signal::unix::{SignalKind, signal};
    // The handlers go in before the listeners are announced: a supervisor (or a test) may
    // send SIGTERM the moment it reads them, and an unhandled SIGTERM kills the process
    // without the orderly stop below.
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    let mut hangup = signal(SignalKind::hangup())?;
    let data_dir = std::path::absolute(&config.data_dir).unwrap_or(config.data_dir.clone());
    let running = start(config).await?;
    let certificate = running.certificate();
    let certificate_path =
        std::path::absolute(&certificate.path).unwrap_or(certificate.path.clone());
    println!("data directory: {}", data_dir.display());
    println!(
        "certificate: {}{}",
        certificate_path.display(),
        match (&certificate.self_signed_for, certificate.generated) {
            (Some(host), true) => format!(" (self-signed for {host}, generated now)"),
            (Some(host), false) => format!(" (self-signed for {host})"),
            (None, _) => String::new(),
        }
    );
    println!("certificate sha256: {}", certificate.sha256);
    for (service, address) in &running.addresses {
        println!("{} listening on {address}", service.name());
    }
    if let Some(address) = running.metrics {
        println!("metrics listening on {address}");
    }
    if let Some(address) = running.web {
        println!("web listening on {address}");
    }
    use std::io::Write as _;
    let _ = std::io::stdout().flush();
    tracing::info!(
        event = "started",
        data_dir = %data_dir.display(),
        certificate = %certificate_path.display(),
        sha256 = %certificate.sha256,
        listeners = running.addresses.len()
    );
    loop {
        tokio::select! {
            _ = term.recv() => break,
            _ = int.recv() => break,
            _ = hangup.recv() => {
                match reread().and_then(|new| running.reload(&new)) {
                    Ok(reloaded) => tracing::info!(
                        event = "reload",
                        result = "ok",
                        changed = %names(&reloaded.changed),
                        restart_needed = %names(&reloaded.restart_needed),
                        certificate_sha256 = %reloaded.certificate.sha256
                    ),
                    Err(e) => tracing::warn!(
                        event = "reload",
                        result = "failed",
                        error = %format!("{e:#}"),
                        kept = "the configuration in force"
                    ),
                }
            }
        }
    }
    println!("stopping");
    tracing::info!(event = "stopping");
    running.stop().await?;
    println!("stopped");
    Ok(())
}

/// A list of setting names for the log: comma-separated, `-` when empty.
fn names(list: &[&str]) -> String {
    if list.is_empty() {
        "-".to_string()
    } else {
        list.join(",")
    }
}
