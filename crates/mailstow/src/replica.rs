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
    receiver: Arc<replication::Receiver>,
    watch: JoinHandle<()>,
    /// Since when this node's own lease renewals have all succeeded: a partner takes a node
    /// over only when it could itself renew for a whole lease meanwhile.
    pub(crate) renewing_since: Arc<Mutex<Option<Instant>>>,
    /// The nodes this machine took over, each served by a child `mailstow serve`.
    hosted: Arc<Mutex<HashMap<String, std::process::Child>>>,
}

/// Writes `nodes.replica` of this node (blocking: called from the mirror's own thread).
struct DirectoryRegistry {
    directory: directory::Directory,
    node: String,
    runtime: tokio::runtime::Handle,
}

impl replication::Registry for DirectoryRegistry {
    fn record(&self, replica: Option<&str>) -> Result<(), String> {
        let write = self.directory.set_replica(&self.node, replica);
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
    let listen = config
        .cluster_replication
        .as_deref()
        .context("[cluster] replication is needed with replicas = 2")?;
    let listener = std::net::TcpListener::bind(listen)
        .with_context(|| format!("binding the replication listener on {listen}"))?;
    let bound = listener.local_addr()?;
    // Registered as configured, unless the port was left to the system.
    let advertised = if listen.ends_with(":0") {
        bound.to_string()
    } else {
        listen.to_string()
    };
    directory
        .set_node_replication(&cluster.node, Some(&advertised))
        .await
        .context("registering this node's replication listener")?;
    let key = replication::stream_key(&cluster.secret);
    let receiver = replication::Receiver::start(
        listener,
        replication::ReceiverConfig {
            key,
            root: config.data_dir.join("replicas"),
            streams_max: 16,
        },
        Arc::new(disk::RealDisk),
        Arc::new(PartnerAdmission {
            directory: directory.clone(),
            node: cluster.node.clone(),
        }),
    )
    .context("starting the replication listener")?;
    let (mirror, disk) = replication::Mirror::new(
        replication::MirrorConfig::new(&cluster.node, key, &config.data_dir),
        inner,
        Box::new(DirectoryRegistry {
            directory: directory.clone(),
            node: cluster.node.clone(),
            runtime: tokio::runtime::Handle::current(),
        }),
    );
    follow(&mirror, directory, &cluster.node);
    let receiver = Arc::new(receiver);
    let renewing_since = Arc::new(Mutex::new(None));
    let hosted = Arc::new(Mutex::new(HashMap::new()));
    let watch = {
        let mirror = mirror.clone();
        let directory = directory.clone();
        let node = cluster.node.clone();
        let receiver = receiver.clone();
        let renewing_since = renewing_since.clone();
        let hosted = hosted.clone();
        let child = ChildCommand::of(config);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(WATCH_PERIOD);
            loop {
                tick.tick().await;
                follow(&mirror, &directory, &node);
                let status = mirror.status();
                let lag_ms = (status.lag_seconds * 1000.0) as u64;
                if let Err(e) = directory.set_replica_lag(&node, lag_ms).await {
                    tracing::debug!(event = "directory_error", error = %e);
                }
                take_over_lapsed(&directory, &node, &receiver, &renewing_since).await;
                host(&directory, &node, &hosted, &child);
            }
        })
    };
    tracing::info!(
        event = "replication_started",
        node = %cluster.node,
        listen = %bound,
        msg = "every change waits for the replica partner before it is acknowledged"
    );
    Ok((
        Replication {
            mirror,
            receiver,
            watch,
            renewing_since,
            hosted,
        },
        disk,
    ))
}

/// The partner and epoch as the directory's cache has them now.
fn follow(mirror: &replication::Mirror, directory: &directory::Directory, node: &str) {
    let cache = directory.cache();
    let nodes = cache.nodes();
    let partner = partner_of(&nodes, node);
    mirror.set_partner(
        partner
            .as_ref()
            .and_then(|p| Some((p.name.as_str(), p.replication.as_deref()?))),
    );
    if let Some(me) = cache.node(node) {
        mirror.set_epoch(me.epoch);
    }
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
    if !healthy {
        return;
    }
    let lapsed: Vec<directory::NodeInfo> = directory
        .cache()
        .nodes()
        .into_iter()
        .filter(|n| n.name != me && !n.up && n.replica.as_deref() == Some(me))
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
    hosted: &Mutex<HashMap<String, std::process::Child>>,
    command: &ChildCommand,
) {
    let mine: Vec<String> = directory
        .cache()
        .nodes()
        .into_iter()
        .filter(|n| n.name != me && n.host.as_deref() == Some(me))
        .map(|n| n.name)
        .collect();
    let mut hosted = hosted.lock().unwrap_or_else(|p| p.into_inner());
    hosted.retain(|name, child| {
        let running = matches!(child.try_wait(), Ok(None));
        if !mine.contains(name) && running {
            terminate(child);
            return false;
        }
        running
    });
    for name in mine {
        if hosted.contains_key(&name) {
            continue;
        }
        match command.spawn(&name) {
            Ok(child) => {
                tracing::info!(event = "hosting", node = %name, pid = child.id());
                hosted.insert(name, child);
            }
            Err(e) => {
                tracing::error!(event = "hosting", node = %name, result = "failed", error = %e)
            }
        }
    }
}

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
        let mut hosted = self.hosted.lock().unwrap_or_else(|p| p.into_inner());
        for (_, child) in hosted.iter_mut() {
            terminate(child);
        }
        hosted.clear();
        self.mirror.stop();
        self.receiver.stop();
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
