//! The connection shell started over the parts a node opened (the CLI's `serve` opens the
//! engines, the directory, the cluster, delivery and the operator's socket, then starts
//! this): the mail listeners (bound by [`bind`] before the node creates anything) served, the
//! web view and the metrics served, until [`Running::stop`].
//!
//! The mail listeners are the service: one that cannot be bound stops the start. The web view
//! and the metrics are optional: one that cannot be bound is logged (`event=listen_failed`),
//! named in `/healthz` (`health::Component::Web`, `Metrics`) and bound again in the
//! background, first after [`OPTIONAL_RETRY_MIN`], then at doubling intervals up to
//! [`OPTIONAL_RETRY_MAX`], while the mail services run.

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
use crate::metrics;
use crate::park::Parking;
use crate::pop3_conn::{Maildrops, Pop3Parts};
use crate::reload::{self, Reloaded};
use crate::service::Service;
use crate::shell::Shell;
use crate::smtp_conn::SmtpParts;
use crate::throttle::Throttle;
use crate::tls::{Certificate, TlsSource};
use crate::web::{self, Door, WebParts};
use health::{Component, Health};

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
    /// Takes back the reverse paths of mail the rules redirected (bounces to `SRS0=...`).
    pub srs: Arc<sender_auth::Srs>,
    /// The spam filter and the milters (docs/spam.md).
    pub filter: Arc<filter::Filter>,
    /// `mailstow acme renew`'s way to the certificate manager (run when `[acme]` is set).
    pub renewals: Arc<crate::certificates::Renewals>,
    /// TLS-RPT and DMARC reports (`crate::reporting`); `None`: nothing counted, report
    /// addresses are ordinary ones.
    pub reports: Option<crate::Reports>,
}

/// The first wait before an optional listener (web, metrics) that could not be bound is
/// tried again; each further wait doubles, up to [`OPTIONAL_RETRY_MAX`].
pub const OPTIONAL_RETRY_MIN: Duration = Duration::from_secs(5);
/// The longest wait between two tries of an optional listener.
pub const OPTIONAL_RETRY_MAX: Duration = Duration::from_secs(60);

/// The mail listeners, bound: [`bind`]'s result, for [`start`].
pub struct Listeners(Vec<(Service, TcpListener)>);

/// Binds every mail listener of `config`, failing on the first that cannot be bound (naming
/// its service and address). The node calls it before it creates or opens anything, so a
/// server that cannot serve leaves nothing behind.
pub async fn bind(config: &ServerConfig) -> Result<Listeners> {
    let mut bound = Vec::new();
    for &(service, address) in &config.listeners {
        let listener = TcpListener::bind(address)
            .await
            .with_context(|| format!("{}: cannot listen on {address}", service.name()))?;
        bound.push((service, listener));
    }
    Ok(Listeners(bound))
}

/// An optional listener that could not be bound at start (it is being tried again).
pub struct Unbound {
    /// `web` or `metrics`.
    pub service: &'static str,
    pub address: SocketAddr,
    /// Why the bind failed.
    pub error: String,
}

/// The running shell: its bound addresses, and how to reload or stop it.
pub struct Running {
    pub addresses: Vec<(Service, SocketAddr)>,
    /// Where `/metrics` and `/healthz` are served, when configured and bound at start.
    pub metrics: Option<SocketAddr>,
    /// Where the web view is served, when configured and bound at start.
    pub web: Option<SocketAddr>,
    /// Where the public HTTPS listener is, when configured and bound at start.
    pub https: Option<SocketAddr>,
    /// Where the plain HTTP listener is, when configured and bound at start.
    pub http: Option<SocketAddr>,
    /// The optional listeners not bound at start.
    pub unbound: Vec<Unbound>,
    shell: Arc<Shell>,
    shutdown: tokio::sync::watch::Sender<bool>,
    /// The mail listeners' accept loops first ([`Running::accept_tasks`] of them), then the
    /// optional listeners'.
    tasks: Vec<tokio::task::JoinHandle<()>>,
    accept_tasks: usize,
}

/// An optional listener: the web view or the metrics.
struct Optional {
    component: Component,
    address: SocketAddr,
    health: Arc<Health>,
}

impl Optional {
    /// Binds the listener and serves it with `serve`; when it cannot be bound, logs it, names
    /// it in `/healthz` and tries again in the background ([`OPTIONAL_RETRY_MIN`] to
    /// [`OPTIONAL_RETRY_MAX`]). The task serves (or tries) until aborted.
    async fn start<F, S>(
        self,
        serve: S,
    ) -> (Result<SocketAddr, Unbound>, tokio::task::JoinHandle<()>)
    where
        S: FnOnce(TcpListener) -> F + Send + 'static,
        F: std::future::Future<Output = ()> + Send + 'static,
    {
        match self.bind().await {
            Ok((listener, address)) => (Ok(address), tokio::spawn(serve(listener))),
            Err(error) => {
                let unbound = Unbound {
                    service: self.component.name(),
                    address: self.address,
                    error,
                };
                let task = tokio::spawn(async move {
                    let listener = self.retry().await;
                    serve(listener).await;
                });
                (Err(unbound), task)
            }
        }
    }

    /// One try: the listener and its address, or why not (logged, and set in the health).
    async fn bind(&self) -> Result<(TcpListener, SocketAddr), String> {
        let bound = match TcpListener::bind(self.address).await {
            Ok(listener) => listener.local_addr().map(|address| (listener, address)),
            Err(e) => Err(e),
        };
        match bound {
            Ok(bound) => {
                self.health.clear(self.component);
                Ok(bound)
            }
            Err(e) => {
                let error = e.to_string();
                tracing::error!(
                    event = "listen_failed",
                    service = self.component.name(),
                    address = %self.address,
                    error = %error,
                    msg = "the mail services go on; tried again in the background"
                );
                self.health.set(
                    self.component,
                    format!(
                        "{} listener not bound: {}: {error}",
                        self.component.name(),
                        self.address
                    ),
                );
                Err(error)
            }
        }
    }

    /// Tries again at doubling intervals until the listener is bound.
    async fn retry(&self) -> TcpListener {
        let mut wait = OPTIONAL_RETRY_MIN;
        loop {
            tokio::time::sleep(wait).await;
            if let Ok((listener, address)) = self.bind().await {
                tracing::info!(
                    event = "listening",
                    service = self.component.name(),
                    address = %address
                );
                return listener;
            }
            wait = (wait * 2).min(OPTIONAL_RETRY_MAX);
        }
    }
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

/// Builds the shell over `parts`, serves the mail `listeners` and binds the optional ones
/// (or goes on trying in the background); returns once every mail listener is served.
pub async fn start(config: ServerConfig, parts: Parts, listeners: Listeners) -> Result<Running> {
    let inflight = limits::ByteBudget::new(config.inflight_bytes_max);
    let challenges = Arc::new(crate::tls::Challenges::default());
    let live = Live::build(config.clone(), &inflight, &challenges)?;
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
        challenges,
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
            srs: parts.srs,
            rules: parts.deposit.rules().cloned(),
            filter: parts.filter.clone(),
            reports: parts.reports.clone(),
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
            filter: parts.filter.clone(),
        }),
    });
    let (shutdown, watch) = tokio::sync::watch::channel(false);
    let mut addresses = Vec::new();
    let mut tasks = Vec::new();
    for (service, listener) in listeners.0 {
        addresses.push((service, listener.local_addr()?));
        tasks.push(tokio::spawn(accept_loop(
            shell.clone(),
            protocols.clone(),
            service,
            listener,
            watch.clone(),
        )));
    }
    let accept_tasks = tasks.len();
    let mut unbound = Vec::new();
    let mut metrics = None;
    if let Some(address) = shell.config.metrics {
        let telemetry = parts.telemetry.clone();
        let health = parts.health.clone();
        let optional = Optional {
            component: Component::Metrics,
            address,
            health: parts.health.clone(),
        };
        let (bound, task) = optional
            .start(move |listener| metrics::serve(listener, telemetry, health))
            .await;
        tasks.push(task);
        match bound {
            Ok(address) => metrics = Some(address),
            Err(failed) => unbound.push(failed),
        }
    }
    let mut web = None;
    let mut https = None;
    let mut http = None;
    let config = &shell.config;
    if config.web.is_some() || config.https.is_some() || config.http.is_some() {
        let web_parts = Arc::new(WebParts {
            store: parts.store,
            deposit: parts.deposit,
            queue: parts.queue,
            wakeup: parts.wakeup,
            signers,
            accepted: parts.accepted,
            operations: parts.operations,
            filter: parts.filter.clone(),
            published: Arc::new(crate::published::published(config, &addresses)),
        });
        let doors = [
            (
                config.web,
                Component::Web,
                Door::View {
                    tls: config.web_tls,
                },
                &mut web,
            ),
            (config.https, Component::Https, Door::Https, &mut https),
            (config.http, Component::Http, Door::Http, &mut http),
        ];
        for (address, component, door, bound_at) in doors {
            let Some(address) = address else { continue };
            let optional = Optional {
                component,
                address,
                health: parts.health.clone(),
            };
            let served = shell.clone();
            let web_parts = web_parts.clone();
            let (bound, task) = optional
                .start(move |listener| web::serve_on(served, web_parts, listener, door))
                .await;
            tasks.push(task);
            match bound {
                Ok(address) => *bound_at = Some(address),
                Err(failed) => unbound.push(failed),
            }
        }
    }
    // After the listeners that answer its challenges.
    if let (Some(acme), TlsSource::Acme { dir, .. }) = (&shell.config.acme, &shell.config.tls) {
        tasks.push(tokio::spawn(crate::certificates::run(
            shell.clone(),
            acme.clone(),
            dir.clone(),
            parts.renewals.clone(),
        )));
    }
    Ok(Running {
        addresses,
        metrics,
        web,
        https,
        http,
        unbound,
        accept_tasks,
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
        let (accept, others) = self.tasks.split_at(self.accept_tasks);
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
