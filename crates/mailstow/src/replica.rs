//! Replication in a running node (docs/replication.md): the mirrored disk the engines get,
//! the listener the partner's stream arrives on, and the task that follows the directory
//! (who the partner is, this node's epoch) and reports the lag.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use tokio::task::JoinHandle;

use server::ServerConfig;

/// How often the partner is looked up again and the lag reported.
const WATCH_PERIOD: Duration = Duration::from_secs(1);
/// A directory write of the registry waits at most this long (then it is retried).
const RECORD_TIMEOUT: Duration = Duration::from_secs(5);

/// The running parts; stopped by [`Replication::stop`].
pub(crate) struct Replication {
    pub(crate) mirror: replication::Mirror,
    receiver: replication::Receiver,
    watch: JoinHandle<()>,
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
    let watch = {
        let mirror = mirror.clone();
        let directory = directory.clone();
        let node = cluster.node.clone();
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

impl Replication {
    pub(crate) fn stop(&self) {
        self.watch.abort();
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
