//! A running node, `mailstow serve`: the parts of the system wired together, in the order
//! that makes a start safe, and stopped in the reverse.
//!
//! Start, one phase each: the settings and any configured certificate are checked and the
//! mail listeners bound (`server::bind`) before anything is created or opened, so a server
//! that cannot serve leaves no data directory behind; the data directory is made and locked
//! and the engines (queue, store) and the directory opened ([`Engines`]); the mailboxes' parts built over them (sessions, gate, the
//! one road into the store, accounts); in a cluster, the node joins ([`Joined`]: lease,
//! record of handed-over copies, moves); delivery threads start ([`Delivering`]); the
//! connection shell serves the mail listeners and binds the optional ones, the web view and
//! the metrics, or goes on trying them in the background (`server::start`); deletions and
//! renames a crash cut short are finished; the admin socket, the moves' watch, the stats file and the record's
//! sync start; and `/healthz` turns ready. A failure in any phase stops the start with what
//! it could not do, and nothing opened before it stays held (each part closes on drop).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use anyhow::{Context as _, Result};
use server::{DataDirLock, Reloaded, ServerConfig};
use tokio::task::JoinHandle;

/// The engines and the directory, opened under the data directory's lock.
struct Engines {
    queue: Arc<queue::Queue>,
    store: Arc<store::Store>,
    directory: directory::Directory,
    disk: Arc<dyn disk::Disk>,
    /// The free space kept on the data directory's file system (`disk_reserve_bytes`).
    space: Arc<disk::SpaceReserve>,
    /// Reloads the directory's cache when another process changed it.
    refresher: JoinHandle<()>,
    /// Held until the store's last checkpoint: only then may another process open them.
    lock: Option<DataDirLock>,
    /// The engines' files mirrored to the replica partner (`[cluster] replicas = 2`).
    replication: Option<crate::replica::Replication>,
}

/// Who is logged in, who may write, and the one road into the store.
struct Mail {
    telemetry: Arc<telemetry::Telemetry>,
    deposit: Arc<mailboxes::Deposit>,
    sessions: mailboxes::Sessions,
    parking: server::Parking,
    accounts: mailboxes::Accounts,
    /// Copies delivered since start (local, handed over and remote).
    delivered: Arc<AtomicU64>,
}

/// This node's part of a cluster.
struct Joined {
    cluster: Arc<cluster::Cluster>,
    handover: Arc<cluster::HandOver>,
    moves: Arc<cluster::Moves>,
    lease: JoinHandle<()>,
}

/// The delivery threads and what drives them.
struct Delivering {
    wakeup: Arc<delivery::Wakeup>,
    stop: Arc<AtomicBool>,
    workers: Vec<std::thread::JoinHandle<()>>,
    peers: Option<Arc<delivery::peer::PeerPath>>,
    /// Hands copies that waited for a node over as soon as it is back (cluster).
    wake_on_return: Option<JoinHandle<()>>,
}

/// A running node.
pub(crate) struct Node {
    pub(crate) running: server::Running,
    data_dir: PathBuf,
    engines: Engines,
    joined: Option<Joined>,
    delivering: Delivering,
    health: Arc<server::Health>,
    /// The admin socket, the moves' watch, the stats file, the record's sync.
    tasks: Vec<JoinHandle<()>>,
    shutdown: tokio::sync::watch::Sender<bool>,
}

impl Node {
    /// A node this machine took over (`serve --host-node`) registers the addresses it bound,
    /// so the other nodes hand its mail and its users' sessions here.
    pub(crate) async fn advertise_hosted(&self) -> Result<()> {
        let Some(joined) = &self.joined else {
            return Ok(());
        };
        let bound = |service| {
            self.running
                .addresses
                .iter()
                .find(|(s, _)| *s == service)
                .map(|(_, a)| a.to_string())
        };
        let required = |service: server::Service| {
            bound(service)
                .with_context(|| format!("a hosted node needs its {} listener", service.name()))
        };
        self.engines
            .directory
            .set_node_addresses(
                &joined.cluster.node,
                &required(server::Service::Lmtp)?,
                &required(server::Service::Imap)?,
                &required(server::Service::Pop3)?,
                self.running.web.map(|a| a.to_string()).as_deref(),
                bound(server::Service::ManageSieve).as_deref(),
            )
            .await
            .context("registering the hosted node's addresses")?;
        tracing::info!(event = "hosting", node = %joined.cluster.node, result = "serving");
        Ok(())
    }

    pub(crate) async fn start(config: ServerConfig) -> Result<Node> {
        // The settings and a configured certificate, before anything is opened or bound; the
        // mail listeners before anything is created.
        server::validate(&config)?;
        // A node taken over while this machine was away gets its files back first.
        if let Some(cluster) = &config.cluster
            && config.cluster_replicas > 1
            && !config.cluster_hosted
        {
            let directory = open_directory(&config).await?;
            crate::replica::standby_if_taken_over(&config, cluster, directory).await?;
        }
        let listeners = server::bind(&config).await?;
        let health = Arc::new(server::Health::starting());
        let engines = Engines::open(&config).await?;
        let mail = Mail::build(&config, &engines);
        let joined = match &config.cluster {
            Some(cluster) => Some(Joined::join(&config, cluster, &engines, &mail)?),
            None => None,
        };
        // Redirected mail's reverse path (SRS) is keyed by a secret every node shares, so
        // a bounce reaching any node is taken back.
        let srs = Arc::new(sender_auth::Srs::new(
            engines
                .directory
                .secret("srs")
                .await
                .context("reading the SRS secret from the directory")?
                .as_bytes(),
        ));
        // TLS-RPT and DMARC reports (server::Reports): counted by the SMTP shell and by
        // delivery's outbound sessions, sent from the queue every hour. Without them (a
        // resolver that cannot be built) the node still serves.
        let reports = match server::Reports::start(
            &config.dns_servers,
            &config.hostname,
            engines.directory.clone(),
            mail.telemetry.clone(),
        ) {
            Ok(reports) => Some(reports),
            Err(e) => {
                tracing::warn!(event = "report_error", error = %format!("{e:#}"), msg = "reports are off");
                None
            }
        };
        // Outbound sessions' TLS outcomes: counted for TLS-RPT (and logged), or only logged.
        let tls_results: Arc<dyn delivery::TlsResults> = match &reports {
            Some(reports) => Arc::new(reports.clone()),
            None => Arc::new(LoggedTlsResults(mail.telemetry.clone())),
        };
        let delivering = Delivering::start(
            &config,
            &engines,
            &mail,
            joined.as_ref(),
            srs.clone(),
            tls_results,
        )?;
        let report_sender = reports.clone().map(|reports| {
            Arc::new(server::ReportSender {
                reports,
                queue: engines.queue.clone(),
                wakeup: delivering.wakeup.clone(),
            })
        });
        let throttle = Arc::new(server::Throttle::new(config.throttle));
        // The spam filter (docs/spam.md): its blocklist lookups ask the configured name
        // servers; its trainer reads moved messages from the store.
        let resolver = if config.spam.dnsbl.is_empty() {
            None
        } else {
            Some(
                sender_auth::resolver(&config.dns_servers, Duration::from_secs(2), 1)
                    .context("setting up the blocklists' DNS resolver")?,
            )
        };
        let filter = filter::Filter::new(
            config.spam.clone(),
            engines.directory.clone(),
            mail.telemetry.clone(),
            &config.hostname,
            resolver,
        );
        filter.start_training(engines.store.clone());
        let renewals = Arc::new(server::Renewals::default());
        let operations = Arc::new(admin::Operations {
            certificates: config
                .acme
                .is_some()
                .then(|| renewals.clone() as Arc<dyn admin::CertificateRenewal>),
            filter: Some(filter.clone()),
            data_dir: config.data_dir.clone(),
            node_name: joined
                .as_ref()
                .map_or_else(|| config.hostname.clone(), |j| j.cluster.node.clone()),
            queue: engines.queue.clone(),
            store: engines.store.clone(),
            directory: engines.directory.clone(),
            accounts: mail.accounts.clone(),
            deposit: mail.deposit.clone(),
            wakeup: delivering.wakeup.clone(),
            telemetry: mail.telemetry.clone(),
            logins: throttle.clone(),
            reports: report_sender
                .clone()
                .map(|s| s as Arc<dyn admin::ReportSending>),
        });
        let accepted = Arc::new(AtomicU64::new(0));
        let running = server::start(
            config.clone(),
            server::Parts {
                queue: engines.queue.clone(),
                store: engines.store.clone(),
                directory: engines.directory.clone(),
                deposit: mail.deposit.clone(),
                sessions: mail.sessions.clone(),
                parking: mail.parking.clone(),
                throttle,
                telemetry: mail.telemetry.clone(),
                wakeup: delivering.wakeup.clone(),
                accepted: accepted.clone(),
                health: health.clone(),
                space: engines.space.clone(),
                cluster: joined.as_ref().map(|j| j.cluster.clone()),
                handover: joined.as_ref().map(|j| j.handover.clone()),
                moves: joined.as_ref().map(|j| j.moves.clone()),
                operations: operations.clone(),
                srs,
                filter,
                renewals,
                reports,
            },
            listeners,
        )
        .await?;
        // Users deleted while no server ran, or whose removal a crash cut short.
        mail.accounts.finish_deletions().await;
        // Renames a crash cut short, or begun by an offline `user rename` that did not finish.
        mail.accounts.finish_renames().await;
        let (shutdown, watch) = tokio::sync::watch::channel(false);
        let mut tasks =
            vec![admin::socket::start(operations).context("starting the admin socket")?];
        if let Some(joined) = &joined {
            tasks.push(tokio::spawn(cluster::moves::watch(
                joined.moves.clone(),
                watch,
            )));
        }
        if let Some(sender) = &report_sender {
            tasks.push(sender.spawn_hourly());
        }
        tasks.push(tokio::spawn(write_stats(Stats {
            path: stats_path(&config.data_dir),
            queue: engines.queue.clone(),
            store: engines.store.clone(),
            accepted,
            delivered: mail.delivered.clone(),
            peers: delivering.peers.clone(),
            shell: running.counters(),
        })));
        tasks.push(tokio::spawn(watch_storage(
            health.clone(),
            engines.space.clone(),
            engines.queue.clone(),
            engines.store.clone(),
        )));
        // Every mail listener is served and the engines are open.
        health.clear(server::Component::Lifecycle);
        Ok(Node {
            running,
            data_dir: config.data_dir.clone(),
            engines,
            joined,
            delivering,
            health,
            tasks,
            shutdown,
        })
    }

    /// Applies a new configuration to the connection shell (see `server::Running::reload`).
    pub(crate) fn reload(&self, new: &ServerConfig) -> Result<Reloaded> {
        self.running.reload(new)
    }

    /// Stops accepting, ends sessions, gives up the lease, stops delivery and closes the
    /// queue and the store.
    pub(crate) async fn stop(self) -> Result<()> {
        self.health.set(server::Component::Lifecycle, "stopping");
        let _ = self.shutdown.send(true);
        for task in &self.tasks {
            task.abort();
        }
        admin::socket::remove_socket(&self.data_dir);
        // Sessions close after their current command (parked ones woken to say goodbye).
        self.running.stop().await;
        self.engines.refresher.abort();
        if let Some(joined) = &self.joined {
            joined.lease.abort();
            // Down for the other nodes now, not when the lease would have run out: they stop
            // proxying to us at once (their users are told UNAVAILABLE, mail waits).
            if let Err(e) = self
                .engines
                .directory
                .renew_lease(&joined.cluster.node, Duration::ZERO)
                .await
            {
                tracing::warn!(event = "directory_error", error = %e, msg = "could not give up the lease");
            }
        }
        self.delivering.stop().await;
        // A node another machine serves now writes nothing more (docs/replication.md).
        let taken_over = self
            .engines
            .replication
            .as_ref()
            .is_some_and(|r| r.mirror.is_taken_over());
        if !taken_over {
            self.engines
                .store
                .checkpoint()
                .context("checkpointing the store")?;
        }
        // The checkpoint is on the partner too; nothing is written after it.
        if let Some(replication) = &self.engines.replication {
            replication.stop();
        }
        // Only now may another process open the engines.
        drop(self.engines.lock);
        Ok(())
    }
}

impl Engines {
    /// The data directory (made and locked), the open-file limit, the queue, the store and
    /// the directory.
    async fn open(config: &ServerConfig) -> Result<Engines> {
        std::fs::create_dir_all(&config.data_dir)
            .with_context(|| format!("creating {}", config.data_dir.display()))?;
        let lock = DataDirLock::acquire(&config.data_dir)?;
        crate::data_format::check(&config.data_dir)?;
        let files = server::raise_file_limit();
        if (files as usize) < config.connections_max + 64 {
            tracing::warn!(
                event = "file_limit",
                open_files_max = files,
                connections_max = config.connections_max,
                msg = "the open-file limit is below connections_max + 64 (for the engines)"
            );
        }
        // The directory first: with replication the engines' disk streams to the partner
        // it names.
        let directory = open_directory(config).await?;
        if let Some(cluster) = &config.cluster
            && !config.cluster_hosted
            && let Some(info) = directory.cache().node(&cluster.node)
            && let Some(host) = info.host.filter(|h| *h != cluster.node)
        {
            // docs/replication.md, "Failover": the files here are older than the copy the
            // other machine serves; opening them would answer with stale mail.
            anyhow::bail!(
                "node {} was taken over by {host} (epoch {}): {host} serves its users from its \
                 copy, and the files in {} are stale; rebuild this machine as the node's \
                 replica with `mailstow node replace {}`",
                cluster.node,
                info.epoch,
                config.data_dir.display(),
                cluster.node
            );
        }
        let real: Arc<dyn disk::Disk> = Arc::new(disk::RealDisk);
        let (replication, disk) = match &config.cluster {
            Some(cluster) if config.cluster_replicas > 1 => {
                let (replication, disk) =
                    crate::replica::start(config, cluster, &directory, real).await?;
                (Some(replication), disk)
            }
            _ => (None, real),
        };
        let queue_dir = config.data_dir.join("queue");
        let store_dir = config.data_dir.join("store");
        for dir in [&queue_dir, &store_dir] {
            std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        }
        // The engines' growth leaves the reserve free too (docs/storage.md, "A full disk").
        let queue_config = queue::QueueConfig {
            disk_reserve_bytes: config.disk_reserve_bytes,
            ..config.queue.clone()
        };
        let (queue, queue_report) = queue::Queue::open(disk.clone(), &queue_dir, queue_config)
            .context("opening the queue")?;
        let store_config = store::StoreConfig {
            summary_cache_bytes_max: config.imap_header_cache_bytes_max,
            view_cache_bytes_max: config.imap_view_cache_bytes_max,
            disk_reserve_bytes: config.disk_reserve_bytes,
            delivered_keys_max: config.cluster_delivered_max,
            delivered_keys_retain: delivered_keys_retain(),
            ..config.store.clone()
        };
        let (store, _) = store::Store::open(disk.clone(), &store_dir, store_config)
            .context("opening the store")?;
        crate::data_format::record(&config.data_dir)?;
        tracing::info!(
            event = "queue_opened",
            pending = queue_report.pending,
            deferred = queue_report.deferred
        );
        let space =
            disk::SpaceReserve::new(disk.clone(), &config.data_dir, config.disk_reserve_bytes);
        Ok(Engines {
            queue: Arc::new(queue),
            store,
            space,
            refresher: directory.spawn_refresher(Duration::from_secs(2)),
            directory,
            disk,
            lock,
            replication,
        })
    }
}

/// How often `/healthz`'s storage reasons are looked at again.
const STORAGE_WATCH_INTERVAL: Duration = Duration::from_millis(250);

/// Keeps `/healthz`'s storage reasons current: the disk below the free-space reserve (new
/// mail refused at the door until space comes back), or an engine that cannot write. Each
/// is set while it holds and cleared when it passes.
async fn watch_storage(
    health: Arc<server::Health>,
    space: Arc<disk::SpaceReserve>,
    queue: Arc<queue::Queue>,
    store: Arc<store::Store>,
) {
    let mut tick = tokio::time::interval(STORAGE_WATCH_INTERVAL);
    loop {
        tick.tick().await;
        // Off the runtime's threads: `statvfs`, and the store's writer lock, which a group
        // commit holds through its fdatasync.
        let (space, queue, store) = (space.clone(), queue.clone(), store.clone());
        let looked = tokio::task::spawn_blocking(move || {
            [
                (
                    server::Component::Disk,
                    space
                        .check(0)
                        .err()
                        .map(|shortage| format!("disk full: {shortage}")),
                ),
                (server::Component::Queue, queue.write_problem()),
                (server::Component::Store, store.write_problem()),
            ]
        })
        .await;
        let Ok(reasons) = looked else {
            continue;
        };
        for (component, reason) in reasons {
            match reason {
                Some(reason) => health.set(component, reason),
                None => health.clear(component),
            }
        }
    }
}

/// The directory: SQLite in the data directory unless configured; a cluster's must be the
/// PostgreSQL every node shares.
async fn open_directory(config: &ServerConfig) -> Result<directory::Directory> {
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
    directory::Directory::open_at(
        &location,
        directory::Options {
            hash_concurrency_max: config.hash_concurrency_max,
            hash_memory_bytes_max: config.hash_memory_bytes_max,
            hash_queue_max: config.hash_queue_max,
            password_length_min: config.password_length_min,
            postmaster: config.postmaster.clone(),
            sieve_scripts_max: config.sieve_scripts_max,
            sieve_script_bytes_max: config.sieve.script_bytes_max,
            ..directory::Options::default()
        },
    )
    .await
    .context("opening the directory")
}

impl Mail {
    /// The telemetry (with the engines' counters), the gate, the road into the store, the
    /// parking lot and the sessions it wakes, the accounts; and the store's observer, so a
    /// session in IDLE wakes on its user's changes, whoever made them.
    fn build(config: &ServerConfig, engines: &Engines) -> Mail {
        let gate = Arc::new(match &config.cluster {
            Some(cluster) => {
                mailboxes::Gate::cluster(cluster.node.clone(), engines.directory.clone())
            }
            None => mailboxes::Gate::single(),
        });
        let telemetry = telemetry::Telemetry::new();
        let delivered = Arc::new(AtomicU64::new(0));
        let deposit = Arc::new(mailboxes::Deposit::new(
            engines.store.clone(),
            gate.clone(),
            telemetry.clone(),
            delivered.clone(),
        ));
        let parking = server::Parking::default();
        let sessions = mailboxes::Sessions::new(config.imap_sessions_per_user_max, parking.waker());
        telemetry.register_engines(engines.queue.clone(), engines.store.clone(), {
            let parking = parking.clone();
            Box::new(move || parking.len())
        });
        if let Some(replication) = &engines.replication {
            let mirror = replication.mirror.clone();
            telemetry.register_replica_lag(Box::new(move || mirror.status().lag_seconds));
        }
        let observed = sessions.clone();
        engines
            .store
            .set_observer(Arc::new(move |user: &str| observed.changed(user)));
        let accounts = mailboxes::Accounts {
            directory: engines.directory.clone(),
            store: engines.store.clone(),
            sessions: sessions.clone(),
            gate,
        };
        Mail {
            telemetry,
            deposit,
            sessions,
            parking,
            accounts,
            delivered,
        }
    }
}

impl Joined {
    /// The lease that says this node is up, the record of copies handed over and stored
    /// here, the hand-over taker and the moves.
    fn join(
        config: &ServerConfig,
        cluster: &cluster::ClusterConfig,
        engines: &Engines,
        mail: &Mail,
    ) -> Result<Joined> {
        let directory = &engines.directory;
        if directory.cache().node(&cluster.node).is_none() {
            anyhow::bail!(
                "node {} is not in the directory: add it with `mailstow node add`",
                cluster.node
            );
        }
        // The keys of handed-over copies live in the store now (docs/cluster.md,
        // "Duplicates"): the file that held them before is read into it once.
        let migrated = cluster::migrate_delivered_record(
            &*engines.disk,
            &config.data_dir,
            &engines.store,
            delivered_keys_retain(),
        )
        .context("moving cluster-delivered's keys into the store")?;
        if migrated > 0 {
            tracing::info!(
                event = "cluster_delivered_migrated",
                keys = migrated,
                msg = "cluster-delivered's keys are in the store; the file is removed"
            );
        }
        let handover = Arc::new(
            cluster::HandOver::new(
                cluster.node.clone(),
                directory.clone(),
                mail.deposit.clone(),
            )
            .context("starting the hand-over committer thread")?,
        );
        let tls = Arc::new(opportunistic_tls::client_config());
        let node = Arc::new(cluster::Cluster::new(cluster, tls));
        let moves = Arc::new(cluster::Moves::new(
            node.clone(),
            mail.accounts.clone(),
            mail.deposit.clone(),
        ));
        if let Some(replication) = &engines.replication {
            let _ = replication.cluster.set(node.clone());
        }
        let lease = match &engines.replication {
            // Fenced by its own clock, and at its epoch (docs/replication.md, "Failover").
            Some(replication) => crate::replica::spawn_lease(
                directory.clone(),
                cluster.node.clone(),
                replication.mirror.clone(),
                node.clone(),
                replication.renewing_since.clone(),
            ),
            None => directory.spawn_lease(&cluster.node, cluster::LEASE_RENEW, cluster::LEASE_TTL),
        };
        Ok(Joined {
            lease,
            cluster: node,
            handover,
            moves,
        })
    }
}

impl Delivering {
    /// The delivery threads, routing from the directory, the gate and this node's name,
    /// with the outbound path the configuration names and, in a cluster, the peers.
    fn start(
        config: &ServerConfig,
        engines: &Engines,
        mail: &Mail,
        joined: Option<&Joined>,
        srs: Arc<sender_auth::Srs>,
        tls_results: Arc<dyn delivery::TlsResults>,
    ) -> Result<Delivering> {
        let wakeup = Arc::new(delivery::Wakeup::default());
        // Users' rules run at final delivery (the deposit), from the first delivery on;
        // what they send goes through the queue.
        let outbox = Arc::new(server::QueueOutbox::new(
            engines.queue.clone(),
            wakeup.clone(),
            engines.directory.clone(),
            mail.telemetry.clone(),
            srs,
        ));
        mail.deposit.set_rules(Arc::new(mailboxes::Rules::new(
            engines.directory.clone(),
            engines.store.clone(),
            outbox,
            mail.telemetry.clone(),
            config.sieve.clone(),
            config.hostname.clone(),
            tokio::runtime::Handle::current(),
        )));
        let stop = Arc::new(AtomicBool::new(false));
        let router: Arc<dyn delivery::Router> = Arc::new(delivery::DirectoryRouter {
            directory: engines.directory.clone(),
            node: joined.map(|j| j.cluster.node.clone()),
            gate: mail.deposit.gate().clone(),
        });
        let peers = joined.map(|j| {
            Arc::new(delivery::peer::PeerPath::new(
                delivery::peer::Peers::new(&j.cluster.node, &config.hostname),
                tokio::runtime::Handle::current(),
            ))
        });
        let wake_on_return = peers.clone().map(|peers| {
            tokio::spawn(delivery::wake_on_return(
                engines.directory.clone(),
                engines.queue.clone(),
                wakeup.clone(),
                peers,
                joined.map(|j| j.cluster.clone()),
            ))
        });
        let outbound = outbound(config, tls_results)?;
        let mut workers = Vec::new();
        for n in 0..config.delivery_threads.max(1) {
            let worker = delivery::Delivery {
                queue: engines.queue.clone(),
                router: router.clone(),
                wakeup: wakeup.clone(),
                stop: stop.clone(),
                hostname: config.hostname.clone(),
                delivered: mail.delivered.clone(),
                outbound: outbound.clone(),
                deposit: mail.deposit.clone(),
                events: mail.telemetry.clone(),
                peers: peers.clone(),
                space: engines.space.clone(),
            };
            workers.push(
                std::thread::Builder::new()
                    .name(format!("delivery-{n}"))
                    .spawn(move || worker.run())
                    .context("starting a delivery thread")?,
            );
        }
        Ok(Delivering {
            wakeup,
            stop,
            workers,
            peers,
            wake_on_return,
        })
    }

    /// Stops the threads after their current batch.
    async fn stop(self) {
        if let Some(task) = &self.wake_on_return {
            task.abort();
        }
        self.stop.store(true, Ordering::Relaxed);
        self.wakeup.notify();
        let workers = self.workers;
        tokio::task::spawn_blocking(move || {
            for worker in workers {
                let _ = worker.join();
            }
        })
        .await
        .ok();
    }
}

/// Where mail for other domains goes: the smarthost, each domain's exchangers, or nowhere
/// (it waits in the deferred queue). Direct delivery plans its sessions with MTA-STS and DANE
/// (`[server] outbound_mta_sts`, `outbound_dane`): the policies are cached in
/// `<data_dir>/mta-sts`, kept across restarts, and each session's TLS outcome is reported.
fn outbound(
    config: &ServerConfig,
    tls_results: Arc<dyn delivery::TlsResults>,
) -> Result<Option<Arc<delivery::Outbound>>> {
    let path = match (&config.relay, &config.direct) {
        (Some(relay), _) => delivery::Path::Relay(relay.clone()),
        (None, Some(direct)) => {
            let planner = if direct.transport.mta_sts || direct.transport.dane {
                let cache_dir = config.data_dir.join("mta-sts");
                std::fs::create_dir_all(&cache_dir)
                    .with_context(|| format!("creating {}", cache_dir.display()))?;
                let resolvers = if direct.dns_servers.is_empty() {
                    system_name_servers()
                } else {
                    direct.dns_servers.clone()
                };
                Some(Arc::new(
                    transport_policy::Planner::new(
                        resolvers,
                        Some(&cache_dir),
                        direct.transport.clone(),
                    )
                    .context("[server] tls_roots_file")?,
                ))
            } else {
                None
            };
            delivery::Path::Mx(Box::new(delivery::outbound::Mx {
                // A slow or dead name server must not hold a delivery batch for long: 2 tries
                // of 5 s.
                resolver: sender_auth::resolver(&direct.dns_servers, Duration::from_secs(5), 2)
                    .context("building the DNS resolver")?,
                port: direct.mx_port,
                planner,
                tls_results: Some(tls_results),
            }))
        }
        (None, None) => return Ok(None),
    };
    Ok(Some(Arc::new(delivery::Outbound {
        path,
        clients: delivery::outbound::Clients::new(),
        runtime: tokio::runtime::Handle::current(),
        hostname: config.hostname.clone(),
    })))
}

/// The name servers of `/etc/resolv.conf` (port 53), for the transport planner's own DNS
/// client when `[server] dns_servers` names none. DANE trusts their AD bit: a local validating
/// resolver (RFC 7672 1.3).
fn system_name_servers() -> Vec<std::net::SocketAddr> {
    std::fs::read_to_string("/etc/resolv.conf")
        .unwrap_or_default()
        .lines()
        .filter_map(|line| line.trim().strip_prefix("nameserver"))
        .filter_map(|ip| ip.trim().parse::<std::net::IpAddr>().ok())
        .map(|ip| std::net::SocketAddr::new(ip, 53))
        .collect()
}

/// Each outbound session's TLS outcome into telemetry (`event=outbound_tls`, counted by
/// policy and result).
struct LoggedTlsResults(Arc<telemetry::Telemetry>);

impl delivery::TlsResults for LoggedTlsResults {
    fn record(
        &self,
        policy: &transport_policy::AppliedPolicy,
        mx_host: &str,
        _ip: std::net::IpAddr,
        result: Option<transport_policy::ResultType>,
        detail: &str,
    ) {
        self.0.outbound_tls(&telemetry::TlsSession {
            domain: &policy.domain,
            mx_host,
            policy: policy.kind.as_str(),
            result: result.map_or("success", transport_policy::ResultType::as_str),
            detail,
        });
    }
}

/// Where the server writes its counters once a second.
pub(crate) fn stats_path(data_dir: &Path) -> PathBuf {
    data_dir.join("stats")
}

/// What the stats file counts.
struct Stats {
    path: PathBuf,
    queue: Arc<queue::Queue>,
    store: Arc<store::Store>,
    accepted: Arc<AtomicU64>,
    delivered: Arc<AtomicU64>,
    peers: Option<Arc<delivery::peer::PeerPath>>,
    shell: server::Counters,
}

/// Writes `<data_dir>/stats` once a second: `name value` lines that scripts and operators can
/// read without talking to the server (replaced atomically, never half written).
/// In a cluster, `peer_*` are the handovers' LMTP bytes sent and received and the
/// connections they opened.
async fn write_stats(stats: Stats) {
    let tmp = stats.path.with_extension("tmp");
    loop {
        let queue = stats.queue.stats();
        // Counters only: `Store::stats` would walk every folder under the writer lock.
        let store = stats.store.io_counters();
        let peer = stats.peers.as_ref().map_or((0, 0, 0), |p| {
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
            stats.accepted.load(Ordering::Relaxed),
            stats.delivered.load(Ordering::Relaxed),
            stats.shell.open_connections(),
            queue.pending_messages,
            queue.deferred_messages,
            queue.bounces,
            queue.fdatasyncs,
            store.data_syncs,
            store.journal_syncs,
            store.messages_appended,
            stats.shell.inflight_reserved(),
            stats.shell.inflight_refusals(),
            peer.0,
            peer.1,
            peer.2,
        );
        if std::fs::write(&tmp, text).is_ok() {
            let _ = std::fs::rename(&tmp, &stats.path);
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// How long an owner keeps the key of a handed-over copy: no origin hands a copy over again
/// after its queue's lifetime (and a day more, for clocks).
fn delivered_keys_retain() -> Duration {
    delivery::RETRY_FOR + Duration::from_secs(86_400)
}
