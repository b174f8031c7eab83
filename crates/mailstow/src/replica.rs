//! Replication in a running node (docs/replication.md): the mirrored disk the engines get,
//! the listener the partner's stream arrives on, the task that follows the directory (who
//! the partner is, this node's epoch) and reports the lag, the lease that fences this node
//! by its own clock, and the take-over of a partner whose lease lapsed: its files, copied
//! here, are served by a second `mailstow serve` of this machine (`serve --host-node`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use tokio::task::JoinHandle;

use server::ServerConfig;

/// How often the partner is looked up again and the lag reported.
const WATCH_PERIOD: Duration = Duration::from_secs(1);
/// A directory write of the registry waits at most this long (then it is retried).
const RECORD_TIMEOUT: Duration = Duration::from_secs(5);
/// The node stops acknowledging this long before its lease ends by the database's clock,
/// for clocks that run at different rates (docs/replication.md, "Failover").
pub(crate) const FENCE_MARGIN: Duration = Duration::from_secs(1);
/// A lease renewal that has not answered within this long counts as failed.
const RENEW_TIMEOUT: Duration = Duration::from_secs(2);

/// The running parts; stopped by [`Replication::stop`].
pub(crate) struct Replication {
    pub(crate) mirror: replication::Mirror,
    /// None on a hosted node's process (`serve --host-node`): the machine's own node takes
    /// the streams.
    receiver: Option<Arc<replication::Receiver>>,
    /// The node's cluster state, once joined: a hand-over fences its logins.
    pub(crate) cluster: Arc<std::sync::OnceLock<Arc<cluster::Cluster>>>,
    watch: JoinHandle<()>,
    /// Since when this node's own lease renewals have all succeeded: a partner takes a node
    /// over only when it could itself renew for a whole lease meanwhile.
    pub(crate) renewing_since: Arc<Mutex<Option<Instant>>>,
    /// The nodes this machine took over, each served by a child `mailstow serve`.
    hosted: Arc<Mutex<Hosting>>,
}

/// Writes `nodes.replica` of this node (blocking: called from the mirror's own thread).
struct DirectoryRegistry {
    directory: directory::Directory,
    node: String,
    runtime: tokio::runtime::Handle,
}

impl replication::Registry for DirectoryRegistry {
    fn record(&self, epoch: u64, replica: Option<&str>) -> Result<(), String> {
        let write = self.directory.set_replica(&self.node, epoch, replica);
        self.runtime
            .block_on(async { tokio::time::timeout(RECORD_TIMEOUT, write).await })
            .map_err(|_| "the directory did not answer".to_string())?
            .map_err(|e| e.to_string())
    }
}

/// Who may stream here: a node of the directory whose partner this node is, at an epoch
/// not below the directory's.
struct PartnerAdmission {
    directory: directory::Directory,
    node: String,
}

impl replication::Admission for PartnerAdmission {
    fn admit(&self, node: &str, epoch: u64) -> Result<(), String> {
        let cache = self.directory.cache();
        let Some(info) = cache.node(node) else {
            return Err(format!("{node} is not a node of this cluster"));
        };
        if node == self.node {
            return Err("a node does not stream to itself".into());
        }
        let nodes = cache.nodes();
        if partner_of(&nodes, node).map(|p| p.name) != Some(self.node.clone()) {
            return Err(format!("{} is not the partner of {node}", self.node));
        }
        if epoch < info.epoch {
            return Err(format!(
                "stale epoch {epoch} (the directory has {})",
                info.epoch
            ));
        }
        Ok(())
    }
}

/// The partner of `node`: the next node after it, by name and round the ring, among the
/// nodes with a replication listener.
pub(crate) fn partner_of(nodes: &[directory::NodeInfo], node: &str) -> Option<directory::NodeInfo> {
    let mut candidates: Vec<&directory::NodeInfo> = nodes
        .iter()
        .filter(|n| n.name != node && n.replication.is_some())
        .collect();
    candidates.sort_by(|a, b| a.name.cmp(&b.name));
    candidates
        .iter()
        .find(|n| n.name.as_str() > node)
        .or_else(|| candidates.first())
        .map(|n| (*n).clone())
}

/// Starts replication for `cluster`'s node: returns the running parts and the disk the
/// engines must use.
pub(crate) async fn start(
    config: &ServerConfig,
    cluster: &cluster::ClusterConfig,
    directory: &directory::Directory,
    inner: Arc<dyn disk::Disk>,
) -> Result<(Replication, Arc<dyn disk::Disk>)> {
    let key = replication::stream_key(&cluster.secret);
    let receiver = if config.cluster_hosted {
        None
    } else {
        let listen = config
            .cluster_replication
            .as_deref()
            .context("[cluster] replication is needed with replicas = 2")?;
        let (receiver, bound) = listen_for_copies(
            listen,
            replication::ReceiverConfig::new(key, config.data_dir.join("replicas")),
            Arc::new(PartnerAdmission {
                directory: directory.clone(),
                node: cluster.node.clone(),
            }),
            directory,
            &cluster.node,
        )
        .await?;
        tracing::info!(event = "replication_started", node = %cluster.node, listen = %bound);
        Some(Arc::new(receiver))
    };
    let mut mirror_config = replication::MirrorConfig::new(&cluster.node, key, &config.data_dir);
    mirror_config.epoch = directory
        .cache()
        .node(&cluster.node)
        .map(|n| n.epoch)
        .unwrap_or(1);
    let (mirror, disk) = replication::Mirror::new(
        mirror_config,
        inner,
        Box::new(DirectoryRegistry {
            directory: directory.clone(),
            node: cluster.node.clone(),
            runtime: tokio::runtime::Handle::current(),
        }),
    )
    .context("starting replication")?;
    let hosted_here = config.cluster_hosted;
    follow(&mirror, directory, &cluster.node, hosted_here);
    let renewing_since = Arc::new(Mutex::new(None));
    let joined: Arc<std::sync::OnceLock<Arc<cluster::Cluster>>> = Arc::default();
    let hosted = Arc::new(Mutex::new(Hosting::default()));
    let watch = {
        let mirror = mirror.clone();
        let directory = directory.clone();
        let node = cluster.node.clone();
        let receiver = receiver.clone();
        let renewing_since = renewing_since.clone();
        let hosted = hosted.clone();
        let joined = joined.clone();
        let child = ChildCommand::of(config);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(WATCH_PERIOD);
            let mut said_not_in_sync = false;
            loop {
                tick.tick().await;
                follow(&mirror, &directory, &node, hosted_here);
                let status = mirror.status();
                let lag_ms = (status.lag_seconds * 1000.0) as u64;
                if let Err(e) = directory.set_replica_lag(&node, lag_ms).await {
                    tracing::debug!(event = "directory_error", error = %e);
                }
                let me = directory.cache().node(&node);
                let fence = joined.get().cloned();
                if hosted_here {
                    // The node's own machine holds every change: give the node back.
                    if status.recorded
                        && let Some(me) = &me
                        && hand_over(&mirror, fence.as_deref(), "handing the node back").await
                    {
                        match directory.hand_back(&node, me.epoch).await {
                            Ok(true) => finish(&mirror, &node, "handed_back"),
                            Ok(false) => {}
                            Err(e) => {
                                tracing::warn!(event = "handed_back", result = "failed", error = %e);
                                reopen(&mirror, fence.as_deref());
                            }
                        }
                    }
                    continue;
                }
                if let Some(me) = &me
                    && me.draining
                {
                    if !status.recorded {
                        if !said_not_in_sync {
                            said_not_in_sync = true;
                            tracing::warn!(event = "drained", node = %node, result = "waiting", msg = "the replica is not in sync yet");
                        }
                    } else if hand_over(&mirror, fence.as_deref(), "draining").await {
                        match directory.release(&node, me.epoch).await {
                            Ok(true) => finish(&mirror, &node, "drained"),
                            Ok(false) => {}
                            Err(e) => {
                                tracing::warn!(event = "drained", result = "failed", error = %e);
                                reopen(&mirror, fence.as_deref());
                            }
                        }
                    }
                }
                if let Some(receiver) = &receiver {
                    take_over_lapsed(&directory, &node, receiver, &renewing_since).await;
                }
                host(&directory, &node, &hosted, &child);
            }
        })
    };
    Ok((
        Replication {
            mirror,
            receiver,
            cluster: joined,
            watch,
            renewing_since,
            hosted,
        },
        disk,
    ))
}

/// The partner and epoch as the directory's cache has them now: the ring's next node, or
/// for a node served by another machine after a take-over, its own machine's standby.
fn follow(
    mirror: &replication::Mirror,
    directory: &directory::Directory,
    node: &str,
    hosted: bool,
) {
    let cache = directory.cache();
    let me = cache.node(node);
    if hosted {
        let standby = me.as_ref().and_then(|m| m.standby.clone());
        mirror.set_partner(standby.as_deref().map(|address| (node, address)));
    } else {
        let nodes = cache.nodes();
        let partner = partner_of(&nodes, node);
        mirror.set_partner(
            partner
                .as_ref()
                .and_then(|p| Some((p.name.as_str(), p.replication.as_deref()?))),
        );
    }
    if let Some(me) = me {
        mirror.set_epoch(me.epoch);
    }
}

/// Binds the replication listener, registers it, and starts the receiver.
async fn listen_for_copies(
    listen: &str,
    config: replication::ReceiverConfig,
    admission: Arc<dyn replication::Admission>,
    directory: &directory::Directory,
    node: &str,
) -> Result<(replication::Receiver, String)> {
    // The port may still be held for a moment by a receiver just stopped (standby).
    let deadline = Instant::now() + Duration::from_secs(5);
    let listener = loop {
        match std::net::TcpListener::bind(listen) {
            Ok(listener) => break listener,
            Err(e) if Instant::now() < deadline => {
                tracing::debug!(event = "replication_bind", error = %e);
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => {
                return Err(e)
                    .with_context(|| format!("binding the replication listener on {listen}"));
            }
        }
    };
    let bound = listener.local_addr()?;
    // Registered as configured, unless the port was left to the system.
    let advertised = if listen.ends_with(":0") {
        bound.to_string()
    } else {
        listen.to_string()
    };
    directory
        .set_node_replication(node, Some(&advertised))
        .await
        .context("registering this node's replication listener")?;
    let receiver =
        replication::Receiver::start(listener, config, Arc::new(disk::RealDisk), admission)
            .context("starting the replication listener")?;
    Ok((receiver, advertised))
}

/// Stops acknowledging and waits until the partner has every change queued: `false` (and
/// acknowledging again) if it does not within 10 s.
async fn hand_over(
    mirror: &replication::Mirror,
    cluster: Option<&cluster::Cluster>,
    why: &str,
) -> bool {
    mirror.set_lapsed(Some(why));
    if let Some(c) = cluster {
        c.set_fenced(true);
    }
    let target = mirror.status().queued;
    let deadline = Instant::now() + Duration::from_secs(10);
    while mirror.status().acked < target {
        if Instant::now() >= deadline {
            reopen(mirror, cluster);
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    true
}

fn reopen(mirror: &replication::Mirror, cluster: Option<&cluster::Cluster>) {
    mirror.set_lapsed(None);
    if let Some(c) = cluster {
        c.set_fenced(false);
    }
}

/// The node is the other machine's now: nothing more is acknowledged here, and this
/// process stops in order (SIGTERM to itself).
fn finish(mirror: &replication::Mirror, node: &str, event: &'static str) {
    mirror.set_taken_over(event);
    tracing::warn!(event, node = %node, msg = "the node is served by its other machine now; this process stops");
    let _ = rustix::process::kill_process(rustix::process::getpid(), rustix::process::Signal::TERM);
}

/// Who may stream to a standby: the node itself (from the machine serving it) and, as
/// always, the nodes whose partner this one is.
struct StandbyAdmission {
    partner: PartnerAdmission,
}

impl replication::Admission for StandbyAdmission {
    fn admit(&self, node: &str, epoch: u64) -> Result<(), String> {
        if node == self.partner.node {
            return Ok(());
        }
        self.partner.admit(node, epoch)
    }
}

/// A node whose machine comes back (or is replaced) after a take-over: before anything is
/// opened or bound, it receives its files from the machine serving it, which hands the node
/// back once they are complete (docs/replication.md, "Failover"). Returns at once for a
/// node that was not taken over.
pub(crate) async fn standby_if_taken_over(
    config: &ServerConfig,
    cluster: &cluster::ClusterConfig,
    directory: directory::Directory,
) -> Result<()> {
    let me = &cluster.node;
    let host_of = async |directory: &directory::Directory| -> Result<Option<directory::NodeInfo>> {
        Ok(directory
            .list_nodes()
            .await?
            .into_iter()
            .map(|(n, _)| n)
            .find(|n| n.name == *me && n.host.as_ref().is_some_and(|h| h != me)))
    };
    let Some(row) = host_of(&directory).await? else {
        return Ok(());
    };
    let host = row.host.clone().unwrap_or_default();
    std::fs::create_dir_all(&config.data_dir)?;
    let _lock = server::DataDirLock::acquire(&config.data_dir)?;
    let listen = config
        .cluster_replication
        .as_deref()
        .context("[cluster] replication is needed with replicas = 2")?;
    let key = replication::stream_key(&cluster.secret);
    let mut receiver_config =
        replication::ReceiverConfig::new(key, config.data_dir.join("replicas"));
    receiver_config.own = Some((me.clone(), config.data_dir.clone()));
    let (receiver, advertised) = listen_for_copies(
        listen,
        receiver_config,
        Arc::new(StandbyAdmission {
            partner: PartnerAdmission {
                directory: directory.clone(),
                node: me.clone(),
            },
        }),
        &directory,
        me,
    )
    .await?;
    directory
        .set_standby(me, Some(&advertised))
        .await
        .context("registering this machine as the node's standby")?;
    tracing::warn!(
        event = "standby",
        node = %me,
        host = %host,
        epoch = row.epoch,
        msg = "this node was taken over: receiving its files from the machine serving it"
    );
    println!("standby: {me} is served by {host}; receiving its files");
    let started = Instant::now();
    let mut said = Instant::now();
    loop {
        tokio::time::sleep(Duration::from_millis(250)).await;
        match host_of(&directory).await {
            Ok(None) => break,
            Ok(Some(row)) if said.elapsed() >= Duration::from_secs(10) => {
                said = Instant::now();
                let stage = if row.replica.as_deref() == Some(me.as_str()) {
                    "complete, waiting for the hand-back"
                } else {
                    "copying"
                };
                println!("standby: {stage} ({} s)", started.elapsed().as_secs());
            }
            Ok(Some(_)) => {}
            Err(e) => tracing::warn!(event = "standby", error = %e),
        }
    }
    receiver.stop();
    drop(receiver);
    tracing::info!(
        event = "replica_caught_up",
        node = %me,
        seconds = started.elapsed().as_secs_f64(),
        msg = "handed back: this machine serves the node again"
    );
    println!(
        "standby: {me} handed back after {} s",
        started.elapsed().as_secs()
    );
    Ok(())
}

/// Takes over every node whose replica this node is and whose lease lapsed by the
/// database's clock, if this node's own renewals went through for a whole lease meanwhile
/// (so the lapse is the other node's silence, not the database's).
async fn take_over_lapsed(
    directory: &directory::Directory,
    me: &str,
    receiver: &replication::Receiver,
    renewing_since: &Mutex<Option<Instant>>,
) {
    let healthy = renewing_since
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .is_some_and(|since| since.elapsed() >= cluster::LEASE_TTL + FENCE_MARGIN);
    // A node that gave its lease up (drained) is taken over at once; one that went silent
    // only by a partner that could renew its own lease all along.
    let lapsed: Vec<directory::NodeInfo> = directory
        .cache()
        .nodes()
        .into_iter()
        .filter(|n| n.name != me && !n.up && n.replica.as_deref() == Some(me))
        .filter(|n| n.released || healthy)
        .collect();
    for node in lapsed {
        match directory
            .take_over(&node.name, me, node.epoch, cluster::LEASE_TTL)
            .await
        {
            Ok(Some(epoch)) => {
                // R4: nothing more of the old owner's stream lands in the copy.
                receiver.close(&node.name);
                tracing::warn!(
                    event = "failover",
                    node = %node.name,
                    by = %me,
                    epoch,
                    msg = "the node's lease lapsed: its copy here serves its users now"
                );
            }
            Ok(None) => {}
            Err(e) => {
                tracing::warn!(event = "failover", node = %node.name, result = "failed", error = %e)
            }
        }
    }
}

/// How this machine starts a `mailstow serve` for a node it took over.
#[derive(Clone)]
struct ChildCommand {
    config_file: Option<std::path::PathBuf>,
    data_dir: std::path::PathBuf,
}

impl ChildCommand {
    fn of(config: &ServerConfig) -> ChildCommand {
        ChildCommand {
            config_file: config.config_file.clone(),
            data_dir: std::path::absolute(&config.data_dir).unwrap_or(config.data_dir.clone()),
        }
    }

    fn spawn(&self, node: &str) -> std::io::Result<std::process::Child> {
        let mut command = std::process::Command::new(std::env::current_exe()?);
        if let Some(file) = &self.config_file {
            command.arg("--config").arg(file);
        }
        command
            .arg("--data-dir")
            .arg(&self.data_dir)
            .arg("serve")
            .arg("--host-node")
            .arg(node)
            .stdin(std::process::Stdio::null());
        command.spawn()
    }
}

/// Keeps one child `mailstow serve --host-node` running for every node the directory says
/// this machine serves, and ends the ones it no longer does.
fn host(
    directory: &directory::Directory,
    me: &str,
    hosting: &Mutex<Hosting>,
    command: &ChildCommand,
) {
    let mine: Vec<String> = directory
        .cache()
        .nodes()
        .into_iter()
        .filter(|n| n.name != me && n.host.as_deref() == Some(me))
        .map(|n| n.name)
        .collect();
    let mut hosting = hosting.lock().unwrap_or_else(|p| p.into_inner());
    let Hosting { children, retry } = &mut *hosting;
    let gone: Vec<String> = children
        .iter_mut()
        .filter_map(|(name, (child, _))| {
            let running = matches!(child.try_wait(), Ok(None));
            (!mine.contains(name) || !running).then(|| name.clone())
        })
        .collect();
    for name in gone {
        if let Some((mut child, started)) = children.remove(&name) {
            if mine.contains(&name) {
                // Ended while still this machine's to serve: start it again, later each time
                // it ends soon after starting (no crash loop).
                let pause = retry.get(&name).map_or(HOSTING_RETRY_MIN, |(_, p)| {
                    if started.elapsed() < HOSTING_RETRY_MAX {
                        (*p * 2).min(HOSTING_RETRY_MAX)
                    } else {
                        HOSTING_RETRY_MIN
                    }
                });
                tracing::error!(event = "hosting", node = %name, result = "ended", retry_in_s = pause.as_secs());
                retry.insert(name.clone(), (Instant::now() + pause, pause));
            }
            // Handed back (it stops by itself), or ended: reaped off the async threads.
            std::thread::spawn(move || terminate(&mut child));
        }
    }
    retry.retain(|name, _| mine.contains(name));
    for name in mine {
        if children.contains_key(&name)
            || retry.get(&name).is_some_and(|(at, _)| Instant::now() < *at)
        {
            continue;
        }
        match command.spawn(&name) {
            Ok(child) => {
                tracing::info!(event = "hosting", node = %name, pid = child.id());
                children.insert(name, (child, Instant::now()));
            }
            Err(e) => {
                let pause = retry
                    .get(&name)
                    .map_or(HOSTING_RETRY_MIN, |(_, p)| (*p * 2).min(HOSTING_RETRY_MAX));
                tracing::error!(event = "hosting", node = %name, result = "failed", error = %e, retry_in_s = pause.as_secs());
                retry.insert(name, (Instant::now() + pause, pause));
            }
        }
    }
}

/// The nodes this machine serves after a take-over: each one's child process and when it
/// started, and when a child that failed or ended may be started again.
#[derive(Default)]
struct Hosting {
    children: HashMap<String, (std::process::Child, Instant)>,
    retry: HashMap<String, (Instant, Duration)>,
}

/// A hosted node's process that failed to start, or ended soon after, is started again after
/// this pause, doubled each time up to [`HOSTING_RETRY_MAX`].
const HOSTING_RETRY_MIN: Duration = Duration::from_secs(1);
const HOSTING_RETRY_MAX: Duration = Duration::from_secs(60);

/// SIGTERM, then up to 30 s for the orderly stop, then SIGKILL.
fn terminate(child: &mut std::process::Child) {
    if let Some(pid) = i32::try_from(child.id())
        .ok()
        .and_then(rustix::process::Pid::from_raw)
    {
        let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        if !matches!(child.try_wait(), Ok(None)) {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// Renews this node's lease at its epoch and fences it by its own clock: past the instant
/// the last successful renewal was sent + the lease − [`FENCE_MARGIN`], nothing is
/// acknowledged (syncs wait) and its users are told it is unavailable, until a renewal goes
/// through; a renewal refused for a newer epoch (taken over) fences it for good.
pub(crate) fn spawn_lease(
    directory: directory::Directory,
    node: String,
    mirror: replication::Mirror,
    cluster: Arc<cluster::Cluster>,
    renewing_since: Arc<Mutex<Option<Instant>>>,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        let epoch = directory.cache().node(&node).map(|n| n.epoch).unwrap_or(1);
        // Opened and recovered just now with the directory's word that the node is ours.
        let mut lease_end = Instant::now() + cluster::LEASE_TTL - FENCE_MARGIN;
        let mut last_renewal: Option<Instant> = None;
        let mut fenced = false;
        let mut tick = tokio::time::interval(Duration::from_millis(100));
        loop {
            tick.tick().await;
            if mirror.is_taken_over() {
                // Drained or handed back: the lease is the other machine's to hold.
                return;
            }
            if last_renewal.is_none_or(|t| t.elapsed() >= cluster::LEASE_RENEW) {
                let sent = Instant::now();
                last_renewal = Some(sent);
                let renewal = tokio::time::timeout(
                    RENEW_TIMEOUT,
                    directory.renew_lease_at(&node, epoch, cluster::LEASE_TTL),
                )
                .await;
                match renewal {
                    Ok(Ok(true)) => {
                        lease_end = sent + cluster::LEASE_TTL - FENCE_MARGIN;
                        renewing_since
                            .lock()
                            .unwrap_or_else(|p| p.into_inner())
                            .get_or_insert(sent);
                        if fenced {
                            fenced = false;
                            mirror.set_lapsed(None);
                            cluster.set_fenced(false);
                            tracing::info!(event = "fenced", node = %node, result = "lifted", msg = "the lease is renewed");
                        }
                    }
                    Ok(Ok(false)) => {
                        mirror.set_taken_over("another machine took this node over");
                        cluster.set_fenced(true);
                        tracing::error!(
                            event = "fenced",
                            node = %node,
                            reason = "taken_over",
                            epoch,
                            msg = "another machine serves this node now: nothing is acknowledged \
                                   here; restart this node to make it a replica"
                        );
                        return;
                    }
                    Ok(Err(_)) | Err(_) => {
                        *renewing_since.lock().unwrap_or_else(|p| p.into_inner()) = None;
                    }
                }
            }
            if !fenced && Instant::now() >= lease_end {
                fenced = true;
                mirror.set_lapsed(Some("the lease lapsed"));
                cluster.set_fenced(true);
                tracing::warn!(
                    event = "fenced",
                    node = %node,
                    reason = "lease_lapsed",
                    msg = "no renewal within the lease: nothing is acknowledged until one goes through"
                );
            }
        }
    })
}

impl Replication {
    pub(crate) fn stop(&self) {
        self.watch.abort();
        let mut hosting = self.hosted.lock().unwrap_or_else(|p| p.into_inner());
        for (_, (child, _)) in hosting.children.iter_mut() {
            terminate(child);
        }
        hosting.children.clear();
        self.mirror.stop();
        if let Some(receiver) = &self.receiver {
            receiver.stop();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str, replication: bool) -> directory::NodeInfo {
        directory::NodeInfo {
            name: name.into(),
            lmtp: String::new(),
            imap: String::new(),
            pop3: String::new(),
            web: None,
            managesieve: None,
            up: true,
            replication: replication.then(|| format!("{name}:7025")),
            replica: None,
            epoch: 1,
            host: None,
            standby: None,
            draining: false,
            released: false,
        }
    }

    #[test]
    fn partners_form_a_ring_by_name_over_the_nodes_that_take_copies() {
        let nodes = [node("n1", true), node("n2", true), node("n3", true)];
        let p = |n| partner_of(&nodes, n).map(|p| p.name);
        assert_eq!(p("n1").as_deref(), Some("n2"));
        assert_eq!(p("n2").as_deref(), Some("n3"));
        assert_eq!(p("n3").as_deref(), Some("n1"));
        let nodes = [node("n1", true), node("n2", false), node("n3", true)];
        assert_eq!(
            partner_of(&nodes, "n1").map(|p| p.name).as_deref(),
            Some("n3")
        );
        assert_eq!(
            partner_of(&nodes, "n2").map(|p| p.name).as_deref(),
            Some("n3")
        );
        assert_eq!(partner_of(&[node("n1", true)], "n1"), None);
    }
}
