//! The connection shell started over the parts a node opened (the CLI's `serve` opens the
//! engines, the directory, the cluster, delivery and the operator's socket, then starts
//! this): every listener bound, the web view and the metrics served, until [`Running::stop`].

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use anyhow::{Context as _, Result};
use tokio::net::TcpListener;

use crate::accept::{Protocols, accept_loop};
use crate::config::ServerConfig;
use crate::connections::ConnectionLimits;
use crate::dkim::Signers;
use crate::imap_conn::ImapParts;
use crate::live::Live;
use crate::metrics::{self, Health};
use crate::park::Parking;
use crate::pop3_conn::{Maildrops, Pop3Parts};
use crate::reload::{self, Reloaded};
use crate::service::Service;
use crate::shell::Shell;
use crate::smtp_conn::SmtpParts;
use crate::throttle::Throttle;
use crate::tls::Certificate;
use crate::web::{self, WebParts};

/// What the shell serves connections from: the engines and the parts around them, opened
/// and started by the node.
pub struct Parts {
    pub queue: Arc<queue::Queue>,
    pub store: Arc<store::Store>,
    pub directory: directory::Directory,
    /// The one road into the store for new mail, and its gate.
    pub deposit: Arc<mailboxes::Deposit>,
    /// Who is logged in (its waker is `parking`'s).
    pub sessions: mailboxes::Sessions,
    pub parking: Parking,
    pub throttle: Arc<Throttle>,
    pub telemetry: Arc<telemetry::Telemetry>,
    /// Delivery's signal, given with every message the queue made durable.
    pub wakeup: Arc<delivery::Wakeup>,
    /// Messages made durable in the queue since start.
    pub accepted: Arc<AtomicU64>,
    /// What `/healthz` answers.
    pub health: Arc<Health>,
    /// The data directory's free-space reserve: new mail is refused below it.
    pub space: Arc<disk::SpaceReserve>,
    pub cluster: Option<Arc<cluster::Cluster>>,
    pub handover: Option<Arc<cluster::HandOver>>,
    pub moves: Option<Arc<cluster::Moves>>,
    /// The operator's commands, for the web view's admin pages.
    pub operations: Arc<admin::Operations>,
}

/// The running shell: its bound addresses, and how to reload or stop it.
pub struct Running {
    pub addresses: Vec<(Service, SocketAddr)>,
    /// Where `/metrics` and `/healthz` are served, when configured.
    pub metrics: Option<SocketAddr>,
    /// Where the web view is served, when configured.
    pub web: Option<SocketAddr>,
    shell: Arc<Shell>,
    shutdown: tokio::sync::watch::Sender<bool>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

/// The shell's counters: open connections and the message bytes they hold in memory.
#[derive(Clone)]
pub struct Counters {
    connections: Arc<ConnectionLimits>,
    inflight: Arc<limits::ByteBudget>,
}

impl Counters {
    /// Client connections open now (the web view's not counted).
    pub fn open_connections(&self) -> usize {
        self.connections.open()
    }

    /// Message bytes every connection holds in memory now.
    pub fn inflight_reserved(&self) -> u64 {
        self.inflight.reserved()
    }

    /// Messages and literals refused because the in-memory budget was spent.
    pub fn inflight_refusals(&self) -> u64 {
        self.inflight.refusals()
    }
}

/// Builds the shell over `parts` and binds every listener (failing the start when one
/// cannot be bound); returns once all are bound.
pub async fn start(config: ServerConfig, parts: Parts) -> Result<Running> {
    let inflight = limits::ByteBudget::new(config.inflight_bytes_max);
    let live = Live::build(config.clone(), &inflight)?;
    let checker = if config.sender_checks {
        Some(
            sender_auth::Checker::new(&config.dns_servers, &config.hostname)
                .context("setting up the SPF/DKIM/DMARC checks")?,
        )
    } else {
        None
    };
    let signers = Arc::new(Signers::default());
    let compressed = Arc::new(tokio::sync::Semaphore::new(
        config.imap_compress_connections_max,
    ));
    let shell = Arc::new(Shell::new(
        config,
        live,
        parts.throttle,
        inflight,
        parts.telemetry.clone(),
        parts.sessions,
        parts.parking,
        parts.directory.clone(),
        parts.cluster,
        parts.space.clone(),
    ));
    let protocols = Arc::new(Protocols {
        smtp: Arc::new(SmtpParts {
            queue: parts.queue.clone(),
            wakeup: parts.wakeup.clone(),
            store: parts.store.clone(),
            checker,
            signers: signers.clone(),
            accepted: parts.accepted.clone(),
            session_ids: AtomicU64::new(0),
            handover: parts.handover,
        }),
        pop3: Arc::new(Pop3Parts {
            store: parts.store.clone(),
            maildrops: Maildrops::default(),
            gate: parts.deposit.gate().clone(),
        }),
        imap: Arc::new(ImapParts {
            store: parts.store.clone(),
            directory: parts.directory,
            telemetry: parts.telemetry.clone(),
            gate: parts.deposit.gate().clone(),
            moves: parts.moves,
            compressed,
            space: parts.space.clone(),
        }),
    });
    let (shutdown, watch) = tokio::sync::watch::channel(false);
    let mut addresses = Vec::new();
    let mut tasks = Vec::new();
    for &(service, address) in &shell.config.listeners {
        let listener = TcpListener::bind(address)
            .await
            .with_context(|| format!("{}: cannot listen on {address}", service.name()))?;
        addresses.push((service, listener.local_addr()?));
        tasks.push(tokio::spawn(accept_loop(
            shell.clone(),
            protocols.clone(),
            service,
            listener,
            watch.clone(),
        )));
    }
    let metrics = match shell.config.metrics {
        Some(address) => {
            let (bound, task) =
                metrics::start(address, parts.telemetry.clone(), parts.health).await?;
            tasks.push(task);
            Some(bound)
        }
        None => None,
    };
    let web = match shell.config.web {
        Some(address) => {
            let web_parts = Arc::new(WebParts {
                store: parts.store,
                deposit: parts.deposit,
                queue: parts.queue,
                wakeup: parts.wakeup,
                signers,
                accepted: parts.accepted,
                operations: parts.operations,
            });
            let tls = shell.config.web_tls;
            let (bound, task) = web::start(shell.clone(), web_parts, address, tls).await?;
            tasks.push(task);
            Some(bound)
        }
        None => None,
    };
    Ok(Running {
        addresses,
        metrics,
        web,
        shell,
        shutdown,
        tasks,
    })
}

impl Running {
    /// The certificate served now.
    pub fn certificate(&self) -> Certificate {
        self.shell.live().certificate.clone()
    }

    /// Applies a new configuration without dropping a session: re-reads the certificate and
    /// key, takes the new limits, deadlines and policies for new connections and logins,
    /// and names the settings that need a restart. On error (a certificate that does not
    /// load, limits that contradict each other) nothing changes.
    pub fn reload(&self, new: &ServerConfig) -> Result<Reloaded> {
        reload::reload(&self.shell, new)
    }

    /// The shell's counters, to read while it runs (the stats file).
    pub fn counters(&self) -> Counters {
        Counters {
            connections: self.shell.connections.clone(),
            inflight: self.shell.inflight.clone(),
        }
    }

    /// Stops accepting, tells every session (parked ones woken to say goodbye), and waits up
    /// to 5 s for them to close after their current command; then stops the web view and the
    /// metrics.
    pub async fn stop(self) {
        let _ = self.shutdown.send(true);
        self.shell.parking.close();
        let (accept, others) = self.tasks.split_at(self.shell.config.listeners.len());
        for task in accept {
            task.abort();
        }
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        while self.shell.connections.open() > 0 && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        for task in others {
            task.abort();
        }
    }
}
